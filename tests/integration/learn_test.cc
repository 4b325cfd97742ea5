// `cordon learn`: a real workload learned in audit mode, then run again
// under the learned policy in enforce mode (no violation beyond what the
// report said it could not learn), and probes the workload never made
// refused, each with its unconfined control.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "loader/sandbox.h"
#include "tests/integration/harness.h"
#include "tests/integration/learn_window.h"

namespace cordon::test {
namespace {

// The test's files: under /run (the test VMs' root and /var/log are
// read-only; /tmp would be cordon run's private one), removed at the end.
class Learn : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    char tmpl[] = "/run/cordon-learn-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    if (!dir_.empty()) test::Run({"rm", "-rf", dir_});
  }
  // Runs a shell script unconfined ("$1"... are `args`); fails the test if it fails.
  void Sh(const std::string& script, const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = {"/bin/sh", "-ec", script, "sh"};
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = test::Run(argv);
    ASSERT_EQ(r.status, 0) << script << "\n" << r.out << r.err;
  }
  // The report's "not learned" lines.
  static std::vector<std::string> NotLearned(const std::string& report) {
    std::vector<std::string> out;
    std::istringstream in(report);
    bool inside = false;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("not learned", 0) == 0) {
        inside = true;
      } else if (inside && line.rfind("  ", 0) == 0) {
        out.push_back(line.substr(2));
      } else {
        inside = false;
      }
    }
    return out;
  }
  // The events of an enforce run the report did not announce (by kind and path).
  static std::vector<std::string> Unannounced(const std::vector<cordon::v1::AuditEvent>& events,
                                              const std::vector<std::string>& not_learned) {
    std::vector<std::string> out;
    for (const auto& e : events) {
      const std::string target = e.has_file() ? e.file().path() : e.net().address();
      const std::string what = e.kind() + (target.empty() ? "" : " " + target);
      bool announced = false;
      for (const auto& line : not_learned) announced = announced || line.rfind(what + ":", 0) == 0;
      if (!announced) out.push_back(what + " (" + e.verdict() + ", " + e.reason() + ")");
    }
    return out;
  }
  std::string dir_;
};

// A loopback HTTP server (python3 -m http.server's handler) over `root`,
// started by the test outside every sandbox; killed at the end.
class HttpServer {
 public:
  explicit HttpServer(const std::string& root) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::execl("/usr/bin/python3", "python3", "-c",
              "import functools, http.server, sys\n"
              "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n"
              "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n"
              "print(s.server_address[1], flush=True)\n"
              "s.serve_forever()\n",
              root.c_str(), nullptr);
      _exit(127);
    }
    ::close(out[1]);
    // The port is written once the socket listens: reading it is the synchronisation.
    FILE* f = ::fdopen(out[0], "r");
    if (f && std::fscanf(f, "%hu", &port_) != 1) port_ = 0;
    if (f) std::fclose(f);
  }
  ~HttpServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // our own child
      ::waitpid(pid_, nullptr, 0);
    }
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

std::string PythonConnect(uint16_t port) {
  return "import socket,sys\n"
         "s=socket.socket()\n"
         "try:\n"
         "  s.connect(('127.0.0.1'," +
         std::to_string(port) +
         "))\n"
         "except OSError as e:\n"
         "  print('errno', e.errno); sys.exit(e.errno)\n"
         "print('connected')\n";
}

std::string PythonRead(const std::string& path) {
  return "import sys\n"
         "try:\n"
         "  print(open(" +
         ("'" + path + "'") +
         ").read())\n"
         "except OSError as e:\n"
         "  print('errno', e.errno); sys.exit(e.errno)\n";
}

