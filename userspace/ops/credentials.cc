#include "ops/credentials.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "events/sink.h"
#include "loader/lsm.h"
#include "loader/sandbox.h"
#include "util/clock.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::ops {
namespace {

constexpr const char* kCredentialRunDir = "/run/cordon";
constexpr const char* kCredentialEmpty = "/run/cordon/credential-empty";
constexpr const char* kProgramPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr int64_t kRefreshRetrySeconds = 10;
constexpr size_t kMaxRevokeOutput = 4096;

int64_t Now() { return static_cast<int64_t>(::time(nullptr)); }

void Wipe(std::string* s) {
  if (!s->empty()) OPENSSL_cleanse(s->data(), s->size());
  s->clear();
}

// The state file's fields: hex, so that any byte of a value or an argument
// survives one-line-per-record parsing.
std::string ToHex(const std::string& raw) {
  static const char* const kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2 + 1);
  for (unsigned char c : raw) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out.empty() ? "-" : out;
}

bool FromHex(const std::string& hex, std::string* out) {
  out->clear();
  if (hex == "-") return true;
  if (hex.size() % 2) return false;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi << 4 | lo);
  }
  return true;
}

std::string ArgvToHex(const std::vector<std::string>& argv) {
  if (argv.empty()) return "-";
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : ",") + ToHex(a);
  return out;
}

bool ArgvFromHex(const std::string& hex, std::vector<std::string>* argv) {
  argv->clear();
  if (hex == "-") return true;
  std::stringstream in(hex);
  std::string part, arg;
  while (std::getline(in, part, ',')) {
    if (!FromHex(part, &arg)) return false;
    argv->push_back(arg);
  }
  return !argv->empty();
}

std::string StorePath(const std::string& sandbox, const char* suffix) {
  return std::string(kCredentialStore) + "/" + sandbox + suffix;
}

// Whether the file at `path` is marked for BPF LSM's guard as `sandbox_id`'s
// (asked of the kernel, not assumed).
bool GuardedFile(const std::string& path, uint64_t sandbox_id) {
  UniqueFd fd(::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  return fd.valid() && sandbox_id && LsmCredentialOwner(fd.get()) == sandbox_id;
}

// All of `data` to `fd`; false with errno set (ENOSPC for a short write).
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// Writes `data` to `path` (0600) through a temporary file and a rename.
Status WriteAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  (void)::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return SysError("create " + tmp);
  if (!WriteAll(fd.get(), data)) {
    Error e = SysError("write " + tmp);
    (void)::unlink(tmp.c_str());
    return e;
  }
  fd.Reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = SysError("rename " + tmp);
    (void)::unlink(tmp.c_str());
    return e;
  }
  return {};
}

// One record of a state file: what a sweep needs to remove and revoke.
struct SavedCredential {
  std::string name, value;
  int64_t issued_at = 0, expires_at = 0;
  bool file = true;
  std::vector<std::string> revoke;
};
// A revoke still to run: a value a refresh superseded (due at its own
// expiry), or one whose revoke failed (due at the next retry).
struct SavedPending {
  std::string name, value;
  int64_t issued_at = 0, expires_at = 0, due = 0;
  int attempts = 0;
  bool superseded = false, file = true;
  std::vector<std::string> revoke;
};
// What a credential is (attached sandboxes: an agent that takes the state
// over refreshes it, and an update compares it).
struct SavedSpec {
  policy::CredentialSpec spec;
  uid_t uid = 0;
  gid_t gid = 0;
};
struct SavedState {
  std::string sandbox, enforcement, cgroup_dir;
  uint64_t cgroup_id = 0;
  bool attached = false;
  std::vector<SavedSpec> specs;
  std::vector<SavedCredential> creds;
  std::vector<SavedPending> pending;
};

// Seconds before retrying a revoke that failed `attempts` times: 5 s,
// doubling, at most an hour. Never given up: a credential cordon could not
// revoke stays in the state (and in the events) until its revoke works.
int64_t RevokeRetryDelay(int attempts) {
  int64_t delay = 5;
  for (int i = 1; i < attempts && delay < 3600; ++i) delay *= 2;
  return std::min<int64_t>(delay, 3600);
}

std::string FormatState(const SavedState& s) {
  std::string out = "cordon-credentials 2\n";
  out += "sandbox " + ToHex(s.sandbox) + " " + ToHex(s.enforcement) + "\n";
  out += "cgroup " + std::to_string(s.cgroup_id) + " " + ToHex(s.cgroup_dir) + "\n";
  if (s.attached) out += "attached\n";
  for (const auto& sp : s.specs) {
    const policy::CredentialSpec& c = sp.spec;
    out += "spec " + ToHex(c.name) + " " + ArgvToHex(c.issue) + " " + ArgvToHex(c.revoke) + " " +
           std::to_string(c.ttl_seconds) + " " + std::to_string(c.refresh_before_seconds) + " " +
           (c.deliver == policy::CredentialSpec::Deliver::kFile ? "file" : "env") + " " + ToHex(c.oidc_audience) + " " +
           ToHex(c.owner) + " " + std::to_string(sp.uid) + " " + std::to_string(sp.gid) + "\n";
  }
  for (const auto& c : s.creds)
    out += "credential " + ToHex(c.name) + " " + std::to_string(c.issued_at) + " " + std::to_string(c.expires_at) +
           " " + (c.file ? "file" : "env") + " " + ToHex(c.value) + " " + ArgvToHex(c.revoke) + "\n";
  for (const auto& p : s.pending)
    out += "pending " + ToHex(p.name) + " " + std::to_string(p.issued_at) + " " + std::to_string(p.expires_at) + " " +
           std::to_string(p.due) + " " + std::to_string(p.attempts) + " " + (p.superseded ? "superseded" : "failed") +
           " " + (p.file ? "file" : "env") + " " + ToHex(p.value) + " " + ArgvToHex(p.revoke) + "\n";
  return out;
}

