// Containment: contain and release, directly. See contain.h.
#include "ops/contain.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>

#include "abi/cordon_common.h"
#include "abi/cordon_event.h"
#include "events/audit_file.h"
#include "events/decoder.h"
#include "inspect/environ.h"
#include "inspect/retro.h"
#include "loader/lsm.h"
#include "ops/credentials.h"
#include "ops/ephemeral.h"
#include "ops/resource_watch.h"
#include "sys/cgroup.h"
#include "util/clock.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::ops {

namespace v1 = cordon::v1;

namespace {

constexpr int kFreezeTimeoutMs = 10000;
constexpr size_t kTailBytes = 16 << 20;  // of the audit file, for the last events

std::string UserName(uid_t uid) {
  struct passwd pw, *found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found)
    return DisplayText(EscapeWorkloadBytes(pw.pw_name));
  return "";
}

std::string NameOfSandbox(const SandboxInfo& info) { return info.name.empty() ? std::to_string(info.id) : info.name; }

// The sandbox's cgroup, checked to be the one it was attached to.
Result<CgroupRef> SandboxCgroup(const SandboxInfo& info) {
  auto mount = FindCgroup2Mount();
  if (!mount) return mount.error();
  auto cgroup = ResolveCgroup(JoinPath(*mount, info.cgroup_path));
  if (!cgroup) return cgroup.error();
  if (cgroup->id != info.id)
    return Error{cgroup->path + " is no longer the sandbox's cgroup (its id is " + std::to_string(cgroup->id) +
                 ", not " + std::to_string(info.id) + ")"};
  return cgroup;
}

v1::AuditEvent SandboxEvent(const SandboxInfo& info, const std::string& kind) {
  v1::AuditEvent e;
  *e.mutable_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
  e.set_sandbox(info.name);
  e.set_cgroup_path(info.cgroup_path);
  e.set_cgroup_id(info.id);
  e.set_sandbox_cgroup_id(info.id);
  e.set_pid(static_cast<uint32_t>(::getpid()));
  e.set_tid(static_cast<uint32_t>(::getpid()));
  e.set_comm("cordon");
  e.set_kind(kind);
  e.set_verdict("noted");
  e.set_enforcement("cordon");
  e.set_policy(info.policy);
  e.set_policy_digest(info.policy_digest);
  return e;
}

// What containment leaves to freezing on this kernel, said plainly.
std::vector<std::string> NotStopped(const SandboxInfo& info, const std::string& lsm_problem) {
  std::vector<std::string> out;
  // Where BPF LSM enforces, it refuses every file and exec access (reads and
  // writes through open descriptors too): nothing to say about files.
  if (!info.lsm || !lsm_problem.empty())
    out.push_back(
        "file and exec operations are not refused by containment (" +
        std::string(info.lsm        ? "the BPF LSM entry could not be changed: " + lsm_problem
                    : info.landlock ? "no usable BPF LSM here; the run's Landlock rules stay as they were"
                                    : "no usable BPF LSM here") +
        "): the frozen processes cannot make them; a process the sandbox's rules let write keeps the files it "
        "opened");
  out.push_back(
      "sockets created outside the sandbox and passed in are judged by their own cgroup's programs, not refused: "
      "their holders inside are frozen");
  return out;
}