// The B6 job (bench/b6/job.sh: byte-compiles part of the standard library,
// then runs a small unittest suite) learned in two rounds, then run afresh in
// enforce mode under the learned policy.
TEST_F(Learn, TheB6JobRunsUnderItsLearnedPolicyAndAFileItNeverReadIsRefused) {
  const std::string job = dir_ + "/job", src = CORDON_SOURCE_DIR;
  const std::string policy = dir_ + "/learned.json", report = dir_ + "/report.txt", audit = dir_ + "/enforce.jsonl";
  // A fresh copy of the job's files, made the same way before each run.
  auto fresh = [&] {
    Sh("rm -rf \"$1\" && mkdir -p \"$1/src\" \"$1/tmp\"\n"
       "for p in json html email; do cp -r /usr/lib/python3.11/$p \"$1/src/\"; done\n"
       "cp -r \"$2/bench/b6/suite\" \"$1/suite\" && cp \"$2/bench/b6/job.sh\" \"$1/job.sh\"\n"
       "find \"$1\" -name __pycache__ -prune -exec rm -rf {} +\n",
       {job, src});
  };
  fresh();
  // A file beside the job that the job never reads, and its directory.
  Sh("mkdir -p " + dir_ + "/private && echo secret > " + dir_ + "/private/key.txt");
  // As root: the job's files are root's (as bench/b6 runs it).
  CommandResult learned = Cordon({"learn", "--rounds", "2", "--user", "root", "--out", policy, "--report", report, "--",
                                  "/bin/sh", job + "/job.sh", job});
  const std::string text = Slurp(report);
  ASSERT_TRUE(learned.status == 0 || learned.status == 3) << learned.out << learned.err << text;
  EXPECT_EQ(learned.out, "") << "the command's output goes to stderr, the policy to --out";
  // Two rounds at most: the second, under the policy learned from the first, observes nothing new.
  EXPECT_NE(text.find("round 1 (audit): the command exited 0;"), std::string::npos) << text;
  EXPECT_NE(text.find("round 2 (enforce): the command exited 0;"), std::string::npos) << text;
  EXPECT_NE(text.find(" 0 new accesses; trail complete"), std::string::npos) << text;
  EXPECT_EQ(text.find("LOST"), std::string::npos) << text;
  EXPECT_NE(text.find("write " + job + ": read, write, create, delete and rename anywhere below it"), std::string::npos)
      << text;
  const std::vector<std::string> not_learned = NotLearned(text);
  EXPECT_EQ(learned.status, not_learned.empty() ? 0 : 3) << text;
  // What it did not learn is only what no policy lets a fresh run do here:
  // glibc's probe of nscd's socket, which does not exist on this host (the
  // cgroup unix hooks judge the address before the kernel finds it missing).
  for (const auto& line : not_learned)
    EXPECT_EQ(line.rfind("net.unix /var/run/nscd/socket: no socket was there", 0), 0u) << line;

  // The policy passes `cordon policy check`.
  CommandResult check = Cordon({"policy", "check", policy});
  EXPECT_EQ(check.status, 0) << check.out << check.err;

  // Enforce mode, a fresh copy: the job succeeds and nothing is refused
  // beyond what the report announced.
  fresh();
  CommandResult enforced =
      Cordon({"run", "--user", "root", "--policy", policy, "--audit", audit, "--", "/bin/sh", job + "/job.sh", job});
  EXPECT_EQ(enforced.status, 0) << enforced.out << enforced.err << Slurp(job + "/unittest.log");
  EXPECT_NE(Slurp(job + "/times"), "") << "the job ran to its end";
  const auto events = AuditFileEvents(audit);
  const auto unannounced = Unannounced(events, not_learned);
  EXPECT_TRUE(unannounced.empty()) << unannounced.size() << " unannounced, first: " << unannounced[0];

  // A file the job never read, outside what it learned: readable unconfined
  // (the control), refused under the learned policy (EACCES) with its event.
  const std::string key = dir_ + "/private/key.txt";
  CommandResult control = test::Run({"/usr/bin/python3", "-c", PythonRead(key)});
  EXPECT_EQ(control.status, 0) << control.out << control.err;
  EXPECT_NE(control.out.find("secret"), std::string::npos);
  const std::string probe_audit = dir_ + "/probe.jsonl";
  CommandResult probe = Cordon({"run", "--user", "root", "--policy", policy, "--audit", probe_audit, "--",
                                "/usr/bin/python3", "-c", PythonRead(key)});
  EXPECT_EQ(probe.status, EACCES) << probe.out << probe.err;
  EXPECT_EQ(probe.out.find("secret"), std::string::npos) << probe.out;
  int refused = 0;
  for (const auto& e : AuditFileEvents(probe_audit))
    if (e.kind() == "file.open" && e.file().path() == key && e.verdict() == "denied") ++refused;
  EXPECT_GE(refused, 1) << Slurp(probe_audit);
}

