// `cordon doctor`: what this kernel lets cordon enforce, found by loading,
// attaching and exercising, never by reading config. For each control of the
// policy language: enforced, degraded (how) or unavailable, with the remedy.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "loader/grants.h"
#include "loader/kernel_features.h"
#include "loader/lsm.h"
#include "loader/sandbox.h"
#include "sys/bpffs.h"
#include "sys/cgroup.h"
#include "sys/cgroup_limits.h"
#include "sys/cgroup_v1.h"
#include "util/fs.h"

namespace cordon::cli {
namespace {

const char* kDoctorHelp =
    "usage: cordon doctor [--json]\n"
    "\n"
    "Probes this kernel by loading, attaching and exercising cordon's programs in a scratch\n"
    "cgroup (a denied UDP send and a denied file read by a real process), and reports for each\n"
    "policy control whether it is enforced, degraded (and how) or unavailable, with the remedy.\n"
    "Exit status: 0 when every control is enforced, 1 otherwise, 2 on usage errors.\n"
    "The --json output is documented in README.md (\"cordon doctor\").\n";

struct Probe {
  std::string name;
  bool ok = false;
  std::string detail;
};

struct Control {
  std::string name;    // policy control
  std::string status;  // enforced | degraded | unavailable
  std::string how;     // the mechanism in force, or why not
  std::string remedy;  // what to change for full enforcement
  // Apart for cordon run and cordon attach (empty: status, for both):
  // enforced | degraded | detected (after the fact) | unavailable.
  std::string run = {}, attach = {};
};

int LandlockAbi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

constexpr int kDnsNoReply = 1000, kDnsWrongSource = 1001;

// In the scratch sandbox's process: a DNS-sized datagram to 192.0.2.1:53,
// which the sandbox's programs send to the doctor's stand-in instead; its
// reply must read as coming from 192.0.2.1:53 (recvmsg4 rewrote it back).
int DnsProbeInChild() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(53);
  to.sin_addr.s_addr = htonl(0xc0000201);  // 192.0.2.1 (TEST-NET-1)
  if (::sendto(s, "cordon-doctor", 13, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) return errno;
  pollfd p{s, POLLIN, 0};
  if (::poll(&p, 1, 2000) != 1) return kDnsNoReply;
  char buf[64];
  sockaddr_in from = {};
  socklen_t len = sizeof from;
  if (::recvfrom(s, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len) < 0) return errno;
  return from.sin_addr.s_addr == to.sin_addr.s_addr && from.sin_port == to.sin_port ? 0 : kDnsWrongSource;
}

// The doctor's resolver stand-in: answers one datagram (or none within 3 s).
void AnswerOneQuery(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 3000) != 1) return;
  char buf[64];
  sockaddr_in from = {};
  socklen_t len = sizeof from;
  ssize_t n = ::recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
  if (n > 0) (void)::sendto(fd, buf, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&from), len);
}

// A real process in a scratch sandbox makes a UDP send and a file read the
// scratch policy denies. Returns the two errnos (0 = not denied).
struct Exercise {
  bool ran = false;
  std::string error;
  int udp_errno = -1;
  int file_errno = -1;
  int unix_errno = -1;  // connect to an abstract address nobody listens on
  int bind_errno = -1;  // bind to a loopback port no listen rule allows
  // DNS to 192.0.2.1:53 redirected to a resolver stand-in on loopback: 0 when
  // the reply came back from 192.0.2.1:53; else the errno, or
  // kDnsNoReply/kDnsWrongSource; -1 when the resolver could not be set.
  int dns = -1;
  std::string dns_error;
  bool lsm_registered = false;
};

