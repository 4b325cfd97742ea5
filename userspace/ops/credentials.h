// spec.credentials issued for one sandbox (issue 15): each credential's
// `issue` program run on the host, its value delivered to the workload (a
// file on a tmpfs of the sandbox's own, or an environment variable), refreshed
// before it expires, and removed and revoked at its ttl or when the sandbox
// ends, whichever is first. A cordon process that dies leaves a state file
// behind; SweepCredentials (at every run's start, at the agent's start and
// on its timer) removes and revokes what it left once it expired or its
// cgroup is gone. Nothing here prints; the value never leaves this file but
// into the delivery and into `revoke`'s stdin.
//
// Layout (root-only but the per-sandbox tmpfs):
//   /run/cordon/credential-store/             0700 root
//     <sandbox>/         tmpfs, 0500, owned by the sandbox's identity; NAME 0400
//                        (attach: 0711 root; NAME 0400 owned by its `owner`)
//     <sandbox>.state    0600: what to revoke after a crash (values included)
//     <sandbox>.lock     flock'ed by the owning cordon process while it lives
//   /run/cordon/credentials/<sandbox>/      the path the workload reads
//
// In `cordon run`, the command's mount namespace has a directory of the
// run's own over /run/cordon/credentials and the sandbox's tmpfs bound onto
// /run/cordon/credentials/<sandbox> in it (RunBinds; a run without file
// credentials gets an empty directory there: CredentialViewCover), and
// every run's has an empty directory over the store (CredentialStoreCover),
// so no other sandbox's credential is visible there. An attached sandbox has no mount
// namespace of its own: its tmpfs is bound onto that path on the host
// (/run/cordon and /run/cordon/credentials 0711: searchable, not listable),
// and only the file's owner (and root) can read it there. Its state says
// "attached": it ends when its sandbox is detached or its cgroup is gone,
// and an agent takes it over (Adopt) to refresh it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "event.pb.h"
#include "ops/oidc.h"
#include "policy/credentials.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon::ops {

constexpr const char* kCredentialStore = "/run/cordon/credential-store";
constexpr const char* kCredentialView = "/run/cordon/credentials";
// Where `cordon run` writes the events of what its sweep removed: other
// sandboxes' credentials, which never go into its own audit log (the agent
// delivers its sweep's events to its own sinks).
constexpr const char* kCredentialSweepLog = "/var/log/cordon/credentials.jsonl";
constexpr size_t kMaxCredentialBytes = 64 * 1024;  // an issue program's stdout, at most
constexpr int kCredentialProgramTimeoutSeconds = 30;

// First 8 hex digits of the SHA-256 of `value`: how events name a value.
std::string CredentialFingerprint(const std::string& value);

// The outcome of one issue or revoke program.
struct ProgramRun {
  bool ok = false;
  std::string output;  // stdout (issue: the credential), at most max_output bytes
  std::string error;   // !ok: "exit status 3", "killed by signal 9", "timed out after 30 s", ...
  // Its stderr, counted and thrown away (it may print secrets there): a
  // failure's error says how much there was.
  size_t stderr_bytes = 0, stderr_lines = 0;
  // !ok: what it printed on stdout all the same (at most max_output bytes):
  // an issue program may have minted a value before it failed, which is
  // then revoked. The caller wipes it.
  std::string printed;
};

// Runs argv (argv[0] an absolute path) as this process's user, outside any
// sandbox: a clean environment (`env` only), its own process group, no
// descriptor but stdin (`input`, then EOF), stdout (read, at most
// max_output bytes: more is an error) and stderr (a pipe, drained and
// counted, never shown). Killed with its process group after
// `timeout_seconds`.
ProgramRun RunCredentialProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                const std::string& input, size_t max_output, int timeout_seconds);

// Where the events of credentials go (the caller adds the sandbox's names).
using CredentialEvents = std::function<void(cordon::v1::AuditEvent)>;

// What the built-in issuer (a credential's `oidc:`) signs with and says
// beyond the sandbox: the agent configuration's oidc section and the policy.
struct OidcContext {
  std::string issuer;   // iss ("": oidc credentials are refused, naming the setting)
  std::string key_dir;  // OidcSigner::LoadOrCreate
  std::string setting;  // where issuer and key_dir come from, for errors ("/etc/cordon/agent.yaml")
  std::string subject;   // sub: the sandbox's name in events and status ("": the store's name of the sandbox)
  std::string policy_name, policy_digest;
};

// What `cordon status` shows of one credential: never its value.
struct CredentialStatus {
  std::string name, fingerprint, deliver, path;
  int64_t issued_at = 0, expires_at = 0;
  bool pending = false;  // a revoke still to run (superseded, or failed before)
  // deliver file: the file is marked for BPF LSM's guard (read back from the
  // kernel): only the sandbox's own tasks and host root may open it.
  bool guarded = false;
};

// "UID[:GID]" or a user name (GID: the user's primary group, else UID).
Result<std::pair<uid_t, gid_t>> ResolveCredentialOwner(const std::string& owner);