// pip installing a package from a local index (an HTTP server on loopback
// over a wheel the test builds; no internet), learned, then installed again
// into a fresh target in enforce mode: no violation; a connect to a loopback
// port it never used is refused (EPERM, a net.connect event), with the
// unconfined control.
TEST_F(Learn, PipFromALocalIndexRunsUnderItsLearnedPolicyAndAnotherPortIsRefused) {
  if (test::Run({"/usr/bin/python3", "-m", "pip", "--version"}).status != 0)
    GTEST_SKIP() << "python3-pip is not installed";
  const std::string wheels = dir_ + "/wheels", target = dir_ + "/target";
  const std::string policy = dir_ + "/learned.json", report = dir_ + "/report.txt", audit = dir_ + "/enforce.jsonl";
  // The wheel: a module and its metadata, zipped (PEP 427).
  Sh("mkdir -p " + wheels + " " + target);
  CommandResult made =
      test::Run({"/usr/bin/python3", "-c",
                 "import sys, zipfile\n"
                 "d = 'cordon_demo-1.0.dist-info/'\n"
                 "with zipfile.ZipFile(sys.argv[1] + '/cordon_demo-1.0-py3-none-any.whl', 'w') as z:\n"
                 "  z.writestr('cordon_demo/__init__.py', 'GREETING = \"hello from the local index\"\\n')\n"
                 "  z.writestr(d + 'METADATA', 'Metadata-Version: 2.1\\nName: cordon-demo\\nVersion: 1.0\\n')\n"
                 "  z.writestr(d + 'WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\n"
                 "Tag: py3-none-any\\n')\n"
                 "  z.writestr(d + 'RECORD', '')\n",
                 wheels});
  ASSERT_EQ(made.status, 0) << made.err;
  HttpServer index(wheels);
  ASSERT_NE(index.port(), 0) << "the index server did not start";
  TcpListener other;  // a loopback port the workload never uses
  const std::vector<std::string> pip = {"/usr/bin/python3",
                                        "-m",
                                        "pip",
                                        "install",
                                        "--no-index",
                                        "--find-links",
                                        "http://127.0.0.1:" + std::to_string(index.port()) + "/",
                                        "--target",
                                        target,
                                        "--no-cache-dir",
                                        "--disable-pip-version-check",
                                        "--no-input",
                                        "--upgrade",
                                        "cordon-demo"};
  // Three rounds: audit, then enforce under what was learned (without BPF LSM
  // audit mode does not see the #! scripts pip runs: lsb_release).
  std::vector<std::string> learn = {"learn", "--rounds", "3",        "--user", "root",
                                    "--out", policy,     "--report", report,   "--"};
  learn.insert(learn.end(), pip.begin(), pip.end());
  CommandResult learned = Cordon(learn);
  const std::string text = Slurp(report);
  ASSERT_TRUE(learned.status == 0 || learned.status == 3) << learned.out << learned.err << text;
  EXPECT_NE(text.find("round 1 (audit): the command exited 0;"), std::string::npos) << text;
  EXPECT_NE(text.find("egress 127.0.0.1 port " + std::to_string(index.port()) + "/tcp: exactly the observed"),
            std::string::npos)
      << text;
  const std::vector<std::string> not_learned = NotLearned(text);
  EXPECT_EQ(learned.status, not_learned.empty() ? 0 : 3) << text;
  CommandResult check = Cordon({"policy", "check", policy});
  EXPECT_EQ(check.status, 0) << check.out << check.err;

  // Enforce mode, a fresh target.
  Sh("rm -rf " + target + " && mkdir " + target);
  std::vector<std::string> run = {"run", "--user", "root", "--policy", policy, "--audit", audit, "--"};
  run.insert(run.end(), pip.begin(), pip.end());
  CommandResult enforced = Cordon(run);
  EXPECT_EQ(enforced.status, 0) << enforced.out << enforced.err;
  EXPECT_NE(Slurp(target + "/cordon_demo/__init__.py").find("hello from the local index"), std::string::npos);
  const auto unannounced = Unannounced(AuditFileEvents(audit), not_learned);
  EXPECT_TRUE(unannounced.empty()) << unannounced.size() << " unannounced, first: " << unannounced[0];

  // Another loopback port: reachable unconfined (the control), refused under
  // the learned policy with EPERM and a net.connect event.
  CommandResult control = test::Run({"/usr/bin/python3", "-c", PythonConnect(other.port())});
  EXPECT_EQ(control.status, 0) << control.out << control.err;
  EXPECT_EQ(other.AcceptCount(1), 1);
  const std::string probe_audit = dir_ + "/probe.jsonl";
  CommandResult probe = Cordon({"run", "--user", "root", "--policy", policy, "--audit", probe_audit, "--",
                                "/usr/bin/python3", "-c", PythonConnect(other.port())});
  EXPECT_EQ(probe.status, EPERM) << probe.out << probe.err;
  EXPECT_NE(probe.out.find("errno 1"), std::string::npos) << probe.out;
  EXPECT_EQ(other.AcceptPending(), 0);
  int refused = 0;
  for (const auto& e : AuditFileEvents(probe_audit))
    if (e.kind() == "net.connect" && e.net().port() == other.port() && e.verdict() == "denied") ++refused;
  EXPECT_EQ(refused, 1) << Slurp(probe_audit);
}