Exercise ExerciseScratchSandbox() {
  Exercise ex;
  char tmpl[] = "/tmp/cordon-doctor-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    ex.error = "mkdtemp: " + std::string(std::strerror(errno));
    return ex;
  }
  std::string dir = tmpl, secret = dir + "/secret", allowed = dir + "/allowed";
  (void)WriteFile(secret, "");  // creates nothing: use open below
  int fd = ::open(secret.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  ::mkdir(allowed.c_str(), 0700);

  std::string yaml = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: doctor}\nspec:\n  files:\n"
                     "    include: [runtime-minimal]\n    read: [" + allowed + "]\n";
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  policy::CompiledPolicy compiled;
  if (!policy::ParsePolicyText(yaml, "<doctor>", &parsed, &diags) || !policy::Compile(parsed, &compiled, &diags)) {
    ex.error = "internal: doctor policy rejected: " + policy::FormatDiagnostics(diags);
    return ex;
  }
  auto cgroup = CreateCgroup("/cordon-doctor-" + std::to_string(::getpid()));
  if (!cgroup) {
    ex.error = cgroup.error().ToString();
    return ex;
  }
  AttachOptions options;
  options.name = "doctor";
  options.ephemeral = true;
  auto attached = AttachSandbox(*cgroup, compiled, options);
  if (!attached) {
    ex.error = attached.error().ToString();
    (void)KillAndRemoveCgroup(*cgroup);
    return ex;
  }
  ex.lsm_registered = attached->info.lsm;
  // A resolver stand-in on loopback for the DNS redirection probe.
  int resolver = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in raddr = {};
  raddr.sin_family = AF_INET;
  raddr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t rlen = sizeof raddr;
  bool resolver_set = false;
  if (resolver >= 0 && ::bind(resolver, reinterpret_cast<sockaddr*>(&raddr), sizeof raddr) == 0 &&
      ::getsockname(resolver, reinterpret_cast<sockaddr*>(&raddr), &rlen) == 0) {
    ResolverAddress at;
    std::memcpy(at.ip.data(), &raddr.sin_addr, 4);
    at.port = ntohs(raddr.sin_port);
    Status set = SetResolver(cgroup->id, at, std::nullopt);
    resolver_set = set.ok();
    if (!set.ok()) ex.dns_error = set.error().ToString();
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) == 0) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pipefd[0]);
      int results[5] = {0, 0, 0, 0, -1};
      if (MoveToCgroup(*cgroup, ::getpid()).ok()) {
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in to = {};
        to.sin_family = AF_INET;
        to.sin_port = htons(9);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        results[0] = ::sendto(s, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0 ? errno : 0;
        int f = ::open(secret.c_str(), O_RDONLY | O_CLOEXEC);
        results[1] = f < 0 ? errno : 0;
        // The cgroup unix hook refuses it before any lookup (EPERM); else
        // nothing listens there (ECONNREFUSED).
        int u = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un ua = {};
        ua.sun_family = AF_UNIX;
        std::string name = "cordon-doctor-" + std::to_string(::getpid());
        std::memcpy(ua.sun_path + 1, name.data(), name.size());
        results[2] = ::connect(u, reinterpret_cast<sockaddr*>(&ua),
                               static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size()))
                         ? errno
                         : 0;
        int b = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in at = {};
        at.sin_family = AF_INET;
        at.sin_port = htons(47999);
        at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        results[3] = ::bind(b, reinterpret_cast<sockaddr*>(&at), sizeof at) ? errno : 0;
        if (resolver_set) results[4] = DnsProbeInChild();
      } else {
        results[0] = results[1] = results[2] = results[3] = -2;
      }
      (void)!::write(pipefd[1], results, sizeof results);
      _exit(0);
    }
    ::close(pipefd[1]);
    if (resolver_set) AnswerOneQuery(resolver);
    int results[5] = {-1, -1, -1, -1, -1};
    if (::read(pipefd[0], results, sizeof results) == sizeof results) {
      ex.ran = true;
      ex.udp_errno = results[0];
      ex.file_errno = results[1];
      ex.unix_errno = results[2];
      ex.bind_errno = results[3];
      ex.dns = results[4];
    }
    ::close(pipefd[0]);
    ::waitpid(pid, nullptr, 0);
  }
  if (resolver >= 0) ::close(resolver);
  (void)KillAndRemoveCgroup(*cgroup);
  (void)DetachSandbox(cgroup->id);
  ::unlink(secret.c_str());
  ::rmdir(allowed.c_str());
  ::rmdir(dir.c_str());
  return ex;
}