class SandboxCredentials {
 public:
  // Before the sandbox exists: the lock taken, and for file delivery the
  // tmpfs mounted (owned by uid:gid) and its mount point in the view made.
  // Nothing is issued yet. `enforcement` names who issues in events
  // ("cordon-run"). With an oidc credential the signing key is loaded first
  // (created when the key directory has none): an unusable key or no issuer
  // fails here, before anything exists.
  static Result<std::unique_ptr<SandboxCredentials>> Prepare(std::vector<policy::CredentialSpec> specs,
                                                             const std::string& sandbox, uid_t uid, gid_t gid,
                                                             std::string enforcement, OidcContext oidc = {});
  // For an attached sandbox (`cordon attach`, the agent): each file owned by
  // its credential's `owner` (required: CheckForAttach), the tmpfs bound onto
  // view_dir() on the host. `sandbox` must be a name SafeCredentialDir accepts.
  static Result<std::unique_ptr<SandboxCredentials>> PrepareForAttach(std::vector<policy::CredentialSpec> specs,
                                                                      const std::string& sandbox,
                                                                      std::string enforcement, OidcContext oidc = {});
  // The state an attached sandbox's cordon left (a `cordon attach` that
  // ended, an agent that stopped or was killed), taken over: its lock taken,
  // its credentials and pending revokes as they were. Fails when another
  // process holds the lock, or the state is not an attached sandbox's.
  static Result<std::unique_ptr<SandboxCredentials>> Adopt(const std::string& sandbox, OidcContext oidc = {});
  // Revokes what is still live (no events), then removes the files, the
  // tmpfs and the lock, and the state unless a revoke failed: then the state
  // keeps those revokes (only them) for a sweep to retry.
  ~SandboxCredentials();
  SandboxCredentials(const SandboxCredentials&) = delete;
  SandboxCredentials& operator=(const SandboxCredentials&) = delete;

  // The credentials outlive this process (a `cordon attach` without an
  // agent): files, tmpfs and state stay, the lock goes; a sweep (or an agent
  // adopting it) takes over. Nothing more is done by this object.
  void Release();

  bool has_files() const { return mounted_; }
  const std::string& sandbox() const { return sandbox_; }
  uint64_t cgroup_id() const { return cgroup_id_; }
  // The sandbox ended without us (attached: detached, or its cgroup removed):
  // the reason, else "".
  std::string Gone() const;
  std::vector<CredentialStatus> Summary() const;
  // The host path of the tmpfs (for a file rule: its inodes are the ones
  // the workload opens) and the path the workload reads.
  const std::string& store_dir() const { return store_dir_; }
  std::string view_dir() const;
  // {source, target} bind mounts for `cordon run`'s mount namespace: its
  // view root (<sandbox>.view in the store, holding an empty <sandbox>) over
  // /run/cordon/credentials, the tmpfs onto view_dir() in it (then
  // CredentialStoreCover, after them).
  std::vector<std::pair<std::string, std::string>> RunBinds() const;

  // Issues each credential in order, for the sandbox's cgroup (id and
  // absolute directory: a sweep after a crash checks it). On failure the
  // ones already issued are revoked and removed, a credential.issue_failed
  // event is emitted, and the error names the credential.
  cordon::Status Issue(uint64_t cgroup_id, const std::string& cgroup_dir, const CredentialEvents& emit);
  // Marks every delivered file as this sandbox's for BPF LSM's guard
  // (credential.read; LsmGuardCredential). For an attach, whose files are
  // written before its sandbox is attached (for the first sandbox of the
  // host, before the BPF LSM object is loaded): called right after. Files
  // written while the object is in force (cordon run's, every refresh) are
  // marked before they are renamed into place. true: every file is marked;
  // false: no BPF LSM object with the guard is in force.
  Result<bool> GuardFiles() const;
  // What the command's environment gets: NAME=value (deliver env) and
  // NAME_FILE=path (deliver file).
  std::vector<std::string> Environment() const;
  // When Tick has something to do next (unix seconds), 0: nothing.
  int64_t NextDeadline() const;
  // Refreshes what is due for refresh, expires (removes, revokes) what
  // reached its ttl, and revokes what is pending (a value a refresh
  // superseded, at its own expiry; a revoke that failed, again) at `now`
  // (unix seconds).
  void Tick(int64_t now, const CredentialEvents& emit);
  // The sandbox ended: every live credential removed and revoked, and every
  // pending revoke run (credential.revoked, `why` its reason).
  void RevokeAll(const std::string& why, const CredentialEvents& emit);