// Bad input: usage errors name the option (exit 2), a base policy with an
// error names its file and line (exit 1), and nothing is written.
TEST_F(Learn, BadInputIsNamedAndNothingIsWritten) {
  const std::string out = dir_ + "/out.json";
  struct Case {
    std::vector<std::string> args;
    int status;
    std::string says;
  };
  PolicyFile bad(
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: bad}\nspec:\n  network:\n"
      "    egress: [{cidr: 10.0.0.0/8, ports: [70000]}]\n");
  const std::vector<Case> cases = {
      {{"learn", "--out", out}, 2, "learn needs a command"},
      {{"learn", "--rounds", "0", "--out", out, "--", "/bin/true"}, 2, "--rounds"},
      {{"learn", "--rounds", "x", "--out", out, "--", "/bin/true"}, 2, "--rounds"},
      {{"learn", "--frobnicate", "--out", out, "--", "/bin/true"}, 2, "--frobnicate"},
      {{"learn", "--out", "", "--", "/bin/true"}, 2, "--out"},
      {{"learn", "--out", out, "--report", out, "--", "/bin/true"}, 2, "--out and --report name the same file"},
      {{"learn", "--user", "no such user!", "--out", out, "--", "/bin/true"}, 2, "--user"},
      {{"learn", "--allow-net", "10.0.0.0/8:x", "--out", out, "--", "/bin/true"}, 2, "--allow-net"},
      {{"learn", "--policy", bad.path(), "--out", out, "--", "/bin/true"}, 1, bad.path() + ":6:"},
      // The --cgroup form.
      {{"learn", "--cgroup", "/sys/fs/cgroup", "--out", out}, 2, "--cgroup needs --duration"},
      {{"learn", "--cgroup", "/sys/fs/cgroup", "--duration", "0s", "--out", out}, 2, "--duration"},
      {{"learn", "--cgroup", "/sys/fs/cgroup", "--duration", "ten", "--out", out}, 2, "--duration"},
      {{"learn", "--cgroup", "/sys/fs/cgroup", "--duration", "31d", "--out", out}, 2, "--duration"},
      {{"learn", "--cgroup", "/sys/fs/cgroup", "--duration", "1m", "--out", out, "--", "/bin/true"},
       2,
       "give no command"},
      {{"learn", "--cgroup", "/sys/fs/cgroup", "--duration", "1m", "--rounds", "2", "--out", out}, 2, "--rounds"},
      {{"learn", "--cgroup", "/sys/fs/cgroup", "--duration", "1m", "--user", "root", "--out", out}, 2, "--user"},
      {{"learn", "--duration", "1m", "--out", out, "--", "/bin/true"}, 2, "--duration goes with --cgroup"},
      {{"learn", "--allow-degraded", "--out", out, "--", "/bin/true"}, 2, "--allow-degraded goes with --cgroup"},
      {{"learn", "--cgroup", "/no/such/cgroup", "--duration", "1m", "--allow-degraded", "--out", out},
       1,
       "/no/such/cgroup"},
  };
  for (const auto& c : cases) {
    CommandResult r = Cordon(c.args);
    EXPECT_EQ(r.status, c.status) << c.args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << "want '" << c.says << "' in: " << r.err;
    struct stat st;
    EXPECT_NE(::stat(out.c_str(), &st), 0) << "nothing written for " << c.args[1];
  }
  // The help names every option the parser takes (the man page is made from it).
  CommandResult help = Cordon({"learn", "--help"});
  EXPECT_EQ(help.status, 0);
  for (const char* option : {"--policy", "--out", "--report", "--audit", "--rounds", "--user", "/etc", "/run/cordon",
                             "--cgroup", "--duration", "--allow-degraded"})
    EXPECT_NE(help.out.find(option), std::string::npos) << option;
  // Where attached processes do not show everything (no BPF LSM), --cgroup
  // says what and needs --allow-degraded; nothing is attached.
  if (!LsmUsableHere()) {
    TestCgroup cg("learn-degraded");
    CommandResult r = Cordon({"learn", "--cgroup", cg.path(), "--duration", "1m", "--out", out});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("this kernel does not show"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("pass --allow-degraded"), std::string::npos) << r.err;
    EXPECT_FALSE(Exists(SandboxPinDir(cg.id())));
    EXPECT_FALSE(Exists(out));
  }
}

