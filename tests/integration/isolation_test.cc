// `cordon run` against a hostile root workload: what the command holds,
// what it can reach, what it shares with the host. Each test runs the same
// probe unconfined first (the negative control: it must succeed there, so a
// broken probe cannot pass), then under `cordon run`, and asserts the
// outcome and, for refusals, the audit event.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/keyctl.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "confine/child.h"
#include "confine/landlock.h"
#include "loader/kernel_features.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

// "key=value" lines printed by a probe.
std::map<std::string, std::string> Fields(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

class RunIsolation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    char tmpl[] = "/tmp/cordon-isolation-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0755);
    audit_ = dir_ + "/audit.jsonl";
  }
  void TearDown() override { cordon::test::Run({"rm", "-rf", dir_}); }
  std::vector<cordon::v1::AuditEvent> Events() { return AuditFileEvents(audit_); }
  // Runs python3 code unconfined and under cordon run (extra options first).
  CommandResult Unconfined(const std::string& code, const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = {"/usr/bin/python3", "-c", code};
    argv.insert(argv.end(), args.begin(), args.end());
    return cordon::test::Run(argv);
  }
  CommandResult Confined(const std::vector<std::string>& options, const std::string& code,
                         const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = {"run", "--audit", audit_};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--", "/usr/bin/python3", "-c", code});
    argv.insert(argv.end(), args.begin(), args.end());
    return Cordon(argv);
  }
  std::string dir_, audit_;
};

const char* kIdentityProbe = R"(import os
st = open('/proc/self/status').read()
f = dict(l.split(':\t', 1) for l in st.splitlines() if ':\t' in l)
print('uid=%d' % os.getuid()); print('gid=%d' % os.getgid()); print('groups=%s' % os.getgroups())
for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs'): print('%s=%s' % (k, f[k].strip()))
print('own_session=%d' % (os.getsid(0) == os.getpid()))
for ns in ('ipc', 'uts', 'mnt', 'net'): print('ns_%s=%s' % (ns, os.readlink('/proc/self/ns/' + ns)))
# CAP_NET_ADMIN on the host's network namespace: set loopback's flags to what they are.
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
req = struct.pack('16sH14x', b'lo', 0)
flags = struct.unpack('16sH14x', fcntl.ioctl(s, 0x8913, req))[1]  # SIOCGIFFLAGS
try:
    fcntl.ioctl(s, 0x8914, struct.pack('16sH14x', b'lo', flags))   # SIOCSIFFLAGS
    print('net_admin=0')
except OSError as e:
    print('net_admin=%d' % e.errno)
)";