bool ParseState(const std::string& text, SavedState* s) {
  std::stringstream in(text);
  std::string line;
  // Version 1 (before attached sandboxes) has no attached and spec lines.
  if (!std::getline(in, line) || (line != "cordon-credentials 1" && line != "cordon-credentials 2")) return false;
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string tag;
    fields >> tag;
    if (tag == "sandbox") {
      std::string a, b;
      if (!(fields >> a >> b) || !FromHex(a, &s->sandbox) || !FromHex(b, &s->enforcement)) return false;
    } else if (tag == "attached") {
      s->attached = true;
    } else if (tag == "spec") {
      SavedSpec sp;
      std::string name, issue, revoke, deliver, audience, owner;
      if (!(fields >> name >> issue >> revoke >> sp.spec.ttl_seconds >> sp.spec.refresh_before_seconds >> deliver >>
            audience >> owner >> sp.uid >> sp.gid) ||
          !FromHex(name, &sp.spec.name) || !ArgvFromHex(issue, &sp.spec.issue) ||
          !ArgvFromHex(revoke, &sp.spec.revoke) || !FromHex(audience, &sp.spec.oidc_audience) ||
          !FromHex(owner, &sp.spec.owner) || (deliver != "file" && deliver != "env"))
        return false;
      sp.spec.deliver =
          deliver == "file" ? policy::CredentialSpec::Deliver::kFile : policy::CredentialSpec::Deliver::kEnv;
      s->specs.push_back(std::move(sp));
    } else if (tag == "cgroup") {
      std::string dir;
      if (!(fields >> s->cgroup_id >> dir) || !FromHex(dir, &s->cgroup_dir)) return false;
    } else if (tag == "credential") {
      SavedCredential c;
      std::string name, deliver, value, revoke;
      if (!(fields >> name >> c.issued_at >> c.expires_at >> deliver >> value >> revoke) || !FromHex(name, &c.name) ||
          !FromHex(value, &c.value) || !ArgvFromHex(revoke, &c.revoke) || (deliver != "file" && deliver != "env"))
        return false;
      c.file = deliver == "file";
      s->creds.push_back(std::move(c));
    } else if (tag == "pending") {
      SavedPending p;
      std::string name, why, deliver, value, revoke;
      if (!(fields >> name >> p.issued_at >> p.expires_at >> p.due >> p.attempts >> why >> deliver >> value >> revoke) ||
          !FromHex(name, &p.name) || !FromHex(value, &p.value) || !ArgvFromHex(revoke, &p.revoke) ||
          (why != "superseded" && why != "failed") || (deliver != "file" && deliver != "env") || p.attempts < 0)
        return false;
      p.superseded = why == "superseded";
      p.file = deliver == "file";
      s->pending.push_back(std::move(p));
    } else {
      return false;
    }
  }
  return true;
}

cordon::v1::AuditEvent CredentialEvent(const std::string& kind, const std::string& enforcement, const std::string& name,
                                       const std::string& value, int64_t issued_at, int64_t expires_at, bool file,
                                       const std::string& path, const std::string& revoke, const std::string& reason) {
  cordon::v1::AuditEvent e;
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  e.mutable_time()->set_seconds(ts.tv_sec);
  e.mutable_time()->set_nanos(static_cast<int32_t>(ts.tv_nsec));
  e.set_kind(kind);
  e.set_verdict("noted");
  e.set_enforcement(enforcement);
  e.set_reason(reason);
  auto* c = e.mutable_credential();
  c->set_name(name);
  if (!value.empty()) c->set_fingerprint(CredentialFingerprint(value));
  c->set_issued_at(issued_at);
  c->set_expires_at(expires_at);
  c->set_deliver(file ? "file" : "env");
  if (file) c->set_path(path);
  if (!revoke.empty()) c->set_revoke(revoke);
  return e;
}

// Runs `revoke` with the value on stdin: the event's revoke field.
std::string RunRevoke(const std::vector<std::string>& revoke, const std::string& sandbox, const std::string& name,
                      const std::string& value) {
  if (revoke.empty()) return "none";
  ProgramRun r = RunCredentialProgram(revoke, {kProgramPath, "CORDON_SANDBOX=" + sandbox, "CORDON_CREDENTIAL=" + name},
                                      value, kMaxRevokeOutput, kCredentialProgramTimeoutSeconds);
  return r.ok ? "ran" : "failed: " + r.error;
}

// A sandbox or credential name as cordon makes them (run-<pid>-<hex>;
// [A-Za-z_][A-Za-z0-9_]*): no '/', no dot names.
bool SafeName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char ch : name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-')) return false;
  return true;
}

// What FormatState can write for kMaxCredentials of kMaxCredentialBytes
// (hex doubles them), with room for the lines around them.
constexpr size_t kMaxStateBytes = policy::kMaxCredentials * (2 * kMaxCredentialBytes + 64 * 1024) + 64 * 1024;

void Unmount(const std::string& dir) {
  if (::umount2(dir.c_str(), UMOUNT_NOFOLLOW) != 0 && errno == EBUSY)
    (void)::umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
}

void RemoveSandboxDirs(const std::string& sandbox) {
  // An attached sandbox's view is a bind of the tmpfs on the host: it goes first.
  const std::string view = std::string(kCredentialView) + "/" + sandbox;
  Unmount(view);
  const std::string dir = StorePath(sandbox, "");
  Unmount(dir);
  (void)::rmdir(dir.c_str());
  (void)::rmdir(view.c_str());
  (void)::rmdir(StorePath(sandbox, (".view/" + sandbox).c_str()).c_str());  // cordon run's view root
  (void)::rmdir(StorePath(sandbox, ".view").c_str());
}

// The built-in issuer's key, when a credential is oidc.
Result<std::optional<OidcSigner>> LoadSigner(const std::vector<policy::CredentialSpec>& specs,
                                             const OidcContext& oidc) {
  for (const auto& spec : specs) {
    if (spec.oidc_audience.empty()) continue;
    if (oidc.issuer.empty())
      return Error{"credential " + Quoted(spec.name) +
                   ": the built-in issuer has no issuer URL: set oidc.issuer (or metrics.listen, whose URL is the "
                   "default) in " +
                   oidc.setting};
    auto signer = OidcSigner::LoadOrCreate(oidc.key_dir);
    if (!signer)
      return Error{"credential " + Quoted(spec.name) + ": the built-in issuer's signing key (oidc.keyDir in " +
                   oidc.setting + "): " + signer.error().ToString()};
    return std::optional<OidcSigner>(std::move(*signer));
  }
  return std::optional<OidcSigner>();
}

// An attached sandbox's end, seen from its state: "" while it lasts.
std::string AttachedGone(uint64_t cgroup_id, const std::string& cgroup_dir) {
  struct stat st;
  if (cgroup_dir.empty() || ::stat(cgroup_dir.c_str(), &st) != 0 || st.st_ino != cgroup_id)
    return "its sandbox's cgroup is gone";
  if (!GetSandbox(cgroup_id)) return "its sandbox was detached";
  return "";
}

bool ReadState(const std::string& stem, SavedState* state);

// The state's lock, taken without waiting: invalid when its owner lives.
UniqueFd TryLock(const std::string& sandbox) {
  UniqueFd fd(::open(StorePath(sandbox, ".lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) fd.Reset();
  return fd;
}

}  // namespace

std::string CredentialFingerprint(const std::string& value) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(value.data(), value.size(), digest, &len, EVP_sha256(), nullptr) != 1 || len < 4) return "";
  char hex[9];
  std::snprintf(hex, sizeof hex, "%02x%02x%02x%02x", digest[0], digest[1], digest[2], digest[3]);
  return hex;
}