// cordon learn --cgroup: a workload already in its cgroup (holding a
// connection it opened before), learned over a window that runs to its end;
// its events read directly (no agent). The learned policy, attached in
// enforce mode, lets the same work through and refuses another port and
// another file (learn_window.h).
TEST_F(Learn, AWorkloadInACgroupIsLearnedOverAWindowAndItsPolicyEnforcesWhatItSaw) {
  LearnFromCgroupAndEnforce({dir_, "read directly", 0, dir_ + "/window.jsonl", "", nullptr});
}

// SIGINT in the middle of the window: the sandbox is detached, the policy
// learned so far written (exit 3, the report says the window was cut short),
// and it enforces what the workload did until then.
TEST_F(Learn, ASignalEndsTheWindowDetachesAndWritesWhatWasLearnedSoFar) {
  LearnFromCgroupAndEnforce({dir_, "read directly", SIGINT, "", "", nullptr});
}

// A cgroup that has a sandbox: learning would replace its policy, which
// cordon cannot put back; refused, and the sandbox keeps its policy.
TEST_F(Learn, ACgroupThatHasASandboxIsRefusedAndKeepsItsPolicy) {
  TestCgroup cg("learn-taken");
  TcpListener allowed, other;
  PolicyFile theirs(LoopbackPolicy("theirs", allowed.port()));
  const CommandResult attached =
      Cordon({"attach", "--cgroup", cg.path(), "--policy", theirs.path(), "--allow-degraded"});
  ASSERT_EQ(attached.status, 0) << attached.err;
  const std::string out = dir_ + "/out.json";
  const CommandResult r =
      Cordon({"learn", "--cgroup", cg.path(), "--duration", "10m", "--allow-degraded", "--out", out});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("(policy 'theirs', enforce mode) is attached to " + cg.path() +
                       " already: learning would replace its policy"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(Exists(out));
  auto info = GetSandbox(cg.id());
  ASSERT_TRUE(info) << "still attached";
  EXPECT_EQ(info->policy, "theirs");
  // Still enforced as it was: its port is reachable, another is not.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", allowed.port())); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", other.port())); }), EPERM);
}

}  // namespace
}  // namespace cordon::test