std::string OwnNs(const char* ns) {
  char buf[64] = {};
  ssize_t n = ::readlink((std::string("/proc/self/ns/") + ns).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST_F(RunIsolation, CommandRunsAsItsOwnIdentityWithoutCapabilitiesAndHostObjects) {
  auto control = Fields(Unconfined(kIdentityProbe).out);
  ASSERT_EQ(control["uid"], "0") << "the probe reads the real identity";
  ASSERT_NE(control["CapEff"], "0000000000000000") << "the probe reads the real capability sets";
  ASSERT_EQ(control["net_admin"], "0") << "root changes interface flags unconfined";

  CommandResult r = Confined({}, kIdentityProbe);
  ASSERT_EQ(r.status, 0) << r.err;
  auto f = Fields(r.out);
  uint64_t uid = std::stoull(f["uid"]);
  EXPECT_GE(uid, kDynamicUidBase);
  EXPECT_LT(uid, uint64_t{kDynamicUidBase} + kDynamicUidCount);
  EXPECT_EQ(f["gid"], f["uid"]);
  EXPECT_EQ(f["groups"], "[]");
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
    EXPECT_EQ(f[set], "0000000000000000") << set;
  EXPECT_EQ(f["NoNewPrivs"], "1");
  EXPECT_EQ(f["net_admin"], std::to_string(EPERM)) << "no CAP_NET_ADMIN: no DNAT, routes or interfaces";
  EXPECT_EQ(f["own_session"], "1");
  EXPECT_NE(f["ns_ipc"], OwnNs("ipc"));
  EXPECT_NE(f["ns_uts"], OwnNs("uts"));
  EXPECT_NE(f["ns_mnt"], OwnNs("mnt"));  // private /tmp and /dev/shm
  EXPECT_EQ(f["ns_net"], OwnNs("net")) << "egress stays with the cgroup programs in the host's network namespace";

  // Two runs at once get two identities.
  CommandResult other = Confined({}, "import os; print('uid=%d' % os.getuid())");
  EXPECT_EQ(other.status, 0) << other.err;

  // root, still without capabilities; and the policy's capabilities, kept.
  CommandResult root = Confined({"--user", "root"}, kIdentityProbe);
  ASSERT_EQ(root.status, 0) << root.err;
  auto rf = Fields(root.out);
  EXPECT_EQ(rf["uid"], "0");
  for (const char* set : {"CapPrm", "CapEff", "CapBnd", "CapAmb"}) EXPECT_EQ(rf[set], "0000000000000000") << set;
  EXPECT_EQ(rf["net_admin"], std::to_string(EPERM)) << "root without CAP_NET_ADMIN";
  PolicyFile caps("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: caps}\nspec:\n"
                  "  capabilities: [net_bind_service]\n");
  for (const char* who : {"root", "dynamic"}) {
    CommandResult kept = Confined({"--policy", caps.path(), "--user", who}, kIdentityProbe);
    ASSERT_EQ(kept.status, 0) << kept.err;
    auto kf = Fields(kept.out);
    for (const char* set : {"CapPrm", "CapEff", "CapBnd", "CapAmb"})
      EXPECT_EQ(kf[set], "0000000000000400") << who << " " << set;  // 1 << CAP_NET_BIND_SERVICE
  }
  CommandResult bad = Cordon({"run", "--user", "no such user", "--", "/bin/true"});
  EXPECT_EQ(bad.status, 2) << bad.err;
}

// A root command holds no capability, but file modes alone let uid 0 write
// the kernel's control files: its cgroup's cgroup.procs and limits (move
// itself to the root cgroup, out of reach of every cgroup program; raise its
// pids limit), /sys/power/state, /proc/sysrq-trigger. Measured before the
// fix on 6.12 without BPF LSM and without spec.files: the command left its
// cgroup. cordon run mounts them read-only (EROFS), each refusal one event.
TEST_F(RunIsolation, RootCannotWriteTheKernelsControlFiles) {
  const std::string probe = R"(import os, sys
cg2, attempt = sys.argv[1], sys.argv[2] == 'write'
own = [l.split(':', 2)[2] for l in open('/proc/self/cgroup').read().splitlines() if l.startswith('0::')][0]
def probe(name, path, data):
    if not os.path.exists(path):
        print('%s=absent' % name); return
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        print('%s=%d' % (name, e.errno)); return
    try:
        if attempt: os.write(fd, data)
        print('%s=0' % name)
    except OSError as e:
        print('%s=write%d' % (name, e.errno))
    os.close(fd)
probe('leave_cgroup', cg2 + '/cgroup.procs', b'%d' % os.getpid())
probe('own_limit', cg2 + own + '/cgroup.max.descendants', b'max')
probe('power', '/sys/power/state', b'')
probe('sysrq', '/proc/sysrq-trigger', b'h')
# cordon's own state: a new file in /run/cordon (removed again where it was made).
state = '/run/cordon/isolation-probe-%d' % os.getpid()
try:
    os.close(os.open(state, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)); os.unlink(state)
    print('cordon_state=0')
except OSError as e:
    print('cordon_state=%d' % e.errno)
now = [l.split(':', 2)[2] for l in open('/proc/self/cgroup').read().splitlines() if l.startswith('0::')][0]
print('stayed=%d' % (now == own))
)";
  const std::string cg2 = Cgroup2Mount();
  // Negative control: root, unconfined, may open every one of them for
  // writing (and writes nothing).
  auto control = Fields(Unconfined(probe, {cg2, "open"}).out);
  ASSERT_EQ(::mkdir("/run/cordon", 0755) == 0 || errno == EEXIST, true);
  for (const char* k : {"leave_cgroup", "own_limit", "cordon_state"})
    ASSERT_EQ(control[k], "0") << k << " must work unconfined";
  for (const char* k : {"power", "sysrq"})
    ASSERT_TRUE(control[k] == "0" || control[k] == "absent") << k << "=" << control[k];
  // Under cordon run as root without spec.files (no Landlock file rules):
  // the writes are attempted for real.
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: control-files}\nspec:\n"
                    "  network:\n    egress: []\n");
  CommandResult r = Confined({"--policy", policy.path(), "--user", "root"}, probe, {cg2, "write"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto f = Fields(r.out);
  // Where BPF LSM is usable the cgroup2 mount stays writable and its tamper
  // rules refuse these two (EPERM, tamper.cgroup): a sandbox may still manage
  // the cgroups below its root there.
  const bool lsm = LsmUsableHere();
  int refused = 0, by_lsm = 0;
  for (const char* k : {"leave_cgroup", "own_limit", "power", "sysrq", "cordon_state"}) {
    if (control[k] == "absent") continue;
    const bool cgroupfs = std::string(k) == "leave_cgroup" || std::string(k) == "own_limit";
    EXPECT_EQ(f[k], std::to_string(lsm && cgroupfs ? EPERM : EROFS)) << k << "\n" << r.out;
    ++(lsm && cgroupfs ? by_lsm : refused);
  }
  EXPECT_EQ(f["stayed"], "1") << "the command is still in its sandbox cgroup";
  int events = 0, lsm_events = 0;
  for (const auto& e : Events()) {
    if (e.kind() == "tamper.cgroup" && e.enforcement() == "kernel-lsm") ++lsm_events;
    if (e.enforcement() != "mount") continue;
    ++events;
    EXPECT_EQ(e.kind(), "file.open");
    EXPECT_EQ(e.verdict(), "denied");
    EXPECT_EQ(e.file().access(), "write");
    EXPECT_TRUE(e.file().path().rfind("/sys/", 0) == 0 || e.file().path() == "/proc/sysrq-trigger" ||
                e.file().path().rfind("/run/cordon/isolation-probe-", 0) == 0)
        << e.file().path();
  }
  EXPECT_EQ(events, refused) << "one event per refusal\n" << Slurp(audit_);
  EXPECT_GE(lsm_events, by_lsm) << Slurp(audit_);
  // And the run says that root without spec.files is not contained by file rules.
  EXPECT_NE(r.err.find("warning: the command runs as root without spec.files: no file is protected"),
            std::string::npos)
      << r.err;
  CommandResult dynamic = Confined({"--policy", policy.path()}, "print('ok')");
  EXPECT_EQ(dynamic.err.find("runs as root without spec.files"), std::string::npos) << "negative control\n" << dynamic.err;
}

TEST_F(RunIsolation, EnvironmentIsScrubbedAndOnlyNamedVariablesPass) {
  ::setenv("GITHUB_TOKEN", "ghp_cordon_test_secret", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "aws_cordon_test_secret", 1);
  ::setenv("CORDON_TEST_LEAK", "cordon_internal", 1);
  const std::string dump = "import os\nfor k, v in sorted(os.environ.items()): print('%s=%s' % (k, v))\n";
  auto control = Fields(Unconfined(dump).out);
  ASSERT_EQ(control["GITHUB_TOKEN"], "ghp_cordon_test_secret") << "the caller has the variables";

  auto f = Fields(Confined({}, dump).out);
  EXPECT_EQ(f.count("GITHUB_TOKEN"), 0u);
  EXPECT_EQ(f.count("AWS_SECRET_ACCESS_KEY"), 0u);
  for (const auto& [k, v] : f) EXPECT_NE(k.rfind("CORDON_", 0), 0u) << k;
  EXPECT_EQ(f["HOME"], "/tmp");
  EXPECT_FALSE(f["PATH"].empty());
  for (const auto& [k, v] : f)
    EXPECT_TRUE(k == "PATH" || k == "HOME" || k == "SHELL" || k == "LANG" || k == "TERM" || k == "TZ" ||
                k.rfind("LC_", 0) == 0 || k == "PWD")
        << "unexpected variable " << k;

  PolicyFile env("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: env}\nspec:\n"
                 "  environment: [AWS_SECRET_ACCESS_KEY, 'MODE=ci']\n");
  auto g = Fields(Confined({"--policy", env.path(), "--env", "GITHUB_TOKEN", "--env", "EXTRA=1"}, dump).out);
  EXPECT_EQ(g["GITHUB_TOKEN"], "ghp_cordon_test_secret");
  EXPECT_EQ(g["AWS_SECRET_ACCESS_KEY"], "aws_cordon_test_secret");
  EXPECT_EQ(g["MODE"], "ci");
  EXPECT_EQ(g["EXTRA"], "1");
  CommandResult refused = Cordon({"run", "--env", "CORDON_AGENT_SOCKET", "--", "/bin/true"});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("CORDON_"), std::string::npos) << refused.err;
  ::unsetenv("GITHUB_TOKEN");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ::unsetenv("CORDON_TEST_LEAK");
}