struct CounterName {
  int index;
  const char* name;
};
constexpr CounterName kCounterNames[] = {
    {CORDON_CNT_DENIED_CONNECT, "deniedConnect"},
    {CORDON_CNT_DENIED_SENDMSG, "deniedSendmsg"},
    {CORDON_CNT_DENIED_SOCKET, "deniedSocket"},
    {CORDON_CNT_AUDITED_CONNECT, "auditedConnect"},
    {CORDON_CNT_AUDITED_SENDMSG, "auditedSendmsg"},
    {CORDON_CNT_AUDITED_SOCKET, "auditedSocket"},
    {CORDON_CNT_EVENTS_DROPPED, "eventsDropped"},
    {CORDON_CNT_ALLOWED_CONNECT, "allowedConnect"},
    {CORDON_CNT_ALLOWED_SENDMSG, "allowedSendmsg"},
    {CORDON_CNT_DENIED_FILE, "deniedFile"},
    {CORDON_CNT_AUDITED_FILE, "auditedFile"},
    {CORDON_CNT_DENIED_TAMPER, "deniedTamper"},
    {CORDON_CNT_AUDITED_TAMPER, "auditedTamper"},
    {CORDON_CNT_DENIED_LSM_NET, "deniedLsmNet"},
    {CORDON_CNT_AUDITED_LSM_NET, "auditedLsmNet"},
    {CORDON_CNT_DETECTED, "detected"},
    {CORDON_CNT_KILLED, "killed"},
};

std::string FdType(const std::string& target) {
  if (target.rfind("socket:[", 0) == 0) return "socket";
  if (target.rfind("pipe:[", 0) == 0) return "pipe";
  if (target.rfind("anon_inode:", 0) == 0) return "anon";
  if (!target.empty() && target[0] == '/') return "file";
  return "other";
}

// A file name part: the sandbox's name with anything but [A-Za-z0-9._-] as '_'.
constexpr const char* kContainmentLocks = "/run/cordon/containment";