ProgramRun RunCredentialProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                const std::string& input, size_t max_output, int timeout_seconds) {
  ProgramRun run;
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') return run.error = "not an absolute path", run;
  for (const auto& s : env)
    if (s.find('\0') != std::string::npos) return run.error = "an environment value holds a NUL byte", run;
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return run.error = std::string("pipe: ") + std::strerror(errno), run;
  UniqueFd in_read(in[0]), in_write(in[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) return run.error = std::string("pipe: ") + std::strerror(errno), run;
  UniqueFd out_read(out[0]), out_write(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return run.error = std::string("pipe: ") + std::strerror(errno), run;
  UniqueFd err_read(err[0]), err_write(err[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_read.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // cordon run holds signals blocked (signalfd)
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return run.error = std::string("cannot start ") + argv[0] + ": " + std::strerror(rc), run;
  in_read.Reset();
  out_write.Reset();
  err_write.Reset();
  (void)::fcntl(in_write.get(), F_SETFL, O_NONBLOCK);
  if (input.empty()) in_write.Reset();

  const int64_t deadline = MonoMs() + static_cast<int64_t>(timeout_seconds) * 1000;
  size_t written = 0;
  bool too_much = false, timed_out = false;
  // A SIGPIPE from writing to a program that does not read its stdin must
  // not end this process: EPIPE instead.
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  int status = 0;
  bool reaped = false, stderr_open_line = false;
  while (out_read.valid() || err_read.valid()) {
    // Its stdout is complete and it exited: a stderr still open is held by
    // something it left behind, not waited for.
    if (!out_read.valid() && ::waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      break;
    }
    const int64_t left = deadline - MonoMs();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    // An invalid descriptor (-1) is skipped by poll.
    struct pollfd fds[3] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}, {in_write.get(), POLLOUT, 0}};
    int n = ::poll(fds, 3, static_cast<int>(std::min<int64_t>(left, out_read.valid() ? 1000 : 20)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      // Counted, never kept: what a program prints there may be a secret.
      char buf[4096];
      ssize_t r = ::read(err_read.get(), buf, sizeof buf);
      if (r > 0) {
        run.stderr_bytes += static_cast<size_t>(r);
        run.stderr_lines += static_cast<size_t>(std::count(buf, buf + r, '\n'));
        stderr_open_line = buf[r - 1] != '\n';
        explicit_bzero(buf, sizeof buf);
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        err_read.Reset();
      }
    }
    if (in_write.valid() && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(in_write.get(), input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) in_write.Reset();
    }
    if (out_read.valid() && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[4096];
      ssize_t r = ::read(out_read.get(), buf, sizeof buf);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        out_read.Reset();
        continue;  // its stderr may still be open
      }
      if (run.output.size() + static_cast<size_t>(r) > max_output) {
        too_much = true;
        break;
      }
      run.output.append(buf, static_cast<size_t>(r));
    }
  }
  in_write.Reset();
  out_read.Reset();
  err_read.Reset();
  ::sigaction(SIGPIPE, &previous, nullptr);
  // Its output is complete (or refused): it has until the deadline to exit.
  while (!reaped) {
    pid_t w = timed_out || too_much ? 0 : ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      // Not reaped here (SIGCHLD ignored?): its outcome is unknown, a failure.
      run.error = std::string("cannot wait for it: ") + std::strerror(errno);
      Wipe(&run.output);
      return run;
    }
    if (timed_out || too_much || MonoMs() >= deadline) {
      timed_out = timed_out || !too_much;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    ::usleep(5000);
  }
  if (too_much) {
    run.error = "printed more than " + std::to_string(max_output) + " bytes";
  } else if (timed_out) {
    run.error = "timed out after " + std::to_string(timeout_seconds) + " s (killed)";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    run.error = "exit status " + std::to_string(WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    run.error = "killed by signal " + std::to_string(WTERMSIG(status));
  } else {
    run.ok = true;
  }
  if (!run.ok) {
    run.printed = std::move(run.output);
    run.output.clear();
    const size_t lines = run.stderr_lines + (stderr_open_line ? 1 : 0);
    if (lines)
      run.error += " (it wrote " + std::to_string(lines) + (lines > 1 ? " lines" : " line") +
                   " to stderr, not shown: it may hold secrets; run it by hand to see)";
  }
  return run;
}

// ---- SandboxCredentials

Result<std::pair<uid_t, gid_t>> ResolveCredentialOwner(const std::string& owner) {
  auto number = [](const std::string& text, uint32_t* out) {
    if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return false;
    const unsigned long long v = std::stoull(text);
    if (v >= (1ull << 31)) return false;
    *out = static_cast<uint32_t>(v);
    return true;
  };
  std::vector<char> buf(16384);
  struct passwd pw, *found = nullptr;
  const size_t colon = owner.find(':');
  uint32_t uid = 0, gid = 0;
  if (number(owner.substr(0, colon), &uid)) {
    if (colon != std::string::npos) {
      if (!number(owner.substr(colon + 1), &gid)) return Error{"owner " + Quoted(owner) + ": not UID[:GID]"};
      return std::make_pair(static_cast<uid_t>(uid), static_cast<gid_t>(gid));
    }
    // A uid alone: its user's primary group, else the same number.
    if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found)
      return std::make_pair(static_cast<uid_t>(uid), found->pw_gid);
    return std::make_pair(static_cast<uid_t>(uid), static_cast<gid_t>(uid));
  }
  if (colon != std::string::npos) return Error{"owner " + Quoted(owner) + ": not UID[:GID]"};
  if (::getpwnam_r(owner.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found)
    return Error{"owner " + Quoted(owner) + ": no such user on this host"};
  return std::make_pair(found->pw_uid, found->pw_gid);
}

Result<std::unique_ptr<SandboxCredentials>> SandboxCredentials::Prepare(std::vector<policy::CredentialSpec> specs,
                                                                        const std::string& sandbox, uid_t uid,
                                                                        gid_t gid, std::string enforcement,
                                                                        OidcContext oidc) {
  return Make(std::move(specs), sandbox, uid, gid, std::move(enforcement), std::move(oidc), false);
}

Result<std::unique_ptr<SandboxCredentials>> SandboxCredentials::PrepareForAttach(
    std::vector<policy::CredentialSpec> specs, const std::string& sandbox, std::string enforcement, OidcContext oidc) {
  if (!SafeCredentialDir(sandbox))
    return Error{"sandbox name " + Quoted(sandbox) + " cannot name its credentials' directory (" + kCredentialView +
                 "/<sandbox>): give --name with letters, digits, _ and - only (not starting with run-)"};
  return Make(std::move(specs), sandbox, 0, 0, std::move(enforcement), std::move(oidc), true);
}

Result<std::unique_ptr<SandboxCredentials>> SandboxCredentials::Make(std::vector<policy::CredentialSpec> specs,
                                                                     const std::string& sandbox, uid_t uid, gid_t gid,
                                                                     std::string enforcement, OidcContext oidc,
                                                                     bool attached) {
  std::unique_ptr<SandboxCredentials> c(new SandboxCredentials());
  auto signer = LoadSigner(specs, oidc);
  if (!signer) return signer.error();
  if (*signer) c->signer_.emplace(std::move(**signer));
  c->oidc_ = std::move(oidc);
  c->sandbox_ = sandbox;
  c->enforcement_ = std::move(enforcement);
  c->uid_ = uid;
  c->gid_ = gid;
  c->attached_ = attached;
  bool files = false;
  for (auto& spec : specs) {
    const bool file = spec.deliver == policy::CredentialSpec::Deliver::kFile;
    files = files || file;
    Live live;
    live.uid = uid;
    live.gid = gid;
    if (attached && file) {
      if (spec.owner.empty())
        return Error{policy::CredentialError(spec.at, "credential " + Quoted(spec.name) + ": no owner")};
      auto owner = ResolveCredentialOwner(spec.owner);
      if (!owner)
        return Error{
            policy::CredentialError(spec.at, "credential " + Quoted(spec.name) + ": " + owner.error().ToString())};
      live.uid = owner->first;
      live.gid = owner->second;
    }
    live.spec = std::move(spec);
    c->creds_.push_back(std::move(live));
  }
  CORDON_TRY(MakeDirs(kCredentialStore, 0700));
  if (::chmod(kCredentialStore, 0700) != 0) return SysError(std::string("chmod ") + kCredentialStore);
  c->lock_ = TryLock(sandbox);
  if (!c->lock_.valid()) return SysError("lock " + StorePath(sandbox, ".lock"));
  // Another sandbox of this name left credentials (attached, or a stale
  // state a sweep has not finished): not mixed with these.
  struct stat st;
  if (::lstat(StorePath(sandbox, ".state").c_str(), &st) == 0 || ::lstat(StorePath(sandbox, "").c_str(), &st) == 0) {
    c->released_ = true;  // nothing of the other's is touched
    c->lock_.Reset();
    return Error{"the credential store already holds credentials of a sandbox named " + Quoted(sandbox) +
                 (attached ? " (another sandbox of that name, or one not yet swept): give --name" : "")};
  }
  if (!files) return c;
  c->store_dir_ = StorePath(sandbox, "");
  if (::mkdir(c->store_dir_.c_str(), 0700) != 0) return SysError("create " + c->store_dir_);
  // run: the tmpfs is the command's (0500); attach: root's, searchable
  // (0711: nothing listed), each file its owner's.
  const std::string options = "size=1m,nr_inodes=128,mode=" + std::string(attached ? "0711" : "0500") +
                              ",uid=" + std::to_string(uid) + ",gid=" + std::to_string(gid);
  if (::mount("cordon-credentials", c->store_dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              options.c_str()) != 0) {
    Error e = SysError("mount the credentials tmpfs on " + c->store_dir_);
    (void)::rmdir(c->store_dir_.c_str());
    return e;
  }
  c->mounted_ = true;
  // The command's identity must reach its own view: /run/cordon and the
  // view searchable by all (0711: nothing listed; every entry but the views
  // is 0700 root or a 0600 socket).
  CORDON_TRY(MakeDirs(kCredentialView, 0711));
  for (const char* dir : {kCredentialRunDir, kCredentialView})
    if (::chmod(dir, 0711) != 0) return SysError(std::string("chmod ") + dir);
  if (!attached) {
    // cordon run: the view is made in the command's mount namespace only: a
    // directory of its own (<sandbox>.view, holding an empty <sandbox>) is
    // bound over /run/cordon/credentials there, so that the command sees
    // its own credentials and no attached sandbox's (RunBinds).
    const std::string root = StorePath(sandbox, ".view");
    if (::mkdir(root.c_str(), 0711) != 0) return SysError("create " + root);
    c->view_made_ = true;
    if (::mkdir((root + "/" + sandbox).c_str(), 0755) != 0) return SysError("create " + root + "/" + sandbox);
    return c;
  }
  if (::mkdir(c->view_dir().c_str(), 0755) != 0) return SysError("create " + c->view_dir());
  c->view_made_ = true;
  {
    // No mount namespace of its own: the tmpfs is bound where the workload
    // reads it, on the host, read-only there (cordon writes in the store).
    if (::mount(c->store_dir_.c_str(), c->view_dir().c_str(), nullptr, MS_BIND, nullptr) != 0)
      return SysError("bind the credentials tmpfs onto " + c->view_dir());
    c->bound_ = true;
    if (::mount(nullptr, c->view_dir().c_str(), nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
      return SysError("make " + c->view_dir() + " read-only");
  }
  return c;
}

Result<std::unique_ptr<SandboxCredentials>> SandboxCredentials::Adopt(const std::string& sandbox, OidcContext oidc) {
  if (!SafeName(sandbox)) return Error{"not a credential store name: " + Quoted(sandbox)};
  UniqueFd lock = TryLock(sandbox);
  if (!lock.valid()) return Error{"the credentials of " + Quoted(sandbox) + " are held by another process"};
  SavedState state;
  if (!ReadState(sandbox, &state)) return Error{"the credential state of " + Quoted(sandbox) + " cannot be read"};
  struct Wiper {
    SavedState* s;
    ~Wiper() {
      for (auto& c : s->creds) Wipe(&c.value);
      for (auto& p : s->pending) Wipe(&p.value);
    }
  } wiper{&state};
  if (!state.attached) return Error{"the credentials of " + Quoted(sandbox) + " are not an attached sandbox's"};
  std::vector<policy::CredentialSpec> specs;
  for (const auto& sp : state.specs) specs.push_back(sp.spec);
  std::unique_ptr<SandboxCredentials> c(new SandboxCredentials());
  auto signer = LoadSigner(specs, oidc);
  if (!signer) return signer.error();
  if (*signer) c->signer_.emplace(std::move(**signer));
  c->oidc_ = std::move(oidc);
  c->sandbox_ = sandbox;
  c->enforcement_ = state.enforcement;
  c->attached_ = true;
  c->cgroup_id_ = state.cgroup_id;
  c->cgroup_dir_ = state.cgroup_dir;
  c->lock_ = std::move(lock);
  for (const auto& sp : state.specs) {
    Live live;
    live.spec = sp.spec;
    live.uid = sp.uid;
    live.gid = sp.gid;
    for (auto& saved : state.creds) {
      if (saved.name != sp.spec.name) continue;
      live.value = saved.value;
      live.fingerprint = CredentialFingerprint(live.value);
      live.issued_at = saved.issued_at;
      live.expires_at = saved.expires_at;
      live.live = true;
    }
    c->mounted_ = c->mounted_ || sp.spec.deliver == policy::CredentialSpec::Deliver::kFile;
    c->creds_.push_back(std::move(live));
  }
  for (const auto& p : state.pending)
    c->pending_.push_back(
        {p.name, p.value, p.revoke, p.issued_at, p.expires_at, p.due, p.attempts, p.superseded, p.file});
  if (c->mounted_) {
    c->store_dir_ = StorePath(sandbox, "");
    c->view_made_ = c->bound_ = true;
  }
  return c;
}

void SandboxCredentials::Release() {
  released_ = true;
  lock_.Reset();
}

std::string SandboxCredentials::Gone() const { return attached_ ? AttachedGone(cgroup_id_, cgroup_dir_) : ""; }

std::vector<CredentialStatus> SandboxCredentials::Summary() const {
  std::vector<CredentialStatus> out;
  for (const Live& c : creds_)
    if (c.live) {
      const bool file = c.spec.deliver == policy::CredentialSpec::Deliver::kFile;
      out.push_back({c.spec.name, c.fingerprint, file ? "file" : "env", FilePath(c), c.issued_at, c.expires_at, false,
                     file && GuardedFile(store_dir_ + "/" + c.spec.name, cgroup_id_)});
    }
  for (const Pending& p : pending_)
    out.push_back({p.name, CredentialFingerprint(p.value), p.file ? "file" : "env",
                   p.file ? view_dir() + "/" + p.name : "", p.issued_at, p.expires_at, true});
  return out;
}

SandboxCredentials::~SandboxCredentials() {
  if (released_) {
    for (Live& c : creds_) Wipe(&c.value);
    for (auto& p : pending_) Wipe(&p.value);
    return;
  }
  for (Live& c : creds_)
    if (c.live) (void)Remove(&c);
  if (bound_) Unmount(view_dir());
  if (mounted_) Unmount(store_dir_);
  if (mounted_) (void)::rmdir(store_dir_.c_str());
  if (view_made_ && attached_) (void)::rmdir(view_dir().c_str());
  if (view_made_ && !attached_) {
    (void)::rmdir(StorePath(sandbox_, (".view/" + sandbox_).c_str()).c_str());
    (void)::rmdir(StorePath(sandbox_, ".view").c_str());
  }
  // Revokes that failed stay in the state for a sweep to retry (values
  // superseded by a refresh are revoked now: the sandbox has ended).
  for (auto& p : pending_) {
    if (!p.superseded) continue;
    if (RunRevoke(p.revoke, sandbox_, p.name, p.value).rfind("failed", 0) == 0) {
      p.superseded = false;
      p.attempts = 1;
      p.due = Now() + RevokeRetryDelay(1);
    } else {
      Wipe(&p.value);
      p.name.clear();
    }
  }
  std::erase_if(pending_, [](const Pending& p) { return p.name.empty(); });
  if (pending_.empty()) (void)::unlink(StorePath(sandbox_, ".state").c_str());
  else (void)SaveState();
  for (auto& p : pending_) Wipe(&p.value);
  if (lock_.valid() && pending_.empty()) (void)::unlink(StorePath(sandbox_, ".lock").c_str());
}

std::string SandboxCredentials::view_dir() const { return std::string(kCredentialView) + "/" + sandbox_; }

std::vector<std::pair<std::string, std::string>> SandboxCredentials::RunBinds() const {
  if (!mounted_) return {};
  return {{StorePath(sandbox_, ".view"), kCredentialView}, {store_dir_, view_dir()}};
}

Result<std::pair<std::string, std::string>> CredentialViewCover() {
  CORDON_TRY(MakeDirs(kCredentialView, 0711));
  auto store = CredentialStoreCover();  // makes the empty directory
  if (!store) return store.error();
  return std::make_pair(store->first, std::string(kCredentialView));
}

Result<std::pair<std::string, std::string>> CredentialStoreCover() {
  CORDON_TRY(MakeDirs(kCredentialStore, 0700));
  if (::chmod(kCredentialStore, 0700) != 0) return SysError(std::string("chmod ") + kCredentialStore);
  if (::mkdir(kCredentialEmpty, 0555) != 0 && errno != EEXIST) return SysError(std::string("create ") + kCredentialEmpty);
  struct stat st;
  if (::lstat(kCredentialEmpty, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0)
    return Error{std::string(kCredentialEmpty) + " is not a directory of root's"};
  if (::chmod(kCredentialEmpty, 0555) != 0) return SysError(std::string("chmod ") + kCredentialEmpty);
  return std::make_pair(std::string(kCredentialEmpty), std::string(kCredentialStore));
}

std::string SandboxCredentials::FilePath(const Live& c) const {
  return c.spec.deliver == policy::CredentialSpec::Deliver::kFile ? view_dir() + "/" + c.spec.name : "";
}

Result<std::string> SandboxCredentials::RunIssue(const policy::CredentialSpec& spec, int64_t* issued_at) {
  // A value this function will not hand on: revoked, so that nothing cordon
  // was given outlives the refusal at the issuer.
  auto revoke_refused = [&](std::string* value) -> std::string {
    if (value->empty()) return "";
    std::string said;
    if (spec.revoke.empty()) {
      said = "; what it printed was discarded (no revoke program)";
    } else {
      const int64_t now = Now();
      std::string revoked = RunRevoke(spec.revoke, sandbox_, spec.name, *value);
      if (revoked.rfind("failed", 0) == 0) {
        pending_.push_back({spec.name, *value, spec.revoke, now, now, now + RevokeRetryDelay(1), 1, false,
                            spec.deliver == policy::CredentialSpec::Deliver::kFile});
        (void)SaveState();
        revoked += "; retried in " + std::to_string(RevokeRetryDelay(1)) + " s";
      }
      said = "; what it printed was revoked (" + revoked + ")";
    }
    Wipe(value);
    return said;
  };
  if (!spec.oidc_audience.empty()) {
    if (!signer_) return Error{"credential " + Quoted(spec.name) + ": the built-in issuer has no signing key"};
    OidcClaims claims;
    claims.issuer = oidc_.issuer;
    claims.subject = oidc_.subject.empty() ? sandbox_ : oidc_.subject;
    claims.audience = spec.oidc_audience;
    claims.jti = NewJti();
    claims.issued_at = *issued_at = Now();
    claims.expires_at = claims.issued_at + static_cast<int64_t>(spec.ttl_seconds);
    claims.cgroup_id = cgroup_id_;
    claims.policy_name = oidc_.policy_name;
    claims.policy_digest = oidc_.policy_digest;
    auto token = signer_->Sign(claims);
    if (!token) return Error{"credential " + Quoted(spec.name) + ": the built-in issuer: " + token.error().ToString()};
    return std::move(*token);
  }
  ProgramRun r = RunCredentialProgram(
      spec.issue,
      {kProgramPath, "CORDON_SANDBOX=" + sandbox_, "CORDON_CGROUP_ID=" + std::to_string(cgroup_id_),
       "CORDON_TTL_SECONDS=" + std::to_string(spec.ttl_seconds), "CORDON_CREDENTIAL=" + spec.name},
      "", kMaxCredentialBytes, kCredentialProgramTimeoutSeconds);
  if (!r.ok) {
    // As a value is delivered: without its line end. (Printed more than the
    // limit: the first bytes are what revoke gets.)
    if (!r.printed.empty() && r.printed.back() == '\n') r.printed.pop_back();
    if (!r.printed.empty() && r.printed.back() == '\r') r.printed.pop_back();
    const std::string said = revoke_refused(&r.printed);
    return Error{"credential " + Quoted(spec.name) + ": issue: " + r.error + said};
  }
  std::string value = std::move(r.output);
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (!value.empty() && value.back() == '\r') value.pop_back();
  if (value.empty()) return Error{"credential " + Quoted(spec.name) + ": issue: printed nothing"};
  if (spec.deliver == policy::CredentialSpec::Deliver::kEnv && value.find('\0') != std::string::npos) {
    const std::string said = revoke_refused(&value);
    return Error{"credential " + Quoted(spec.name) + ": issue: printed a NUL byte (deliver: env cannot hold it)" +
                 said};
  }
  *issued_at = Now();
  return value;
}

Status SandboxCredentials::Deliver(const Live& c) const {
  if (c.spec.deliver != policy::CredentialSpec::Deliver::kFile) return {};
  const std::string final_path = store_dir_ + "/" + c.spec.name, tmp = store_dir_ + "/." + c.spec.name + ".tmp";
  (void)::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400));
  if (!fd.valid()) return SysError("credential " + Quoted(c.spec.name) + ": create " + tmp);
  // Marked for BPF LSM before the value is written, so before it is visible
  // under its name (a refresh's new inode is guarded before the rename).
  if (auto guarded = LsmGuardCredential(fd.get(), cgroup_id_); !guarded) {
    (void)::unlink(tmp.c_str());
    return Error{"credential " + Quoted(c.spec.name) + ": " + guarded.error().ToString()};
  }
  if (!WriteAll(fd.get(), c.value)) {
    Error e = SysError("credential " + Quoted(c.spec.name) + ": write " + tmp);
    (void)::unlink(tmp.c_str());
    return e;
  }
  if (::fchown(fd.get(), c.uid, c.gid) != 0 || ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    Error e = SysError("credential " + Quoted(c.spec.name) + ": deliver " + final_path);
    (void)::unlink(tmp.c_str());
    return e;
  }
  return {};
}

Status SandboxCredentials::SaveState() const {
  SavedState s;
  s.sandbox = sandbox_;
  s.enforcement = enforcement_;
  s.cgroup_dir = cgroup_dir_;
  s.cgroup_id = cgroup_id_;
  s.attached = attached_;
  if (attached_)
    for (const Live& c : creds_) s.specs.push_back({c.spec, c.uid, c.gid});
  for (const Live& c : creds_) {
    if (!c.live) continue;
    s.creds.push_back({c.spec.name, c.value, c.issued_at, c.expires_at,
                       c.spec.deliver == policy::CredentialSpec::Deliver::kFile, c.spec.revoke});
  }
  for (const Pending& p : pending_)
    s.pending.push_back({p.name, p.value, p.issued_at, p.expires_at, p.due, p.attempts, p.superseded, p.file, p.revoke});
  std::string text = FormatState(s);
  Status written = WriteAtomically(StorePath(sandbox_, ".state"), text);
  Wipe(&text);
  for (auto& c : s.creds) Wipe(&c.value);
  for (auto& p : s.pending) Wipe(&p.value);
  return written;
}

std::string SandboxCredentials::Remove(Live* c) {
  if (c->spec.deliver == policy::CredentialSpec::Deliver::kFile)
    (void)::unlink((store_dir_ + "/" + c->spec.name).c_str());
  // Revoked first, then dropped from the state: a crash in between leaves
  // it to a sweep, which revokes it again (a second revoke, not none).
  std::string revoked = RunRevoke(c->spec.revoke, sandbox_, c->spec.name, c->value);
  c->live = false;
  if (revoked.rfind("failed", 0) == 0) {
    // Kept for a retry (here while this process lives, else by a sweep).
    pending_.push_back({c->spec.name, c->value, c->spec.revoke, c->issued_at, c->expires_at,
                        Now() + RevokeRetryDelay(1), 1, false,
                        c->spec.deliver == policy::CredentialSpec::Deliver::kFile});
    revoked += "; retried in " + std::to_string(RevokeRetryDelay(1)) + " s";
  }
  (void)SaveState();
  Wipe(&c->value);
  return revoked;
}

void SandboxCredentials::RunPending(int64_t now, bool all, const std::string& why, const CredentialEvents& emit) {
  bool changed = false;
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = *it;
    if (!all && now < p.due) {
      ++it;
      continue;
    }
    changed = true;
    std::string revoked = RunRevoke(p.revoke, sandbox_, p.name, p.value);
    std::string reason = !why.empty()   ? why
                         : p.superseded ? "superseded by a refresh; revoked at its expiry"
                                        : "its revoke failed before; retried (attempt " + std::to_string(p.attempts + 1) + ")";
    const bool failed = revoked.rfind("failed", 0) == 0;
    if (failed) {
      p.attempts += 1;
      p.superseded = false;
      p.due = now + RevokeRetryDelay(p.attempts);
      revoked += "; retried in " + std::to_string(RevokeRetryDelay(p.attempts)) + " s";
    }
    emit(CredentialEvent("credential.revoked", enforcement_, p.name, p.value, p.issued_at, p.expires_at, p.file,
                         p.file ? view_dir() + "/" + p.name : "", revoked, reason));
    if (failed) {
      ++it;
      continue;
    }
    Wipe(&p.value);
    it = pending_.erase(it);
  }
  if (changed) (void)SaveState();
}

cordon::v1::AuditEvent SandboxCredentials::Event(const Live& c, const std::string& kind,
                                                 const std::string& reason) const {
  return CredentialEvent(kind, enforcement_, c.spec.name, c.value, c.issued_at, c.expires_at,
                         c.spec.deliver == policy::CredentialSpec::Deliver::kFile, FilePath(c), "", reason);
}

Status SandboxCredentials::Issue(uint64_t cgroup_id, const std::string& cgroup_dir, const CredentialEvents& emit) {
  cgroup_id_ = cgroup_id;
  cgroup_dir_ = cgroup_dir;
  for (Live& c : creds_) {
    Status done = [&]() -> Status {
      int64_t issued_at = 0;
      auto value = RunIssue(c.spec, &issued_at);
      if (!value) return value.error();
      c.value = std::move(*value);
      c.fingerprint = CredentialFingerprint(c.value);
      c.issued_at = issued_at;
      c.expires_at = c.issued_at + static_cast<int64_t>(c.spec.ttl_seconds);
      c.live = true;
      CORDON_TRY(SaveState());  // before the file exists: a crash from here on is swept
      return Deliver(c);
    }();
    if (!done.ok()) {
      cordon::v1::AuditEvent failed = Event(c, "credential.issue_failed", done.error().ToString());
      failed.mutable_credential()->clear_fingerprint();
      emit(std::move(failed));
      if (c.live) (void)Remove(&c);
      RevokeAll("credential " + Quoted(c.spec.name) + " could not be issued", emit);
      return done;
    }
    emit(Event(c, "credential.issued", ""));
  }
  return {};
}

Result<bool> SandboxCredentials::GuardFiles() const {
  bool all = true;
  for (const Live& c : creds_) {
    if (!c.live || c.spec.deliver != policy::CredentialSpec::Deliver::kFile) continue;
    const std::string path = store_dir_ + "/" + c.spec.name;
    UniqueFd fd(::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return SysError("credential " + Quoted(c.spec.name) + ": open " + path);
    auto guarded = LsmGuardCredential(fd.get(), cgroup_id_);
    if (!guarded) return Error{"credential " + Quoted(c.spec.name) + ": " + guarded.error().ToString()};
    all = all && *guarded;
  }
  return all;
}

std::vector<std::string> SandboxCredentials::Environment() const {
  std::vector<std::string> env;
  for (const Live& c : creds_) {
    if (!c.live) continue;
    if (c.spec.deliver == policy::CredentialSpec::Deliver::kEnv)
      env.push_back(c.spec.name + "=" + c.value);
    else
      env.push_back(c.spec.name + "_FILE=" + FilePath(c));
  }
  return env;
}

int64_t SandboxCredentials::NextDeadline() const {
  int64_t next = 0;
  auto consider = [&next](int64_t t) {
    if (t > 0 && (next == 0 || t < next)) next = t;
  };
  for (const Live& c : creds_) {
    if (!c.live) continue;
    consider(c.expires_at);
    if (c.spec.refresh_before_seconds)
      consider(c.retry_at ? c.retry_at : c.expires_at - static_cast<int64_t>(c.spec.refresh_before_seconds));
  }
  for (const Pending& p : pending_) consider(std::max<int64_t>(p.due, 1));
  return next;
}

void SandboxCredentials::Tick(int64_t now, const CredentialEvents& emit) {
  RunPending(now, false, "", emit);
  for (Live& c : creds_) {
    if (!c.live) continue;
    if (now >= c.expires_at) {
      cordon::v1::AuditEvent e = Event(c, "credential.expired", "ttl " + std::to_string(c.spec.ttl_seconds) + " s reached");
      e.mutable_credential()->set_revoke(Remove(&c));
      emit(std::move(e));
      continue;
    }
    if (!c.spec.refresh_before_seconds) continue;
    const int64_t due = c.retry_at ? c.retry_at : c.expires_at - static_cast<int64_t>(c.spec.refresh_before_seconds);
    if (now < due) continue;
    int64_t issued_at = 0;
    auto value = RunIssue(c.spec, &issued_at);
    if (!value) {
      c.retry_at = Now() + kRefreshRetrySeconds;
      emit(Event(c, "credential.issue_failed",
                 "refresh: " + value.error().ToString() + "; the current one stays until it expires (retried in " +
                     std::to_string(kRefreshRetrySeconds) + " s)"));
      continue;
    }
    // The superseded value is revoked at its own expiry, not at once: the
    // workload may hold it open until then (README "Credentials"); the
    // state keeps it, so a sweep revokes it if this process dies first.
    // The new one replaces it only once delivered; else it is revoked and
    // the current one stays until it expires.
    Live fresh = c;
    fresh.value = std::move(*value);
    fresh.fingerprint = CredentialFingerprint(fresh.value);
    fresh.issued_at = issued_at;
    fresh.expires_at = fresh.issued_at + static_cast<int64_t>(c.spec.ttl_seconds);
    fresh.retry_at = 0;
    std::swap(c, fresh);
    Status saved = SaveState();  // the new one, before its file exists
    Status delivered = saved.ok() ? Deliver(c) : saved;
    std::swap(c, fresh);
    if (!delivered.ok()) {
      const std::string revoked = RunRevoke(c.spec.revoke, sandbox_, c.spec.name, fresh.value);
      Wipe(&fresh.value);
      (void)SaveState();
      c.retry_at = Now() + kRefreshRetrySeconds;
      cordon::v1::AuditEvent failed = Event(c, "credential.issue_failed",
                                            "refresh: " + delivered.error().ToString() + "; the new one was revoked (" +
                                                revoked + "), the current one stays until it expires");
      emit(std::move(failed));
      continue;
    }
    pending_.push_back({c.spec.name, c.value, c.spec.revoke, c.issued_at, c.expires_at, c.expires_at, 0, true,
                        c.spec.deliver == policy::CredentialSpec::Deliver::kFile});
    Wipe(&c.value);
    c = std::move(fresh);
    (void)SaveState();  // the superseded one pending, the new one live
    emit(Event(c, "credential.refreshed", "refreshed " + std::to_string(c.spec.refresh_before_seconds) +
                                              " s before expiry"));
  }
}

void SandboxCredentials::RevokeAll(const std::string& why, const CredentialEvents& emit) {
  RunPending(Now(), true, why, emit);
  for (Live& c : creds_) {
    if (!c.live) continue;
    cordon::v1::AuditEvent e = Event(c, "credential.revoked", why);
    e.mutable_credential()->set_revoke(Remove(&c));
    emit(std::move(e));
  }
}

// ---- the sweep

int SweepCredentials(int64_t now, const CredentialEvents& emit) {
  auto names = ListDir(kCredentialStore);
  if (!names) return 0;
  int removed = 0;
  std::vector<std::string> stems;
  for (const auto& name : *names) {
    std::string stem;
    for (const char* suffix : {".state", ".lock", ".view"})
      if (name.size() > std::strlen(suffix) && name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
        stem = name.substr(0, name.size() - std::strlen(suffix));
    struct stat st;
    if (stem.empty() && ::lstat(StorePath(name, "").c_str(), &st) == 0 && S_ISDIR(st.st_mode)) stem = name;
    if (!stem.empty() && stem.find('/') == std::string::npos && stem[0] != '.' &&
        std::find(stems.begin(), stems.end(), stem) == stems.end())
      stems.push_back(stem);
  }
  for (const auto& stem : stems) {
    if (!SafeName(stem)) continue;  // not one cordon makes: left alone
    const std::string state_path = StorePath(stem, ".state");
    struct stat sst;
    const bool has_state = ::lstat(state_path.c_str(), &sst) == 0;
    // Only a state file cordon wrote: regular, root's, 0600, one link.
    if (has_state && (!S_ISREG(sst.st_mode) || sst.st_uid != 0 || (sst.st_mode & 077) || sst.st_nlink != 1)) continue;
    UniqueFd lock = TryLock(stem);
    if (!lock.valid()) continue;  // its cordon process lives
    SavedState state;
    if (has_state) {
      // Unreadable, or not what cordon writes: kept (its credentials are not
      // revoked yet), for a person; it is not ours to guess at.
      if (!ReadState(stem, &state)) continue;
      struct stat st;
      // An attached sandbox also ends when it is detached.
      const std::string attached_end = state.attached ? AttachedGone(state.cgroup_id, state.cgroup_dir) : "";
      const bool cgroup_gone =
          state.attached
              ? !attached_end.empty()
              : state.cgroup_dir.empty() || ::stat(state.cgroup_dir.c_str(), &st) != 0 || st.st_ino != state.cgroup_id;
      const std::string ended_by = state.attached ? " (swept: the cordon process that issued it is gone)"
                                                  : " after the cordon process that issued it ended (swept)";
      std::vector<SavedCredential> kept;
      for (auto& c : state.creds) {
        const bool expired = now >= c.expires_at;
        if (!expired && !cgroup_gone) {
          kept.push_back(std::move(c));
          continue;
        }
        if (c.file) {
          // Through the directory itself, never a link put in its place.
          UniqueFd dir(::open(StorePath(stem, "").c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (dir.valid()) (void)::unlinkat(dir.get(), c.name.c_str(), 0);
        }
        std::string revoked = RunRevoke(c.revoke, stem, c.name, c.value);
        if (revoked.rfind("failed", 0) == 0) {
          state.pending.push_back({c.name, c.value, c.issued_at, c.expires_at, now + RevokeRetryDelay(1), 1, false,
                                   c.file, c.revoke});
          revoked += "; retried in " + std::to_string(RevokeRetryDelay(1)) + " s";
        }
        cordon::v1::AuditEvent e = CredentialEvent(
            expired ? "credential.expired" : "credential.revoked",
            state.enforcement.empty() ? "cordon-run" : state.enforcement, c.name, c.value, c.issued_at, c.expires_at,
            c.file, c.file ? std::string(kCredentialView) + "/" + stem + "/" + c.name : "", revoked,
            (expired          ? std::string("ttl reached")
             : state.attached ? attached_end
                              : "its sandbox's cgroup is gone") +
                ended_by);
        e.set_sandbox(stem);
        e.set_sandbox_cgroup_id(state.cgroup_id);
        e.set_cgroup_id(state.cgroup_id);
        emit(std::move(e));
        Wipe(&c.value);
        ++removed;
      }
      // Revokes still to run: a superseded value at its expiry (or at once
      // when its sandbox is gone), a failed revoke at its retry time.
      std::vector<SavedPending> still;
      for (auto& p : state.pending) {
        if (now < p.due && !(p.superseded && cgroup_gone)) {
          still.push_back(std::move(p));
          continue;
        }
        std::string revoked = RunRevoke(p.revoke, stem, p.name, p.value);
        const std::string reason =
            (p.superseded ? std::string("superseded by a refresh; revoked at its expiry or its sandbox's end")
                          : "its revoke failed before; retried (attempt " + std::to_string(p.attempts + 1) + ")") +
            ended_by;
        const bool failed = revoked.rfind("failed", 0) == 0;
        if (failed) {
          p.attempts += 1;
          p.superseded = false;
          p.due = now + RevokeRetryDelay(p.attempts);
          revoked += "; retried in " + std::to_string(RevokeRetryDelay(p.attempts)) + " s";
        }
        cordon::v1::AuditEvent e = CredentialEvent(
            "credential.revoked", state.enforcement.empty() ? "cordon-run" : state.enforcement, p.name, p.value,
            p.issued_at, p.expires_at, p.file, p.file ? std::string(kCredentialView) + "/" + stem + "/" + p.name : "",
            revoked, reason);
        e.set_sandbox(stem);
        e.set_sandbox_cgroup_id(state.cgroup_id);
        e.set_cgroup_id(state.cgroup_id);
        emit(std::move(e));
        if (failed) {
          still.push_back(std::move(p));
          continue;
        }
        Wipe(&p.value);
        ++removed;
      }
      state.pending = std::move(still);
      if (!kept.empty() || !state.pending.empty()) {
        state.creds = std::move(kept);
        std::string out = FormatState(state);
        (void)WriteAtomically(state_path, out);
        Wipe(&out);
        for (auto& c : state.creds) Wipe(&c.value);
        for (auto& p : state.pending) Wipe(&p.value);
        // Only pending revokes left and no credential: the tmpfs goes.
        if (state.creds.empty()) RemoveSandboxDirs(stem);
        continue;
      }
    }
    RemoveSandboxDirs(stem);
    (void)::unlink(state_path.c_str());
    (void)::unlink(StorePath(stem, ".lock").c_str());
  }
  return removed;
}

namespace {

bool ReadState(const std::string& stem, SavedState* state) {
  const std::string path = StorePath(stem, ".state");
  struct stat st;
  // Only a state file cordon wrote: regular, root's, 0600, one link.
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077) ||
      st.st_nlink != 1)
    return false;
  auto text = ReadFile(path, kMaxStateBytes);
  if (!text) return false;
  bool parsed = ParseState(*text, state);
  Wipe(&*text);
  for (const auto& c : state->creds) parsed = parsed && SafeName(c.name);
  for (const auto& p : state->pending) parsed = parsed && SafeName(p.name);
  for (const auto& sp : state->specs) parsed = parsed && SafeName(sp.spec.name);
  if (!parsed) {
    for (auto& c : state->creds) Wipe(&c.value);
    for (auto& p : state->pending) Wipe(&p.value);
  }
  return parsed;
}

// Each state file of the store, in name order, read (values included) and
// handed to `f`; the values are wiped after.
template <typename F>
void EachState(F&& f) {
  auto names = ListDir(kCredentialStore);
  if (!names) return;
  std::sort(names->begin(), names->end());
  const std::string suffix = ".state";
  for (const auto& name : *names) {
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), std::string::npos, suffix) != 0)
      continue;
    const std::string stem = name.substr(0, name.size() - suffix.size());
    SavedState state;
    if (!SafeName(stem) || !ReadState(stem, &state)) continue;
    f(stem, state);
    for (auto& c : state.creds) Wipe(&c.value);
    for (auto& p : state.pending) Wipe(&p.value);
  }
}

}  // namespace

bool SafeCredentialDir(const std::string& name) { return SafeName(name) && name.rfind("run-", 0) != 0; }

std::vector<CredentialState> ListCredentialStates() {
  std::vector<CredentialState> out;
  EachState([&](const std::string& stem, SavedState& state) {
    CredentialState cs;
    cs.stem = stem;
    cs.cgroup_id = state.cgroup_id;
    cs.attached = state.attached;
    for (auto& sp : state.specs) cs.specs.push_back(std::move(sp.spec));
    const std::string view = std::string(kCredentialView) + "/" + stem + "/";
    for (const auto& c : state.creds)
      cs.credentials.push_back({c.name, CredentialFingerprint(c.value), c.file ? "file" : "env",
                                c.file ? view + c.name : "", c.issued_at, c.expires_at, false,
                                c.file && GuardedFile(StorePath(stem, "/") + c.name, state.cgroup_id)});
    for (const auto& p : state.pending)
      cs.credentials.push_back({p.name, CredentialFingerprint(p.value), p.file ? "file" : "env",
                                p.file ? view + p.name : "", p.issued_at, p.expires_at, true});
    out.push_back(std::move(cs));
  });
  return out;
}

std::optional<CredentialState> CredentialStateOf(uint64_t cgroup_id) {
  for (auto& s : ListCredentialStates())
    if (s.attached && s.cgroup_id == cgroup_id) return std::move(s);
  return std::nullopt;
}

CredentialRedaction CredentialRedaction::Of(uint64_t cgroup_id) {
  CredentialRedaction out;
  EachState([&](const std::string&, SavedState& state) {
    if (state.cgroup_id != cgroup_id) return;
    for (const auto& c : state.creds) out.values_.emplace_back(c.name, c.value);
    for (const auto& p : state.pending) out.values_.emplace_back(p.name, p.value);
  });
  return out;
}

CredentialRedaction::~CredentialRedaction() {
  for (auto& [name, value] : values_) Wipe(&value);
}

size_t CredentialRedaction::Apply(const std::vector<std::string*>& texts) const {
  size_t replaced = 0;
  for (const auto& [name, value] : values_) {
    // A value this short would match by chance (and no issuer prints one).
    if (value.size() < 6) continue;
    const std::string with = "(credential " + name + ")";
    std::string escaped = EscapeWorkloadBytes(value);
    for (const std::string* form : std::initializer_list<const std::string*>{&value, &escaped})
      for (std::string* text : texts)
        for (size_t at = text->find(*form); at != std::string::npos; at = text->find(*form, at + with.size())) {
          text->replace(at, form->size(), with);
          ++replaced;
        }
    Wipe(&escaped);
  }
  return replaced;
}

cordon::Status EndAttachedCredentials(uint64_t cgroup_id, const std::string& why, const CredentialEvents& emit) {
  auto state = CredentialStateOf(cgroup_id);
  if (!state) return {};
  auto held = SandboxCredentials::Adopt(state->stem);
  if (!held) return held.error();
  (*held)->RevokeAll(why, emit);
  held->reset();  // removes the files, the tmpfs and its view, the state (but failed revokes) and the lock
  return {};
}

size_t WriteCredentialLog(const std::vector<cordon::v1::AuditEvent>& events, std::string* error) {
  if (events.empty()) return 0;
  auto log = JsonlFileSink::Open(kCredentialSweepLog);
  if (!log) {
    *error = log.error().ToString();
    return events.size();
  }
  size_t unwritten = 0;
  for (const auto& e : events) {
    if (Status written = (*log)->Write(e); !written.ok()) {
      ++unwritten;
      if (error->empty()) *error = written.error().ToString();
    }
  }
  if (Status flushed = (*log)->Flush(); !flushed.ok() && error->empty()) *error = flushed.error().ToString();
  return unwritten;
}

}  // namespace cordon::ops