// A secret file the caller holds open is not inherited (unless --keep-fd).
TEST_F(RunIsolation, InheritedDescriptorsAreClosedUnlessKept) {
  std::string secret = dir_ + "/secret";
  std::ofstream(secret) << "s3cr3t";
  int fd = ::open(secret.c_str(), O_RDONLY);  // inheritable on purpose
  ASSERT_GE(fd, 3);
  const std::string probe =
      "import os,sys\nfd=int(sys.argv[1])\ntry:\n  print('read=' + os.pread(fd, 64, 0).decode())\n"
      "except OSError as e:\n  print('errno=%d' % e.errno)\n";
  EXPECT_EQ(Fields(Unconfined(probe, {std::to_string(fd)}).out)["read"], "s3cr3t") << "the probe can read it";
  auto f = Fields(Confined({"--user", "root"}, probe, {std::to_string(fd)}).out);
  EXPECT_EQ(f["errno"], std::to_string(EBADF)) << f["read"];
  auto kept = Fields(Confined({"--user", "root", "--keep-fd", std::to_string(fd)}, probe, {std::to_string(fd)}).out);
  if (LsmUsableHere()) {
    // Kept open, but its use is still the policy's: BPF LSM judges reads
    // through descriptors opened outside the sandbox.
    EXPECT_EQ(kept["errno"], std::to_string(EPERM)) << kept["read"];
  } else {
    EXPECT_EQ(kept["read"], "s3cr3t");
  }
  EXPECT_EQ(Cordon({"run", "--keep-fd", "999", "--", "/bin/true"}).status, 2) << "not open";
  ::close(fd);
}