 private:
  struct Live {
    policy::CredentialSpec spec;
    uid_t uid = 0;  // the file's owner
    gid_t gid = 0;
    std::string value;
    std::string fingerprint;
    int64_t issued_at = 0, expires_at = 0;
    int64_t retry_at = 0;  // a refresh failed: next attempt
    bool live = false;
  };
  // A value to revoke later: one a refresh superseded (at its own expiry:
  // the workload may still hold it until then), or one whose revoke failed
  // (again, backing off). Kept in the state, so a sweep finishes it.
  struct Pending {
    std::string name, value;
    std::vector<std::string> revoke;
    int64_t issued_at = 0, expires_at = 0;
    int64_t due = 0;    // unix seconds
    int attempts = 0;   // failed revokes so far
    bool superseded = false;
    bool file = true;   // deliver: file (its events name the path)
  };
  SandboxCredentials() = default;
  // Runs the revoke of each pending value due at `now` (all with `all`);
  // one event each, with why.
  void RunPending(int64_t now, bool all, const std::string& why, const CredentialEvents& emit);
  // A new value: the issue program's stdout, or a token of the built-in
  // issuer; *issued_at is when it was made.
  // What an issue program printed before it failed, or that cordon refused
  // (a NUL byte for env), is revoked (a failed revoke is kept pending).
  Result<std::string> RunIssue(const policy::CredentialSpec& spec, int64_t* issued_at);
  cordon::Status Deliver(const Live& c) const;
  cordon::Status SaveState() const;
  std::string Remove(Live* c);  // file removed, revoke run: the event's revoke field
  cordon::v1::AuditEvent Event(const Live& c, const std::string& kind, const std::string& reason) const;
  std::string FilePath(const Live& c) const;

  std::vector<Live> creds_;
  std::vector<Pending> pending_;
  static Result<std::unique_ptr<SandboxCredentials>> Make(std::vector<policy::CredentialSpec> specs,
                                                          const std::string& sandbox, uid_t uid, gid_t gid,
                                                          std::string enforcement, OidcContext oidc, bool attached);
  std::string sandbox_, enforcement_, store_dir_, cgroup_dir_;
  bool attached_ = false, released_ = false, bound_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  uint64_t cgroup_id_ = 0;
  OidcContext oidc_;
  std::optional<OidcSigner> signer_;  // loaded by Prepare when a credential is oidc
  UniqueFd lock_;
  bool mounted_ = false, view_made_ = false;
};

// {source, target}: an empty directory to bind over the store in every
// `cordon run` mount namespace (a root workload owns no file there but is
// the owner of the store and of the state files, which hold values), made
// if missing.
Result<std::pair<std::string, std::string>> CredentialStoreCover();
// {source, target}: the same empty directory over /run/cordon/credentials,
// for a `cordon run` without file credentials of its own (a run with them
// binds its own view root there: RunBinds), so that no attached sandbox's
// credentials (bound on the host) are visible to the command.
Result<std::pair<std::string, std::string>> CredentialViewCover();

// Credentials whose cordon process is gone (its lock is free): each one that
// expired, or whose cgroup is gone, is removed and revoked (credential.expired
// or credential.revoked, the sandbox's name set); a sandbox with none left
// loses its tmpfs, state and lock. Returns how many were removed.
int SweepCredentials(int64_t now, const CredentialEvents& emit);

// A sandbox name usable as its credentials' directory (letters, digits, _
// and -; not starting with "run-", cordon run's).
bool SafeCredentialDir(const std::string& name);

// What the credential store holds for a sandbox (from its state file; no
// lock taken, values wiped): the store's name, whether it is an attached
// sandbox's, its specs (attached: as issued) and what status shows.
struct CredentialState {
  std::string stem;
  uint64_t cgroup_id = 0;
  bool attached = false;
  std::vector<policy::CredentialSpec> specs;
  std::vector<CredentialStatus> credentials;
};
std::vector<CredentialState> ListCredentialStates();
std::optional<CredentialState> CredentialStateOf(uint64_t cgroup_id);

// Every issued (and superseded, not yet revoked) value of the sandbox whose
// cgroup id is `cgroup_id`, as its state file holds it when Of() is called,
// to be replaced in texts by "(credential NAME)" (also in the escaped form
// events carry): for what cordon copies out of a sandbox's processes
// (containment evidence: command lines, working directories), where a
// workload may have put a value it was given. Taken before anything can end
// them (a cordon run revokes its credentials, state included, as soon as it
// sees its sandbox contained). The values never leave this object; they are
// wiped when it goes.
class CredentialRedaction {
 public:
  static CredentialRedaction Of(uint64_t cgroup_id);
  CredentialRedaction() = default;
  CredentialRedaction(CredentialRedaction&&) = default;
  CredentialRedaction& operator=(CredentialRedaction&&) = default;
  CredentialRedaction(const CredentialRedaction&) = delete;
  CredentialRedaction& operator=(const CredentialRedaction&) = delete;
  ~CredentialRedaction();
  // The number of values replaced.
  size_t Apply(const std::vector<std::string*>& texts) const;

 private:
  std::vector<std::pair<std::string, std::string>> values_;  // name, value
};

// `cordon detach` without an agent: the attached sandbox's credentials
// removed and revoked (credential.revoked, `why`). Nothing when it has none;
// an error when another process holds them (an agent: it revokes them when
// it notices the sandbox gone).
cordon::Status EndAttachedCredentials(uint64_t cgroup_id, const std::string& why, const CredentialEvents& emit);

// Events of credentials that no sink of an agent's takes (cordon run's
// sweep, attach and detach without an agent): appended to
// kCredentialSweepLog. The number not written, and the first error.
size_t WriteCredentialLog(const std::vector<cordon::v1::AuditEvent>& events, std::string* error);

}  // namespace cordon::ops