std::string Escape(const std::string& s) { return JsonString(s); }

}  // namespace

int DoctorCommand(const Args& args) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--json", ""}, {"--help", "-h"}}, &parsed, &error) || !parsed.positionals.empty()) {
    PrintError(error.empty() ? "unexpected argument" : error);
    std::fputs(kDoctorHelp, stderr);
    return 2;
  }
  if (parsed.Has("--help")) return std::fputs(kDoctorHelp, stdout), 0;
  if (!IsRoot()) return PrintError("doctor needs root (it loads and attaches BPF programs)"), 1;

  struct utsname uts;
  ::uname(&uts);
  std::vector<Probe> probes;
  auto mount = FindCgroup2Mount();
  probes.push_back({"cgroup2", mount.ok(), mount ? *mount : mount.error().ToString()});
  struct stat st;
  bool btf = ::stat("/sys/kernel/btf/vmlinux", &st) == 0;
  probes.push_back({"btf", btf, btf ? "/sys/kernel/btf/vmlinux" : "no kernel BTF: CO-RE programs cannot load"});
  auto bpffs = EnsureBpffs();
  probes.push_back({"bpffs", bpffs.ok(), bpffs ? *bpffs : bpffs.error().ToString()});
  int rb = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "cordon_probe", 0, 0, 4096, nullptr);
  probes.push_back({"ringbuf", rb >= 0, rb >= 0 ? "BPF ring buffer maps" : std::string(std::strerror(errno))});
  if (rb >= 0) ::close(rb);

  Exercise ex = ExerciseScratchSandbox();
  bool net_ok = ex.ran && ex.udp_errno == EPERM;
  probes.push_back({"cgroup_hooks", net_ok,
                    !ex.error.empty() ? ex.error
                    : net_ok          ? "connect4/6, sendmsg4/6, sock_create attached; a real UDP send was refused"
                                      : "attached, but a UDP send from the scratch sandbox was not refused (errno " +
                                            std::to_string(ex.udp_errno) + ")"});
  const LsmAvailability& lsm = ProbeLsm();
  probes.push_back({"bpf_lsm_listed", lsm.listed, lsm.lsm_list.empty() ? "LSM list unreadable" : lsm.lsm_list});
  probes.push_back({"bpf_lsm_loadable", lsm.loadable, lsm.loadable ? "programs load and attach" : lsm.detail});
  bool lsm_enforcing = lsm.usable() && ex.ran && ex.file_errno == EPERM;
  probes.push_back({"bpf_lsm_enforcing", lsm_enforcing,
                    lsm_enforcing ? "a real file read outside the scratch policy was refused"
                    : !lsm.usable() ? "not attempted: BPF LSM not usable"
                                    : "programs attached but a denied file read succeeded (errno " +
                                          std::to_string(ex.file_errno) + "): NOT enforcing"});
  int landlock = LandlockAbi();
  probes.push_back({"landlock", landlock > 0,
                    landlock > 0 ? "ABI " + std::to_string(landlock) : "Landlock unavailable or disabled"});
  std::string detect_detail;
  bool detect = DetectLoadable(&detect_detail);
  probes.push_back({"detect_tracepoint", detect,
                    detect ? "raw_tp/sys_exit loads (detect mode for cordon attach)" : detect_detail});
  // Where BPF LSM decides unix connects, the hooks stand aside (and the
  // scratch connect finds no listener); otherwise they must have refused it.
  bool unix_hooks = UnixHooks().available() && (lsm_enforcing || (ex.ran && ex.unix_errno == EPERM));
  probes.push_back({"cgroup_unix_hooks", unix_hooks,
                    !UnixHooks().available() ? "kernel older than 6.7: no cgroup hooks for unix sockets"
                    : lsm_enforcing ? "cgroup/connect_unix and sendmsg_unix attached (BPF LSM decides unix connects)"
                    : unix_hooks    ? "cgroup/connect_unix and sendmsg_unix attached; a real abstract-socket connect "
                                      "was refused"
                                    : "cgroup/connect_unix attached, but a connect from the scratch sandbox was not "
                                      "refused (errno " + std::to_string(ex.unix_errno) + ")"});

  // Egress by name: DNS redirected to cordon's resolver and the reply's
  // source rewritten back (connect/sendmsg + recvmsg4/6 with socket storage).
  const bool dns_ok = ex.ran && ex.dns == 0;
  probes.push_back({"dns_redirect", dns_ok,
                    dns_ok ? "a real UDP query to 192.0.2.1:53 reached a resolver on loopback and its reply read as "
                             "from 192.0.2.1:53 (sendmsg4 rewrite, recvmsg4, socket storage)"
                    : !ex.dns_error.empty() ? "the resolver could not be set: " + ex.dns_error
                    : ex.dns == kDnsNoReply ? "a query to 192.0.2.1:53 got no reply through the redirection"
                    : ex.dns == kDnsWrongSource
                        ? "the reply did not read as from 192.0.2.1:53: recvmsg4 did not rewrite it"
                        : "the query to 192.0.2.1:53 was not redirected (errno " + std::to_string(ex.dns) + ")"});

  std::vector<Control> controls;
  // The one remedy of every control that needs BPF LSM, and the likely cause.
  const std::string lsm_cause = lsm_enforcing  ? ""
                                : !lsm.listed  ? "'bpf' is not in the kernel's LSM list (" + lsm.lsm_list + ")"
                                : !lsm.loadable ? "the kernel refuses BPF LSM programs: " + LsmRefusalCause()
                                                : "BPF LSM programs load and attach but a denied read succeeded";
  std::string lsm_remedy =
      !lsm.listed ? "boot with lsm=" + (lsm.lsm_list.empty() ? std::string("...") : lsm.lsm_list) + ",bpf"
      : !lsm.loadable ? "run on a kernel that loads BPF trampoline programs, with bpf in lsm= (a stock Debian 12 "
                        "kernel does); on this one cordon run prevents with Landlock and seccomp and cordon attach "
                        "detects"
                      : "BPF LSM is listed and loads but did not enforce: report this kernel";
  controls.push_back({"network.egress", net_ok ? "enforced" : "unavailable",
                      net_ok ? "cgroup connect4/6 + sendmsg4/6 (exercised)" : "cgroup hooks did not enforce",
                      net_ok ? "" : "a kernel with cgroup v2 BPF (4.17+) and BTF"});
  controls.push_back({"network.extraProtocols", net_ok ? "enforced" : "unavailable", "cgroup sock_create (inet)",
                      ""});
  const bool bind_ok = ex.ran && ex.bind_errno == EPERM;
  controls.push_back({"network.listen", bind_ok ? "enforced" : "unavailable",
                      bind_ok ? "cgroup bind4/6 (exercised) + cgroup_skb/ingress dropping SYNs to unlisted TCP "
                                "listeners; an unconnected UDP socket on a port the kernel chose is not covered"
                              : "a bind in the scratch sandbox was not refused (errno " + std::to_string(ex.bind_errno) +
                                    ")",
                      bind_ok ? "" : "a kernel with cgroup bind hooks (4.17+)"});
  // Attached with every sandbox (a sandbox attaches all of its programs or none).
  for (const auto& [name, how] : std::vector<std::pair<std::string, std::string>>{
           {"network.sockopt", "cgroup/setsockopt: SO_REUSEPORT, SO_MARK, SO_BINDTODEVICE, IP_TRANSPARENT, "
                               "IP_FREEBIND and other host-traffic options refused"},
           {"devices", "cgroup/dev: null, zero, full, random, urandom, tty, ptmx and spec.devices only, at open and "
                       "mknod (descriptors opened earlier keep working)"},
           {"sysctl", "cgroup/sysctl: no /proc/sys writes, reads of a safe set only"}})
    controls.push_back({name, net_ok ? "enforced" : "unavailable", how + " (attached with the scratch sandbox)",
                        net_ok ? "" : "a kernel with cgroup v2 BPF"});
  auto lsm_control = [&](const std::string& name, const std::string& how) {
    controls.push_back({name, lsm_enforcing ? "enforced" : "unavailable",
                        lsm_enforcing ? how : "needs BPF LSM: " + (lsm.detail.empty() ? std::string("not enforcing")
                                                                                       : lsm.detail),
                        lsm_enforcing ? "" : lsm_remedy});
  };
  if (lsm_enforcing) {
    controls.push_back({"network.families", "enforced", "BPF LSM socket_create", ""});
  } else {
    controls.push_back({"network.families", "degraded",
                        "cordon run: seccomp refuses other families (EPERM, reported as events); cordon attach: inet/inet6 only "
                        "(cgroup sock_create)",
                        lsm_remedy, "enforced", "degraded"});
  }
  if (lsm_enforcing || (!detect && landlock == 0)) {
    lsm_control("files", "BPF LSM file/path/exec/mmap hooks (exercised)");
  } else {
    std::string how;
    if (landlock > 0) how += "cordon run: prevented by Landlock ABI " + std::to_string(landlock) + " (EACCES, "
                             "reported as events with the path as written; no mmap-exec control)";
    if (detect) how += std::string(how.empty() ? "" : "; ") + "cordon attach: opens and execs DETECTED after the "
                       "fact (verdict detected; onViolation: kill kills), not prevented";
    controls.push_back({"files", "degraded", how, lsm_remedy, landlock > 0 ? "degraded" : "unavailable",
                        detect ? "detected" : "unavailable"});
  }
  if (lsm_enforcing || (!detect && !unix_hooks))
    lsm_control("network.unix", "BPF LSM unix_stream_connect/unix_may_send");
  else if (unix_hooks)
    controls.push_back({"network.unix", "degraded",
                        "connect/sendto to unix sockets outside the policy are REFUSED by address as written "
                        "(cgroup/connect_unix, sendmsg_unix; relative and \"..\" addresses refused, abstract "
                        "sockets unless network.abstractUnix); a symlink in a writable directory aliasing a "
                        "forbidden socket is only " +
                            std::string(detect ? "DETECTED after the fact (onViolation: kill kills)" : "not caught") +
                            ", since these hooks see the address before the kernel resolves it",
                        lsm_remedy, "degraded", "degraded"});
  else
    controls.push_back({"network.unix", "degraded",
                        "connections to pathname unix sockets outside the policy are DETECTED after the fact "
                        "(onViolation: kill kills); abstract sockets: cordon run scopes them with Landlock",
                        lsm_remedy, "degraded", "detected"});
  if (lsm_enforcing) {
    lsm_control("tamper", "BPF LSM bpf/task_kill/ptrace/mount/module/userns/settime/capable/cgroup hooks");
  } else {
    controls.push_back({"tamper", "degraded",
                        "cordon run: seccomp refuses bpf, mounts, modules, kexec, ptrace, namespaces, clock, reboot, "
                        "io_uring (events from the syscall-exit tracepoint)" + std::string(landlock >= 6 ? "; Landlock scopes signals" : "") +
                            "; cordon attach: not enforced",
                        lsm_remedy, "degraded", "unavailable"});
  }

  // What the workload holds: cordon run takes it away before exec on every
  // kernel; cordon attach cannot restart processes, so there only BPF LSM
  // refuses their use.
  auto held = [&](const std::string& name, const std::string& run, const std::string& attach_lsm,
                  const std::string& attach_without, const char* run_status = "enforced") {
    if (lsm_enforcing)
      controls.push_back({name, "enforced", "cordon run: " + run + "; cordon attach: " + attach_lsm, ""});
    else
      controls.push_back({name, "degraded", "cordon run: " + run + "; cordon attach: " + attach_without, lsm_remedy,
                          run_status, "unavailable"});
  };
  held("identity", "a dynamic uid (or spec.runAs), no capabilities but spec.capabilities, no_new_privs",
       "BPF LSM capable refuses capabilities outside spec.capabilities",
       "NOT enforced (a root workload keeps every capability)");
  held("terminal",
       "a session of its own on a relayed pty; seccomp refuses TIOCSTI, TIOCLINUX, TIOCCONS, TIOCSCTTY, vhangup",
       "BPF LSM file_ioctl refuses TIOCSTI and TIOCLINUX", "NOT enforced");
  held("inherited",
       "scrubbed environment, descriptors above 2 closed (--keep-fd), a fresh session keyring, keyrings refused "
       "(spec.allowKeyrings)",
       "BPF LSM judges reads, writes and mappings through descriptors opened outside (file_permission, mmap_file), "
       "and connects and sends (splice and sendfile included) on inet sockets created outside by the egress rules "
       "(socket_connect, socket_sendmsg)",
       "descriptors opened before attach or passed in stay usable, NOT enforced; inet sockets created outside "
       "reach any destination (the cgroup programs judge a socket by the cgroup that created it)");
  held("hostObjects",
       "private IPC, UTS and mount namespaces (/tmp, /dev/shm); seccomp refuses fanotify, syslog, acct, other "
       "processes' limits and scheduling, weakening personalities, unsealed memfds, F_SETOWN",
       "BPF LSM syslog, task_prlimit, task_setscheduler, key and IPC hooks",
       "NOT enforced; neither refuses binding an abstract unix name a host client expects, nor inotify watches on "
       "host directories the workload may read (need BPF LSM)",
       "degraded");

  // spec.credentials' files: cordon run's are in the command's own mount
  // namespace; an attached sandbox's are on the host, where without BPF LSM
  // only file ownership guards them.
  const std::string cred_run = "cordon run: files on a tmpfs of its own, visible only in the command's mount namespace";
  if (lsm_enforcing && LsmGuardsCredentials())
    controls.push_back({"credentials", "enforced",
                        cred_run + "; both: BPF LSM file_open lets only the sandbox's own processes (and root outside "
                                   "every sandbox) open them, others are refused (EPERM, credential.read)",
                        ""});
  else
    controls.push_back({"credentials", "degraded",
                        cred_run + " (root workloads of attached sandboxes can read them in the store); cordon "
                                   "attach: file ownership only (any process running as the file's owner, and root "
                                   "workloads of other sandboxes, can read them)",
                        lsm_remedy, "degraded", "degraded"});

  bool full = true;
  for (const auto& c : controls) full &= c.status == "enforced";

  // spec.resources, per limit kind: the cgroup2 root's controllers, else
  // (hybrid hosts) a v1 hierarchy, which only cordon run uses (not part of
  // fullEnforcement, which is about the security controls).
  struct Limit {
    std::string name, status, how, run, attach;
  };
  std::vector<Limit> limits;
  auto limit = [&](const std::string& name, const std::string& controller, const std::string& files,
                   const std::string& v1_files, const std::string& v1_needs = "") {
    std::string reason = mount ? "" : mount.error().ToString();
    if (mount && Cgroup2HasController(*mount, controller, &reason)) {
      limits.push_back({name, "enforced", "cgroup v2: " + files, "enforced", "enforced"});
      return;
    }
    auto v1 = FindCgroupV1Controller(controller == "io" ? "blkio" : controller);
    struct stat st;
    if (v1 && !v1_files.empty() && (v1_needs.empty() || ::stat(JoinPath(v1->mountpoint, v1_needs).c_str(), &st) == 0))
      limits.push_back({name, "enforced for run",
                        "cgroup v1 at " + v1->mountpoint + ": " + v1_files +
                            " (cordon run places its command in a v1 cgroup of its own); cordon attach: " + reason,
                        "enforced", "unavailable"});
    else
      limits.push_back({name, "unavailable", reason, "unavailable", "unavailable"});
  };
  limit("memory", "memory", "memory.max, memory.high",
        "memory.limit_in_bytes (memoryHigh unavailable: v1 has no throttle)");
  limit("swap", "memory", "memory.swap.max (where the kernel accounts swap)",
        "memory.memsw.limit_in_bytes = memory + swap (needs memory)", "memory.memsw.limit_in_bytes");
  limit("pids", "pids", "pids.max", "pids.max");
  limit("cpu", "cpu", "cpu.max, cpu.weight", "cpu.cfs_quota_us, cpu.shares");
  // ioWriteBytesPerSecond: v1 blkio throttles only what reaches the disk
  // from the cgroup's own tasks, i.e. direct I/O.
  limit("io", "io", "io.max wbps, per disk of the write paths",
        "blkio.throttle.write_bps_device, direct I/O only (v1 does not charge the background writeback of "
        "buffered writes to the cgroup)",
        "blkio.throttle.write_bps_device");
  if (limits.back().status == "unavailable" && !FindCgroupV1Controller("blkio"))
    limits.back().how += "; no cgroup v1 blkio hierarchy either";
  limits.push_back({"disk", "degraded",
                    "cordon run: the size of its scratch tmpfs (/tmp, /dev/shm; ENOSPC beyond); spec.files write "
                    "paths and cordon attach: NOT enforced (that needs file-system quotas)",
                    "degraded", "unavailable"});

  if (parsed.Has("--json")) {
    std::ostringstream out;
    out << "{\"version\":1,\"kernel\":" << Escape(uts.release) << ",\"fullEnforcement\":" << (full ? "true" : "false")
        << ",\"probes\":{";
    for (size_t i = 0; i < probes.size(); ++i)
      out << (i ? "," : "") << Escape(probes[i].name) << ":{\"ok\":" << (probes[i].ok ? "true" : "false")
          << ",\"detail\":" << Escape(probes[i].detail) << "}";
    out << "},\"controls\":[";
    for (size_t i = 0; i < controls.size(); ++i)
      out << (i ? "," : "") << "{\"name\":" << Escape(controls[i].name) << ",\"status\":" << Escape(controls[i].status)
          << ",\"how\":" << Escape(controls[i].how) << ",\"remedy\":" << Escape(controls[i].remedy)
          << ",\"run\":" << Escape(controls[i].run.empty() ? controls[i].status : controls[i].run)
          << ",\"attach\":" << Escape(controls[i].attach.empty() ? controls[i].status : controls[i].attach) << "}";
    out << "],\"bpfLsm\":{\"enforcing\":" << (lsm_enforcing ? "true" : "false") << ",\"cause\":" << Escape(lsm_cause)
        << ",\"remedy\":" << Escape(lsm_enforcing ? std::string() : lsm_remedy) << "}";
    out << ",\"resources\":[";
    for (size_t i = 0; i < limits.size(); ++i)
      out << (i ? "," : "") << "{\"name\":" << Escape(limits[i].name) << ",\"status\":" << Escape(limits[i].status)
          << ",\"how\":" << Escape(limits[i].how) << ",\"run\":" << Escape(limits[i].run)
          << ",\"attach\":" << Escape(limits[i].attach) << "}";
    out << "]}\n";
    std::fputs(out.str().c_str(), stdout);
  } else {
    std::printf("kernel %s\n\nprobes:\n", uts.release);
    for (const auto& p : probes) std::printf("  %-18s %-4s %s\n", p.name.c_str(), p.ok ? "ok" : "NO", p.detail.c_str());
    std::printf("\ncontrols:\n");
    bool needs_lsm = false;
    for (const auto& c : controls) {
      std::printf("  %-24s %-11s %s\n", c.name.c_str(), c.status.c_str(), c.how.c_str());
      if (!c.run.empty() && (c.run != c.status || c.attach != c.status))
        std::printf("  %-24s %-11s cordon run: %s; cordon attach: %s\n", "", "", c.run.c_str(), c.attach.c_str());
      // The remedy they share is said once, below.
      if (c.remedy == lsm_remedy && !lsm_enforcing) needs_lsm = true;
      else if (!c.remedy.empty()) std::printf("  %-24s %-11s remedy: %s\n", "", "", c.remedy.c_str());
    }
    if (needs_lsm)
      std::printf("\nBPF LSM, which the degraded controls above need:\n  cause:  %s\n  remedy: %s\n", lsm_cause.c_str(),
                  lsm_remedy.c_str());
    std::printf("\nresource limits (spec.resources):\n");
    for (const auto& l : limits) std::printf("  %-24s %-16s %s\n", l.name.c_str(), l.status.c_str(), l.how.c_str());
    std::printf("\n%s\n", full ? "full enforcement available" : "full enforcement NOT available on this kernel");
  }
  return full ? 0 : 1;
}

}  // namespace cordon::cli