// Host System V IPC, POSIX message queues and the caller's keyrings.
TEST_F(RunIsolation, HostIpcAndKeyringsAreOutOfReach) {
  const key_t key = 0x0c0d3000 + (::getpid() & 0xfff);
  int shm = ::shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0666);
  ASSERT_GE(shm, 0) << std::strerror(errno);
  long serial = ::syscall(SYS_add_key, "user", "cordon-isolation-test", "t0ken", 5, KEY_SPEC_SESSION_KEYRING);
  ASSERT_GT(serial, 0) << std::strerror(errno);
  const std::string probe =
      "import ctypes,sys\nlibc=ctypes.CDLL(None, use_errno=True)\n"
      "r=libc.shmget(int(sys.argv[1]), 0, 0)\nprint('shmget=%d' % (0 if r >= 0 else ctypes.get_errno()))\n"
      "r=libc.syscall(250, 10, ctypes.c_long(-3), b'user', b'cordon-isolation-test', 0)\n"  // KEYCTL_SEARCH in @s
      "print('keysearch=%d' % (0 if r >= 0 else ctypes.get_errno()))\n";
  auto control = Fields(Unconfined(probe, {std::to_string(key)}).out);
  ASSERT_EQ(control["shmget"], "0") << "the probe finds the host segment";
  ASSERT_EQ(control["keysearch"], "0") << "the probe finds the caller's key";

  auto f = Fields(Confined({"--user", "root"}, probe, {std::to_string(key)}).out);
  EXPECT_EQ(f["shmget"], std::to_string(ENOENT)) << "a private IPC namespace";
  EXPECT_EQ(f["keysearch"], std::to_string(EPERM)) << "keyrings are refused";
  bool keyring_event = false;
  for (const auto& e : Events())
    keyring_event |= e.kind() == "tamper.keyring" && e.enforcement() == "seccomp" && e.verdict() == "denied";
  EXPECT_TRUE(keyring_event) << Slurp(audit_);
  // Allowed keyrings: a fresh session keyring, without the caller's key.
  PolicyFile keys("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: keys}\nspec:\n  allowKeyrings: true\n");
  auto g = Fields(Confined({"--user", "root", "--policy", keys.path()}, probe, {std::to_string(key)}).out);
  EXPECT_EQ(g["keysearch"], std::to_string(ENOKEY));
  ::shmctl(shm, IPC_RMID, nullptr);
  ::syscall(SYS_keyctl, KEYCTL_UNLINK, serial, KEY_SPEC_SESSION_KEYRING);
}

// What a sandboxed workload has no business doing to the host, refused by
// seccomp even where the policy grants the capability it would need.
TEST_F(RunIsolation, HostWideSyscallsAreRefusedWithEvents) {
  int pty_master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(pty_master, 0);
  ::grantpt(pty_master);
  ::unlockpt(pty_master);
  int pty_slave = ::open(::ptsname(pty_master), O_RDWR | O_NOCTTY);  // inheritable: --keep-fd
  ASSERT_GE(pty_slave, 3);
  const std::string probe = R"(import ctypes, os, sys, fcntl
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = libc.syscall(*args)
    print('%s=%d' % (name, 0 if r >= 0 else ctypes.get_errno()))
    return r
ppid = os.getppid()
tty = int(sys.argv[1])
call('tiocsti', 16, tty, 0x5412, ctypes.c_char_p(b' '))
call('syslog', 103, 10, None, 0)
call('fanotify_init', 300, 0, 0)
old = (ctypes.c_long * 2)()
call('prlimit_other', 302, ppid, 7, None, old)
prio = os.getpriority(os.PRIO_PROCESS, ppid)
call('setpriority_other', 141, 0, ppid, prio)
param = ctypes.c_int(0)
call('sched_other', 144, ppid, 0, ctypes.byref(param))
cur = libc.syscall(135, 0xffffffff)
call('personality_norandom', 135, cur | 0x0040000)
libc.syscall(135, cur)
r = call('memfd_plain', 319, b'x', 0)
if r >= 0: os.close(r)
r = call('memfd_sealed', 319, b'x', 0x0008)
if r >= 0: os.close(r)
r = call('open_mode3', 257, -100, b'/dev/null', 3)
if r >= 0: os.close(r)
f = int(sys.argv[2])
flags = ctypes.c_long(0)
libc.syscall(16, f, 0x80086601, ctypes.byref(flags))  # FS_IOC_GETFLAGS
call('setflags_same', 16, f, 0x40086602, ctypes.byref(flags))  # FS_IOC_SETFLAGS to what they are
rd, wr = os.pipe()
call('setown_other', 72, rd, 8, ppid)
libc.syscall(72, rd, 8, 0)
)";
  // Capabilities the kernel would want for these: granted, so that what
  // refuses below is the seccomp layer.
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: hostwide}\nspec:\n"
                    "  capabilities: [sys_admin, syslog, sys_nice, sys_tty_config]\n");
  std::string flagged = dir_ + "/flagged";
  std::ofstream(flagged) << "x";
  int flagged_fd = ::open(flagged.c_str(), O_RDONLY);  // inheritable: --keep-fd
  ASSERT_GE(flagged_fd, 3);
  auto control = Fields(Unconfined(probe, {std::to_string(pty_slave), std::to_string(flagged_fd)}).out);
  const bool inode_flags = control["setflags_same"] == "0";  // the filesystem supports them
  for (const char* call : {"tiocsti", "syslog", "fanotify_init", "prlimit_other", "setpriority_other", "sched_other",
                           "personality_norandom", "memfd_plain", "setown_other", "open_mode3"})
    ASSERT_EQ(control[call], "0") << call << " must work unconfined (the probe itself)";
  const bool sealed_memfds = control["memfd_sealed"] == "0";  // MFD_NOEXEC_SEAL: kernel 6.3+
  char injected[8] = {};
  ASSERT_EQ(::read(pty_master, injected, sizeof injected), 1) << "the unconfined TIOCSTI reached the pty";

  CommandResult r = Confined({"--policy", policy.path(), "--user", "root", "--keep-fd", std::to_string(pty_slave),
                              "--keep-fd", std::to_string(flagged_fd)},
                             probe, {std::to_string(pty_slave), std::to_string(flagged_fd)});
  ASSERT_EQ(r.status, 0) << r.err;
  auto f = Fields(r.out);
  for (const char* call : {"tiocsti", "syslog", "fanotify_init", "prlimit_other", "setpriority_other", "sched_other",
                           "personality_norandom", "memfd_plain", "setown_other", "open_mode3"})
    EXPECT_EQ(f[call], std::to_string(EPERM)) << call << "\n" << r.out;
  if (sealed_memfds) {
    EXPECT_EQ(f["memfd_sealed"], "0") << "sealed, non-executable memfds stay allowed";
  }
  if (inode_flags) {
    EXPECT_EQ(f["setflags_same"], std::to_string(EPERM)) << "FS_IOC_SETFLAGS on any descriptor";
  }
  std::map<std::string, int> kinds;
  for (const auto& e : Events())
    if (e.enforcement() == "seccomp" && e.verdict() == "denied") kinds[e.kind()]++;
  for (const char* kind : {"tamper.terminal", "tamper.syslog", "tamper.notify", "tamper.rlimit", "tamper.sched",
                           "tamper.personality", "file.memfd", "tamper.signal", "file.open"})
    EXPECT_GE(kinds[kind], 1) << kind << "\n" << Slurp(audit_);
  EXPECT_EQ(kinds["tamper.sched"], 2) << "setpriority and sched_setscheduler";
  EXPECT_EQ(kinds["file.memfd"], 1) << "only the unsealed memfd";
  if (inode_flags) {
    EXPECT_EQ(kinds["file.ioctl"], 1) << Slurp(audit_);
  }
  ::close(flagged_fd);
  ::close(pty_slave);
  ::close(pty_master);
}