// Contain and release of one sandbox hold its containment lock from start
// to end, so that a release never runs between a contain's state change
// and its freeze (a sandbox frozen while said to be released), nor two
// completions of one containment at once. A file of root's own directory,
// not the sandbox's cgroup (which its workload may open and lock).
// A release removes the file while it holds the lock; so a locker checks,
// once it holds the lock, that the path still names the file it locked, and
// starts again if not (else two lockers could hold locks on two files).
class ContainmentLock {
 public:
  ContainmentLock(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  // Removes the lock file (still held: anyone waiting on it starts again).
  void Remove() {
    if (fd_.valid()) ::unlink(path_.c_str());
  }

 private:
  UniqueFd fd_;
  std::string path_;
};

Result<ContainmentLock> LockContainment(uint64_t sandbox_id, int wait_ms) {
  if (Status made = MakeDirs(kContainmentLocks, 0700); !made.ok()) return made.error();
  const std::string path = std::string(kContainmentLocks) + "/" + std::to_string(sandbox_id) + ".lock";
  const int64_t deadline = MonoMs() + wait_ms;
  for (;;) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return SysError("open " + path);
    bool locked = false;
    while (!(locked = ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0)) {
      if (errno != EWOULDBLOCK) return SysError("lock " + path);
      if (MonoMs() >= deadline) break;
      ::usleep(20 * 1000);
    }
    struct stat held, named;
    if (::fstat(fd.get(), &held) != 0) return SysError("inspect " + path);
    if (!locked) {
      std::string holder = FlockHolder(held);
      return Error{"another contain or release of this sandbox is under way (" +
                       (holder.empty() ? std::string("its lock ") + path + " is held" : holder + " holds " + path) +
                       ")",
                   EWOULDBLOCK};
    }
    if (::stat(path.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino)
      return ContainmentLock(std::move(fd), path);
    // Removed (a release ended) or replaced while this waited: lock the file the path names now.
  }
}

// The evidence copies what the workload's processes hold in plain text
// (command lines, working directories, descriptor targets): a credential
// cordon issued to the sandbox, or a token it inherited, passed on a command
// line would be written to disk with it. Issued values become
// "(credential NAME)"; an argument holding a known token format is replaced
// whole (the value's kind is kept: "(redacted: a GitHub token)").
void RedactEvidence(const CredentialRedaction& credentials, v1::ContainmentEvidence* evidence) {
  std::vector<std::string*> texts;
  for (auto& p : *evidence->mutable_processes()) {
    for (auto& arg : *p.mutable_cmdline()) texts.push_back(&arg);
    texts.push_back(p.mutable_cwd());
    texts.push_back(p.mutable_exe());
    for (auto& fd : *p.mutable_fds()) texts.push_back(fd.mutable_target());
  }
  credentials.Apply(texts);
  for (auto& p : *evidence->mutable_processes())
    for (auto& arg : *p.mutable_cmdline())
      if (std::string kind = CredentialValueKind(arg); !kind.empty()) arg = "(redacted: " + kind + ")";
}

std::string FileNamePart(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 64))
    out.push_back((std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_');
  return out.empty() || out[0] == '.' ? "_" + out : out;
}

// Writes the evidence document into `dir` (made 0700 if missing; it must be
// root's and writable by nobody else), a new file, 0600. Its path.
Result<std::string> WriteEvidence(const std::string& dir, const SandboxInfo& info, const std::string& json) {
  if (Status made = MakeDirs(dir, 0700); !made.ok()) return made.error();
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return SysError("stat " + dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
    return Error{dir + " is not a directory of root's that only root may write: the evidence is not written there"};
  char stamp[32];
  const time_t now = ::time(nullptr);
  struct tm tm;
  ::gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const std::string base =
      JoinPath(dir, std::string("contain-") + FileNamePart(info.name) + "-" + std::to_string(info.id) + "-" + stamp);
  for (int n = 0; n < 100; ++n) {
    const std::string path = base + (n ? "-" + std::to_string(n) : "") + ".json";
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid() && errno == EEXIST) continue;
    if (!fd.valid()) return SysError("create " + path);
    if (::fchmod(fd.get(), 0600) != 0) return SysError("chmod " + path);
    size_t done = 0;
    while (done < json.size()) {
      ssize_t w = ::write(fd.get(), json.data() + done, json.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return SysError("write " + path);
      done += static_cast<size_t>(w);
    }
    if (::fsync(fd.get()) != 0) return SysError("fsync " + path);
    return path;
  }
  return Error{"too many evidence files named " + base + "*"};
}

std::string EvidenceDir(const std::string& audit_path) {
  if (audit_path.empty()) return "/var/log/cordon";
  const size_t slash = audit_path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : audit_path.substr(0, slash);
}

// `contain --kill` of a contained sandbox: what its containment froze is
// killed now (the evidence taken then stands).
// The sandbox's cgroup.events (an error: not readable).
Result<std::string> CgroupEvents(const SandboxInfo& info) {
  auto mount = FindCgroup2Mount();
  return mount ? ReadFile(*mount + info.cgroup_path + "/cgroup.events") : Result<std::string>(mount.error());
}

// Whether the sandbox's cgroup holds processes (unknown: yes).
bool CgroupPopulated(const SandboxInfo& info) {
  auto events = CgroupEvents(info);
  return !events || events->find("populated 0") == std::string::npos;
}

ContainOutcome KillContained(const SandboxInfo& info, const ContainRequest& req, const std::string& named) {
  ContainOutcome out;
  out.sandbox_id = info.id;
  out.name = NameOfSandbox(info);
  if (!info.cgroup_alive) return out.error = named + ": its cgroup no longer exists; nothing killed", out;
  auto cgroup = SandboxCgroup(info);
  if (!cgroup) return out.error = cgroup.error().ToString() + "; nothing killed", out;
  // As it was found (a process that entered after a kill may not be).
  auto events = CgroupEvents(info);
  const bool frozen = events && events->find("frozen 1") != std::string::npos;
  if (Status killed = KillCgroupProcesses(cgroup->path, kFreezeTimeoutMs); !killed.ok())
    return out.error = named + " is contained, but not every process was killed: " + killed.error().ToString(), out;
  if (auto marked = ChangeSandboxState(info.id, CORDON_STATE_F_KILLED, 0); !marked)
    out.partial = true, out.notes.push_back("killed, but not recorded as killed: " + marked.error().ToString());
  v1::Containment c;
  c.set_by(req.by);
  c.set_via(req.via);
  c.set_reason(req.reason);
  c.set_killed(true);
  c.set_frozen(frozen);
  v1::AuditEvent e = SandboxEvent(info, "sandbox.contained");
  e.set_reason("the processes of the contained sandbox killed by " + req.by +
               (req.reason.empty() ? "" : ": " + req.reason));
  *e.mutable_containment() = c;
  out.events.push_back(std::move(e));
  return out;
}

}  // namespace

std::string Requester(pid_t pid, uid_t uid) {
  std::string out = "uid " + std::to_string(uid);
  if (std::string name = UserName(uid); !name.empty()) out += " (" + name + ")";
  if (auto login = ReadFile("/proc/" + std::to_string(pid) + "/loginuid", 64)) {
    const unsigned long v = std::strtoul(login->c_str(), nullptr, 10);
    if (v != 4294967295UL) {  // (uid_t)-1: no login session
      out += ", login uid " + std::to_string(v);
      if (std::string name = UserName(static_cast<uid_t>(v)); !name.empty()) out += " (" + name + ")";
    }
  }
  out += ", pid " + std::to_string(pid);
  if (auto comm = ReadFile("/proc/" + std::to_string(pid) + "/comm", 64)) {
    std::string c = *comm;
    while (!c.empty() && c.back() == '\n') c.pop_back();
    out += " (" + DisplayText(EscapeWorkloadBytes(c)) + ")";
  }
  return out;
}

std::vector<v1::AuditEvent> LastEventsOf(const std::string& path, uint64_t sandbox_id, size_t n, std::string* source) {
  std::vector<v1::AuditEvent> out;
  if (path.empty()) {
    *source = "none: no audit file is configured (no jsonl sink)";
    return out;
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) {
    *source = "none: " + path + ": " + std::strerror(errno);
    return out;
  }
  const off_t size = st.st_size;
  const off_t start = size > static_cast<off_t>(kTailBytes) ? size - static_cast<off_t>(kTailBytes) : 0;
  std::string text(static_cast<size_t>(size - start), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t r = ::pread(fd.get(), text.data() + got, text.size() - got, start + static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  text.resize(got);
  size_t pos = 0;
  if (start > 0) pos = text.find('\n') == std::string::npos ? text.size() : text.find('\n') + 1;  // a whole line
  std::deque<v1::AuditEvent> last;
  const std::string id = "\"sandboxCgroupId\":\"" + std::to_string(sandbox_id) + "\"";
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;  // a line still being written
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (line.find(id) == std::string_view::npos) continue;
    v1::AuditEvent e;
    if (!ParseAuditLine(line, &e)) continue;
    if (e.sandbox_cgroup_id() != sandbox_id || e.kind() == "chain.start") continue;
    e.clear_chain();
    last.push_back(std::move(e));
    if (last.size() > n) last.pop_front();
  }
  out.assign(std::make_move_iterator(last.begin()), std::make_move_iterator(last.end()));
  *source = path + (start > 0 ? " (its last " + std::to_string(kTailBytes >> 20) + " MiB)" : "");
  return out;
}

ContainOutcome Contain(const ContainRequest& req) {
  ContainOutcome out;
  out.sandbox_id = req.sandbox_id;
  auto lock = LockContainment(req.sandbox_id, req.lock_wait_ms);
  if (!lock) {
    if (req.lock_wait_ms == 0) return out.busy = true, out.error = lock.error().ToString(), out;
    // Whatever holds the lock, the kernel refuses from now on.
    auto set = ChangeSandboxState(req.sandbox_id, CORDON_STATE_F_CONTAINED, 0);
    return out.error = (set ? "contained in the kernel (every operation refused), but not frozen and no evidence: "
                            : "nothing contained: ") +
                       lock.error().ToString() + "; try cordon contain again",
           out;
  }
  auto info = GetSandbox(req.sandbox_id);
  if (!info) return out.error = info.error().ToString() + "; nothing contained", out;
  out.name = NameOfSandbox(*info);
  const std::string named = "sandbox " + Quoted(out.name) + " (cgroup id " + std::to_string(info->id) + ")";
  if (!info->problem.empty()) return out.error = named + ": " + info->problem + "; nothing contained", out;
  if (!info->has_state)
    return out.error = named +
                       " was attached by a cordon without containment state: replace its policy once (cordon "
                       "update) to add it; nothing contained",
           out;
  // Killed before, with processes in its cgroup again (entered since): --kill
  // kills them as well (detach refuses to set them free).
  if ((info->state.flags & CORDON_STATE_F_KILLED) && req.kill && info->cgroup_alive && CgroupPopulated(*info))
    return KillContained(*info, req, named);
  if (info->state.flags & CORDON_STATE_F_KILLED)
    return out.error = named +
                       " was contained and its processes killed: there is nothing left to contain (cordon "
                       "detach --id " +
                       std::to_string(info->id) + " removes it)",
           out;
  // Contained and not completed: by the kernel (onViolation: contain), or
  // by a contain that did not finish (killed after its first step): this
  // containment freezes it and takes the evidence.
  const bool unfinished = info->contained() && !(info->state.flags & CORDON_STATE_F_EVIDENCE);
  const bool by_kernel = unfinished && (info->state.flags & CORDON_STATE_F_AUTO);
  if (info->contained() && !unfinished && req.kill) return KillContained(*info, req, named);
  if (info->contained() && !unfinished)
    return out.error =
               named + " is already contained" +
               (info->state.flags & CORDON_STATE_F_AUTO ? " (by the kernel: spec.onViolation: contain, after a " +
                                                              KindName(info->state.trigger_kind) + " refusal)"
                                                        : "") +
               "; cordon release --id " + std::to_string(info->id) + " undoes it",
           out;
  if (!info->cgroup_alive) return out.error = named + ": its cgroup no longer exists; nothing contained", out;
  auto cgroup = SandboxCgroup(*info);
  if (!cgroup) return out.error = cgroup.error().ToString() + "; nothing contained", out;

  // The values of its credentials, for the evidence: read before step 1 (a
  // cordon run revokes them, state included, as soon as it sees it contained).
  const CredentialRedaction redaction = CredentialRedaction::Of(info->id);

  // 1. Every program of the sandbox refuses from here on. (EVIDENCE, once
  // the last step is done: until then the agent, or the next contain,
  // completes a containment whose contain was interrupted.)
  auto before = ChangeSandboxState(info->id, CORDON_STATE_F_CONTAINED, 0, nullptr, /*with_files=*/false);
  if (!before) return out.error = before.error().ToString() + "; nothing contained", out;
  if (unfinished && !by_kernel)
    out.notes.push_back(
        "completing a containment whose cordon contain did not finish (it was contained, not "
        "frozen and without evidence)");
  v1::Containment c;
  if (by_kernel) c.set_trigger(KindName(info->state.trigger_kind));
  c.set_by(req.by);
  c.set_via(req.via);
  c.set_reason(req.reason);

  // 2. Frozen: nothing of the workload runs while the evidence is taken.
  Status frozen = SetCgroupFrozen(cgroup->path, true, kFreezeTimeoutMs);
  // Then (frozen: no process of it is half-way through one) BPF LSM refuses
  // its file and exec accesses too, open descriptors included.
  std::string lsm_problem;
  if (info->lsm)
    if (Status files = SetSandboxFilesContained(info->id, true); !files.ok()) lsm_problem = files.error().ToString();
  // A root workload may have thawed itself while the freeze was under way
  // (writes to its cgroup.freeze through a descriptor opened before): with
  // its file writes now refused, once more.
  if (!frozen.ok() && info->lsm && lsm_problem.empty()) frozen = SetCgroupFrozen(cgroup->path, true, kFreezeTimeoutMs);
  if (frozen.ok()) {
    c.set_frozen(true);
  } else {
    out.partial = true,
    out.notes.push_back("contained, but not frozen: " + frozen.error().ToString() +
                        " (every operation the sandbox's programs see is refused; its processes run on)");
  }
  for (auto& line : NotStopped(*info, lsm_problem)) c.add_not_stopped(std::move(line));

  // 3. Its connections, each destroyed; the processes and what they hold.
  const std::string why = (by_kernel ? "contained by the kernel (spec.onViolation: contain) after a " + c.trigger() +
                                           " refusal; completed by " + req.by
                                     : "contained by " + req.by) +
                          (req.reason.empty() ? "" : ": " + req.reason);
  SandboxContext ctx{info->id, info->name, info->policy, info->cgroup_path, info->policy_digest};
  v1::ContainmentEvidence evidence;
  auto snap = SnapshotAndDisconnect(*cgroup, ctx, why);
  if (snap) {
    c.set_processes(static_cast<uint32_t>(snap->processes.size()));
    c.set_connections_destroyed(static_cast<uint32_t>(snap->destroyed));
    c.set_connections_not_destroyed(static_cast<uint32_t>(snap->destroy_failed));
    if (snap->destroy_failed)
      out.notes.push_back(std::to_string(snap->destroy_failed) +
                          " connection(s) could not be destroyed (the evidence says which and why); the sandbox's "
                          "ingress program drops what reaches them");
    for (const auto& p : snap->processes) {
      auto* ep = evidence.add_processes();
      ep->set_pid(p.pid);
      ep->set_ppid(p.ppid);
      ep->set_uid(p.uid);
      ep->set_gid(p.gid);
      ep->set_comm(p.comm);
      ep->set_exe(p.exe);
      for (const auto& arg : p.cmdline) ep->add_cmdline(arg);
      ep->set_cwd(p.cwd);
      ep->set_cgroup_path(p.cgroup_path);
      for (const auto& [fd, target] : p.fds) {
        auto* ef = ep->add_fds();
        ef->set_fd(fd);
        ef->set_type(FdType(target));
        ef->set_target(target);
        if (ef->type() == "socket")
          ef->set_socket_inode(static_cast<uint32_t>(std::strtoul(target.c_str() + 8, nullptr, 10)));
      }
    }
    RedactEvidence(redaction, &evidence);
    for (const auto& s : snap->sockets) {
      auto* es = evidence.add_sockets();
      es->set_inode(s.inode);
      es->set_pid(s.pid);
      es->set_protocol(s.protocol);
      es->set_family(s.family);
      es->set_state(s.state);
      es->set_local(s.local);
      es->set_remote(s.remote);
      es->set_action(s.action);
    }
    out.events = std::move(snap->events);
  } else {
    out.partial = true, out.notes.push_back(
                            "contained, but its processes and connections could not be listed (no connection was "
                            "destroyed by cordon; the programs refuse every new one): " +
                            snap.error().ToString());
  }

  // 4. Credentials: a cordon run's are its own to revoke.
  if (info->ephemeral) {
    const RunOwner owner = OwnerOfRun(info->cgroup_path);
    c.set_credentials(owner.state == RunOwner::State::kRunning
                          ? "the sandbox's cordon run (pid " + std::to_string(owner.pid) +
                                ") revokes the credentials it issued when it sees the containment (credential.revoked "
                                "events)"
                          : "its cordon run has ended: the credentials it issued are revoked by the sweep of the "
                            "agent or of the next cordon run");
  } else if (auto state = CredentialStateOf(info->id); state && state->attached) {
    // cordon attach's (spec.credentials): removed and revoked now. The
    // agent lets go of those it holds first (Agent::AgentContainRequest); release
    // does not issue them again.
    size_t ended_events = 0;
    cordon::Status ended = EndAttachedCredentials(info->id, "the sandbox was contained", [&](v1::AuditEvent e) {
      e.set_sandbox(info->name);
      e.set_policy(info->policy);
      e.set_policy_digest(info->policy_digest);
      e.set_cgroup_path(info->cgroup_path);
      e.set_cgroup_id(info->id);
      e.set_sandbox_cgroup_id(info->id);
      out.events.push_back(std::move(e));
      ++ended_events;
    });
    if (ended.ok()) {
      c.set_credentials(std::to_string(state->specs.size()) +
                        " issued by cordon attach: removed and revoked (credential.* events: " +
                        std::to_string(ended_events) + "); cordon release does not issue them again");
    } else {
      out.partial = true;
      out.notes.push_back("contained, but its credentials could not be ended: " + ended.error().ToString());
      c.set_credentials("NOT revoked: " + ended.error().ToString());
    }
  } else {
    c.set_credentials("none issued by cordon");
  }

  // 5. The evidence, next to the audit file.
  if (req.before_evidence) req.before_evidence();
  *evidence.mutable_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
  evidence.set_version(1);
  evidence.set_sandbox(info->name);
  evidence.set_sandbox_cgroup_id(info->id);
  evidence.set_cgroup_path(info->cgroup_path);
  auto* pol = evidence.mutable_policy();
  pol->set_name(info->policy);
  pol->set_digest(info->policy_digest);
  pol->set_mode(info->mode == CORDON_MODE_AUDIT ? "audit" : "enforce");
  pol->set_level(info->Level());
  pol->set_attached_at_unix_ns(static_cast<int64_t>(info->attached_at_ns));
  pol->set_updated_at_unix_ns(static_cast<int64_t>(info->updated_at_ns));
  auto now = GetSandbox(info->id);
  if (now) info->counters = now->counters;
  for (const auto& [index, name] : kCounterNames) (*evidence.mutable_counters())[name] = info->counters[index];
  const ResourceUsage use = ReadResourceUsage(cgroup->path);
  auto* res = evidence.mutable_resources();
  res->set_memory_current(use.memory_current.value_or(0));
  res->set_memory_peak(use.memory_peak.value_or(0));
  res->set_pids_current(use.pids_current.value_or(0));
  res->set_cpu_usage_usec(use.cpu_usec.value_or(0));
  res->set_text(use.DescribeCurrent());
  if (now && now->has_egress) {
    res->set_egress_bytes(now->egress.bytes);
    res->set_egress_limit(now->egress_limit);
    if (auto dests = ReadEgressDests(now->pin_dir))
      for (size_t i = 0; i < dests->size() && i < 10; ++i) {
        auto* d = res->add_egress_destinations();
        d->set_destination(EgressDestText((*dests)[i].key));
        d->set_bytes((*dests)[i].bytes);
      }
  }
  std::string source;
  for (auto& e : LastEventsOf(req.audit_path, info->id, req.last_events, &source))
    *evidence.add_last_events() = std::move(e);
  if (!req.before_evidence && !req.audit_path.empty())
    source += "; without an agent, the events still waiting in the sandbox's ring buffer are not in it";
  evidence.set_last_events_source(source);
  // The document's own record of the containment, with the kill to come.
  v1::Containment in_doc = c;
  in_doc.set_killed(req.kill);
  *evidence.mutable_containment() = in_doc;
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.always_print_primitive_fields = true;  // fd 0, uid 0: facts, not defaults
  if (!google::protobuf::util::MessageToJsonString(evidence, &json, print).ok()) json = "{}";
  auto written = WriteEvidence(EvidenceDir(req.audit_path), *info, json);
  if (written) {
    out.evidence_path = *written;
    c.set_evidence(*written);
  } else {
    out.partial = true,
    out.notes.push_back("contained, but the evidence could not be written: " + written.error().ToString());
  }

  // Completed (whatever step failed: the notes say which).
  if (auto done = ChangeSandboxState(info->id, CORDON_STATE_F_EVIDENCE, 0); !done)
    out.partial = true, out.notes.push_back(
                            "contained, but not recorded as completed (the agent may complete it "
                            "again): " +
                            done.error().ToString());

  // 6. --kill, after the evidence.
  if (req.kill) {
    if (Status killed = KillCgroupProcesses(cgroup->path, kFreezeTimeoutMs); !killed.ok()) {
      out.partial = true,
      out.notes.push_back("contained, but not every process was killed: " + killed.error().ToString());
    } else {
      c.set_killed(true);
      if (auto marked = ChangeSandboxState(info->id, CORDON_STATE_F_KILLED, 0); !marked)
        out.partial = true, out.notes.push_back("killed, but not recorded as killed: " + marked.error().ToString());
    }
  }
  v1::AuditEvent e = SandboxEvent(*info, "sandbox.contained");
  e.set_reason(why);
  *e.mutable_containment() = c;
  out.events.push_back(std::move(e));
  return out;
}

ReleaseContainmentOutcome ReleaseContainment(const ReleaseContainmentRequest& req) {
  ReleaseContainmentOutcome out;
  out.sandbox_id = req.sandbox_id;
  auto lock = LockContainment(req.sandbox_id, 10000);
  if (!lock) return out.error = lock.error().ToString() + "; still contained", out;
  // Released (or nothing to release): the lock file goes, as the lock ends.
  struct RemoveAtEnd {
    ContainmentLock* lock;
    ~RemoveAtEnd() { lock->Remove(); }
  } remove_at_end{&*lock};
  auto info = GetSandbox(req.sandbox_id);
  if (!info) return out.error = info.error().ToString(), out;
  out.name = NameOfSandbox(*info);
  const std::string named = "sandbox " + Quoted(out.name) + " (cgroup id " + std::to_string(info->id) + ")";
  if (info->state.flags & CORDON_STATE_F_KILLED)
    return out.error = named + " was killed when it was contained: there is nothing to release (cordon detach --id " +
                       std::to_string(info->id) + " removes it)",
           out;
  if (!info->contained()) return out.error = named + " is not contained; nothing released", out;
  // The policy in force before never left: clearing the state puts it back
  // in force, for every program at once. Then the processes run again.
  std::string lsm_problem;
  auto before = ChangeSandboxState(
      info->id, 0, CORDON_STATE_F_CONTAINED | CORDON_STATE_F_AUTO | CORDON_STATE_F_EVIDENCE, &lsm_problem);
  if (!before) return out.error = before.error().ToString() + "; still contained", out;
  if (!lsm_problem.empty())
    out.partial = true, out.notes.push_back("released, but BPF LSM still refuses its file accesses: " + lsm_problem);
  v1::Containment c;
  c.set_by(req.by);
  c.set_via(req.via);
  c.set_reason(req.reason);
  if (info->cgroup_alive) {
    auto cgroup = SandboxCgroup(*info);
    Status thawed = cgroup ? SetCgroupFrozen(cgroup->path, false, kFreezeTimeoutMs) : Status(cgroup.error());
    if (!thawed.ok())
      out.partial = true,
      out.notes.push_back("released, but its processes are still frozen: " + thawed.error().ToString() +
                          " (write 0 to its cgroup.freeze)");
  }
  v1::AuditEvent e = SandboxEvent(*info, "sandbox.released");
  e.set_reason("released by " + req.by + (req.reason.empty() ? "" : ": " + req.reason) + "; policy " +
               Quoted(info->policy) + (info->policy_digest.empty() ? "" : " (" + info->policy_digest + ")") +
               " in force again");
  *e.mutable_containment() = c;
  out.events.push_back(std::move(e));
  return out;
}

}  // namespace cordon::ops