// The caller's terminal: a real shell on a real pty invokes cordon run; the
// workload tries to push a command into that shell's input.
TEST_F(RunIsolation, TerminalInjectionCannotReachTheInvokingShell) {
  std::string marker = dir_ + "/injected";
  std::string probe = dir_ + "/probe.py";
  std::ofstream(probe) << "import fcntl, os, termios\n"
                          "cmd = b'touch " + marker + "\\n'\n"
                          "for path in (None, '/dev/tty'):\n"
                          "    try:\n"
                          "        fd = 0 if path is None else os.open(path, os.O_RDWR)\n"
                          "        for c in cmd: fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\n"
                          "        print('injected via', path)\n"
                          "    except OSError as e:\n"
                          "        print('refused via', path, e.errno)\n"
                          "try:\n    print('tty', os.isatty(0), os.readlink('/proc/self/fd/0'))\n"
                          "except OSError as e:\n    print('tty', os.isatty(0), e)\n";
  // The invoking shell runs on a pty of this test; it runs `line`, then
  // reads one more line (what an injection would have pushed) and runs it.
  auto shell_session = [&](const std::string& line) {
    std::string script = dir_ + "/session.py";
    std::ofstream(script) << "import os, pty, sys, time, select\n"
                             "pid, fd = pty.fork()\n"
                             "if pid == 0:\n"
                             "    os.execv('/bin/sh', ['/bin/sh', '-i'])\n"
                             "os.write(fd, sys.argv[1].encode() + b'; echo CORDON-DONE\\n')\n"
                             "out = b''\n"
                             "deadline = time.time() + 60\n"
                             "while time.time() < deadline and out.count(b'CORDON-DONE') < 2:\n"
                             "    r, _, _ = select.select([fd], [], [], 1)\n"
                             "    if r:\n"
                             "        try: out += os.read(fd, 65536)\n"
                             "        except OSError: break\n"
                             "time.sleep(1)\n"  // an injected line would run now
                             "os.write(fd, b'exit\\n')\n"
                             "time.sleep(0.5)\n"
                             "try: out += os.read(fd, 65536)\n"
                             "except OSError: pass\n"
                             "os.waitpid(pid, 0)\n"
                             "sys.stdout.write(out.decode('utf-8', 'replace'))\n";
    return cordon::test::Run({"/usr/bin/python3", script, line});
  };
  // Negative control: the probe run directly from that shell injects.
  CommandResult direct = shell_session("/usr/bin/python3 " + probe);
  EXPECT_NE(direct.out.find("injected via None"), std::string::npos) << direct.out;
  struct stat st;
  ASSERT_EQ(::stat(marker.c_str(), &st), 0) << "the unconfined probe injects into the shell:\n" << direct.out;
  ::unlink(marker.c_str());

  // TIOCSTI on a tty not ours needs CAP_SYS_ADMIN: granted. The probe is
  // read from this test's directory.
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: tty}\nspec:\n"
                    "  capabilities: [sys_admin]\n  files:\n    include: [runtime-minimal, python3]\n"
                    "    read: [" + dir_ + "]\n");
  CommandResult confined = shell_session(std::string(CORDON_BINARY) + " run --user root --policy " + policy.path() +
                                         " --audit " + audit_ + " -- /usr/bin/python3 " + probe);
  EXPECT_NE(confined.out.find("refused via None 1"), std::string::npos) << confined.out;
  EXPECT_EQ(confined.out.find("injected via"), std::string::npos) << confined.out;
  EXPECT_NE(::stat(marker.c_str(), &st), 0) << "nothing ran in the invoking shell:\n" << confined.out;
  EXPECT_NE(confined.out.find("tty True"), std::string::npos) << "the command has a pty:\n" << confined.out;
  int terminal = 0;
  for (const auto& e : Events()) terminal += e.kind() == "tamper.terminal" && e.verdict() == "denied";
  EXPECT_GE(terminal, 1) << Slurp(audit_);
}

// The caller's stdio are the command's explicit input and outputs: a stdout
// redirected to a file no rule names is still written. Another descriptor
// to a file of the same directory, kept open (--keep-fd), is not usable
// where BPF LSM judges descriptors opened outside the sandbox.
TEST_F(RunIsolation, StdioFilesAreTheCommandsOutputs) {
  std::string out = dir_ + "/stdout.txt", side = dir_ + "/side.txt";
  std::ofstream(side) << "side\n";
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: stdio}\nspec:\n  files:\n"
                    "    include: [runtime-minimal, shell]\n");
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int keep = ::open(side.c_str(), O_RDWR);  // not close-on-exec: fd 4 or so, kept below
    if (fd < 0 || keep < 0) _exit(120);
    ::dup2(fd, 1);
    ::dup2(keep, 9);
    ::execl(CORDON_BINARY, CORDON_BINARY, "run", "--quiet", "--user", "root", "--keep-fd", "9", "--policy",
            policy.path().c_str(), "--audit", audit_.c_str(), "--", "/bin/sh", "-c",
            "echo written; cat <&9 >/dev/null; echo side=$?", nullptr);
    _exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  std::string text = Slurp(out);
  EXPECT_NE(text.find("written"), std::string::npos) << text;
  if (LsmUsableHere()) {
    EXPECT_NE(text.find("side=1"), std::string::npos) << "a kept descriptor to a file outside the policy: " << text;
    bool event = false;
    // The path through the mount tree (in the test VMs it starts at the chroot's host root).
    for (const auto& e : Events())
      event |= e.kind() == "file.open" && e.file().path().size() >= side.size() &&
               e.file().path().compare(e.file().path().size() - side.size(), side.size(), side) == 0;
    EXPECT_TRUE(event) << Slurp(audit_);
  } else {
    // Landlock judges opens only: an inherited descriptor stays usable.
    EXPECT_NE(text.find("side=0"), std::string::npos) << text;
  }
}

// A private /tmp: gone at the end; the host's /tmp is not visible.
TEST_F(RunIsolation, ScratchTmpIsPrivateAndRemoved) {
  std::string host_file = "/tmp/cordon-isolation-host-" + std::to_string(::getpid());
  std::ofstream(host_file) << "host";
  const std::string probe = "import os,sys\nprint('sees_host=%d' % os.path.exists(sys.argv[1]))\n"
                            "open('/tmp/mine','w').write('x'); open('/dev/shm/mine','w').write('x')\n"
                            "print('wrote=1')\n";
  EXPECT_EQ(Fields(Unconfined(probe, {host_file}).out)["sees_host"], "1");
  ::unlink("/tmp/mine");
  ::unlink("/dev/shm/mine");
  auto f = Fields(Confined({}, probe, {host_file}).out);
  EXPECT_EQ(f["sees_host"], "0");
  EXPECT_EQ(f["wrote"], "1") << "the default policy may write its own /tmp and /dev/shm";
  struct stat st;
  EXPECT_NE(::stat("/tmp/mine", &st), 0);
  EXPECT_NE(::stat("/dev/shm/mine", &st), 0);
  // No scratch directory of a run that is gone is left behind.
  if (DIR* d = ::opendir("/run/cordon/scratch")) {
    while (auto* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("run-", 0) != 0) continue;
      int pid = std::atoi(name.c_str() + 4);
      EXPECT_TRUE(::kill(pid, 0) == 0 || errno != ESRCH) << "left behind: " << name;
    }
    ::closedir(d);
  }
  ::unlink(host_file.c_str());
}

// The calls cordon run's seccomp filter refuses whatever the policy (mount
// family, ptrace family, modules, namespaces, clocks, reboot, io_uring,
// perf, netlink and vsock sockets): each refusal is EPERM *and* an event
// from the seccomp layer naming the system call, as root with the
// capabilities the kernel itself would want.
// What doctor and run --help say of the fallback layers (where BPF LSM is
// unusable: Landlock and seccomp in cordon run), against what they do: each
// says its refusals are reported as events, and a run's refusal of each (a
// file outside the policy, a socket family outside it) is, with the errno
// it says. Control: unconfined, the same probe opens the file and gets no
// EPERM for the family.
TEST_F(RunIsolation, DoctorAndHelpSayWhatTheFallbackLayersReport) {
  if (LsmUsableHere()) GTEST_SKIP() << "BPF LSM enforces here: Landlock and seccomp are a second layer under it";
  if (ProbeLandlock().abi <= 0) GTEST_SKIP() << "no Landlock on this kernel";
  CommandResult doctor = Cordon({"doctor", "--json"});
  EXPECT_EQ(doctor.out.find("no events"), std::string::npos) << doctor.out;
  auto control_of = [&](const std::string& name) {
    size_t at = doctor.out.find("{\"name\":\"" + name + "\"");
    return at == std::string::npos ? std::string() : doctor.out.substr(at, doctor.out.find('}', at) - at);
  };
  EXPECT_NE(control_of("files").find("Landlock ABI"), std::string::npos) << control_of("files");
  EXPECT_NE(control_of("files").find("(EACCES, reported as events with the path as written"), std::string::npos)
      << control_of("files");
  EXPECT_NE(control_of("network.families").find("seccomp refuses other families (EPERM, reported as events)"),
            std::string::npos)
      << control_of("network.families");
  const std::string help = Cordon({"run", "--help"}).out;
  EXPECT_NE(help.find("not its TCP port rules"), std::string::npos) << help;
  EXPECT_NE(help.find("their refusals (EACCES, EPERM) are reported as events"), std::string::npos) << help;

  // Not under /tmp (the command has a private one); /run is writable in the test VMs too.
  char tmpl[] = "/run/cordon-fallback-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  struct Remove {
    std::string dir;
    ~Remove() { cordon::test::Run({"rm", "-rf", "--", dir}); }
  } remove{tmpl};
  ::chmod(tmpl, 0755);
  const std::string secret = std::string(tmpl) + "/outside-the-policy";
  std::ofstream(secret) << "x";
  ::chmod(secret.c_str(), 0644);  // readable by anyone: only the policy refuses it
  const std::string probe = "import errno, socket, sys\n"
                            "try:\n  open(sys.argv[1]).read(); print('open=0')\n"
                            "except OSError as e: print('open=%d' % e.errno)\n"
                            "try:\n  socket.socket(40, socket.SOCK_STREAM); print('vsock=0')\n"  // AF_VSOCK
                            "except OSError as e: print('vsock=%d' % e.errno)\n";
  auto control = Fields(Unconfined(probe, {secret}).out);
  ASSERT_EQ(control["open"], "0") << "the probe opens the file unconfined";
  ASSERT_NE(control["vsock"], std::to_string(EPERM));
  ASSERT_FALSE(control["vsock"].empty()) << "the probe did not run";
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: fallback}\nspec:\n"
                    "  files:\n    include: [runtime-minimal, python3]\n");
  CommandResult run = Confined({"--policy", policy.path(), "--verbose"}, probe, {secret});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("Landlock's denials are reported as cordon events from the failed call (EACCES)"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("not reported"), std::string::npos) << run.err;
  auto f = Fields(run.out);
  EXPECT_EQ(f["open"], std::to_string(EACCES)) << run.out;
  EXPECT_EQ(f["vsock"], std::to_string(EPERM)) << run.out;
  int opens = 0, families = 0;
  for (const auto& e : Events()) {
    opens += e.kind() == "file.open" && e.enforcement() == "landlock" && e.file().path() == secret;
    families += e.kind() == "net.socket" && e.enforcement() == "seccomp" && e.net().family() == "vsock";
  }
  EXPECT_EQ(opens, 1) << Slurp(audit_);
  EXPECT_EQ(families, 1) << Slurp(audit_);
}

TEST_F(RunIsolation, SeccompRefusalsAreReportedOneEventEach) {
  const std::string probe = R"(import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    print('%s=%d' % (name, 0 if r >= 0 else ctypes.get_errno()))
    if r >= 0 and name in ('fsopen', 'io_uring_setup', 'socket_netlink', 'socket_vsock'): os.close(r)
ts = (ctypes.c_long * 2)(0, 0)
params = ctypes.create_string_buffer(120)
call('mount', 165, b'none', b'/nonexistent-cordon', b'tmpfs', 0, None)
call('umount2', 166, b'/nonexistent-cordon', 0)
call('open_tree', 428, -100, b'/nonexistent-cordon', 0)
call('fsopen', 430, b'tmpfs', 0)
call('ptrace_attach', 101, 16, 0x7ffffff0, 0, 0)
call('process_vm_readv', 310, os.getpid(), None, 0, None, 0, 0)
call('init_module', 175, None, 0, b'')
call('finit_module', 313, -1, b'', 0)
call('delete_module', 176, b'cordon_nonexistent', os.O_NONBLOCK)
call('setns', 308, -1, 0)
call('clock_settime', 227, 1, ts)
call('reboot', 169, 0, 0, 0, None)
call('io_uring_setup', 425, 1, params)
call('perf_event_open', 298, None, 0, -1, -1, 0)
call('socket_netlink', 41, 16, 3, 0)
call('socket_vsock', 41, 40, 1, 0)
call('unshare_ns', 272, 0x20000)
)";
  struct Refusal {
    const char* call;
    const char* kind;
    uint32_t nr;
  };
  const std::vector<Refusal> refusals = {
      {"mount", "tamper.mount", 165},          {"umount2", "tamper.mount", 166},
      {"open_tree", "tamper.mount", 428},      {"fsopen", "tamper.mount", 430},
      {"ptrace_attach", "tamper.ptrace", 101}, {"process_vm_readv", "tamper.ptrace", 310},
      {"init_module", "tamper.module", 175},   {"finit_module", "tamper.module", 313},
      {"delete_module", "tamper.module", 176}, {"setns", "tamper.userns", 308},
      {"clock_settime", "tamper.clock", 227},  {"reboot", "tamper.reboot", 169},
      {"io_uring_setup", "tamper.io_uring", 425}, {"perf_event_open", "tamper.capability", 298},
      {"socket_netlink", "net.socket", 41},    {"socket_vsock", "net.socket", 41},
      {"unshare_ns", "tamper.userns", 272},
  };
  // Control, unconfined as root: the probe makes every call, and only the
  // module calls may be refused by the kernel itself (this host's root lacks
  // CAP_SYS_MODULE).
  auto control = Fields(Unconfined(probe).out);
  for (const auto& r : refusals) {
    ASSERT_EQ(control.count(r.call), 1u) << r.call << ": the probe did not run it";
    if (std::string(r.kind) != "tamper.module") {
      EXPECT_NE(control[r.call], std::to_string(EPERM)) << r.call;
    }
  }
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: refusals}\nspec:\n"
                    "  capabilities: [sys_admin, sys_ptrace, sys_time, sys_boot]\n");
  CommandResult run = Confined({"--policy", policy.path(), "--user", "root"}, probe);
  ASSERT_EQ(run.status, 0) << run.err;
  auto f = Fields(run.out);
  for (const auto& r : refusals) EXPECT_EQ(f[r.call], std::to_string(EPERM)) << r.call << "\n" << run.out;
  std::map<std::pair<std::string, uint32_t>, int> seen;
  for (const auto& e : Events())
    if (e.enforcement() == "seccomp" && e.verdict() == "denied") seen[{e.kind(), e.target().arg()}]++;
  std::map<std::pair<std::string, uint32_t>, int> want;
  for (const auto& r : refusals) want[{r.kind, r.nr}]++;
  for (const auto& [key, n] : want) {
    // socket() events carry the family in target.arg (see net.socket): count them apart.
    if (key.first == "net.socket") continue;
    EXPECT_EQ(seen[key], n) << key.first << " for system call " << key.second << "\n" << Slurp(audit_);
  }
  int netlink = 0, vsock = 0;
  for (const auto& e : Events()) {
    if (e.kind() != "net.socket" || e.enforcement() != "seccomp") continue;
    netlink += e.net().family() == "netlink";
    vsock += e.net().family() == "vsock";
  }
  EXPECT_EQ(netlink, 1) << Slurp(audit_);
  EXPECT_EQ(vsock, 1) << Slurp(audit_);
}

// Signals and abstract unix sockets outside the sandbox: refused (Landlock
// scoping, the cgroup unix hook or BPF LSM, whichever comes first on this
// kernel) and reported either way. Where no layer can refuse them (6.1
// without BPF LSM: Landlock ABI 2, no cgroup/connect_unix), cordon run says
// that they are not, and indeed they are not.
TEST_F(RunIsolation, SignalsAndAbstractSocketsOutsideAreRefusedAndReported) {
  const bool signals_refused = LsmUsableHere() || ProbeLandlock().abi >= 6;
  const bool abstract_refused = signals_refused || UnixHooks().available();
  Sleeper outside;
  const pid_t sleeper = outside.pid();
  ASSERT_GT(sleeper, 0);
  const std::string name = "cordon-isolation-" + std::to_string(::getpid());
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  // SIGWINCH: ignored by default, so a signal that got through harms nothing.
  const std::string probe = R"(import os, signal, socket, sys
try:
    os.kill(int(sys.argv[1]), signal.SIGWINCH); print('kill=0')
except OSError as e:
    print('kill=%d' % e.errno)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect('\0' + sys.argv[2]); print('connect=0')
except OSError as e:
    print('connect=%d' % e.errno)
)";
  const std::vector<std::string> args = {std::to_string(sleeper), name};
  auto control = Fields(Unconfined(probe, args).out);
  ASSERT_EQ(control["kill"], "0") << "the probe signals the sleeper unconfined";
  ASSERT_EQ(control["connect"], "0") << "the probe reaches the abstract listener unconfined";
  int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  ASSERT_GE(accepted, 0);
  ::close(accepted);

  CommandResult r = Confined({"--user", "root"}, probe, args);
  ASSERT_EQ(r.status, 0) << r.err;
  auto f = Fields(r.out);
  EXPECT_EQ(f["kill"], std::to_string(signals_refused ? EPERM : 0)) << r.out;
  EXPECT_EQ(f["connect"], std::to_string(abstract_refused ? EPERM : 0)) << r.out;
  if (!signals_refused) {
    EXPECT_NE(r.err.find("signals to processes outside the sandbox are NOT restricted"), std::string::npos) << r.err;
  }
  if (!abstract_refused) {
    EXPECT_NE(r.err.find("connections to abstract unix sockets outside the sandbox are NOT refused"),
              std::string::npos)
        << r.err;
  }
  int accepted_after = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  EXPECT_EQ(accepted_after >= 0, !abstract_refused) << "got through exactly where not refused";
  if (accepted_after >= 0) ::close(accepted_after);
  ::close(listener);
  int signals = 0, abstract = 0;
  for (const auto& e : Events()) {
    if (e.verdict() != "denied") continue;
    signals += e.kind() == "tamper.signal" && e.target().pid() == static_cast<uint32_t>(sleeper);
    abstract += e.kind() == "net.unix";
  }
  EXPECT_EQ(signals, signals_refused ? 1 : 0) << Slurp(audit_);
  if (abstract_refused) {
    EXPECT_GE(abstract, 1) << Slurp(audit_);
  } else {
    EXPECT_EQ(abstract, 0) << Slurp(audit_);
  }
}

}  // namespace
}  // namespace cordon::test
