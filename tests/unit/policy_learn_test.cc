// cordon learn's pure part (policy/learn.h): observations and a base policy
// in, a candidate policy and a report out; the host's answers about paths
// given by the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "abi/cordon_file.h"
#include "policy/compiler.h"
#include "policy/inline.h"
#include "policy/learn.h"
#include "policy/parser.h"

namespace cordon::policy {
namespace {

ParsedPolicy Parse(const std::string& text, const std::string& file = "base.yaml") {
  ParsedPolicy parsed;
  Diagnostics diags;
  EXPECT_TRUE(ParsePolicyText(text, file, &parsed, &diags)) << FormatDiagnostics(diags);
  return parsed;
}

CompiledPolicy CompileOk(const ParsedPolicy& parsed) {
  CompiledPolicy compiled;
  Diagnostics diags;
  EXPECT_TRUE(Compile(parsed, &compiled, &diags)) << FormatDiagnostics(diags);
  return compiled;
}

const char* kBase =
    "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: base}\nspec:\n"
    "  files:\n    include: [runtime-minimal]\n    read: [/work/data]\n";

Observation Open(const std::string& path, uint32_t access = CORDON_FILE_READ) {
  Observation o;
  o.kind = "file.open";
  o.path = path;
  o.access = access;
  return o;
}
Observation OfKind(const std::string& kind, const std::string& path = "") {
  Observation o;
  o.kind = kind;
  o.path = path;
  return o;
}
Observation Net(const std::string& kind, const std::string& address, uint32_t port, const std::string& protocol) {
  Observation o;
  o.kind = kind;
  o.address = address;
  o.port = port;
  o.protocol = protocol;
  o.family = address.find(':') == std::string::npos ? "inet" : "inet6";
  o.sock_type = protocol == "udp" ? "dgram" : "stream";
  return o;
}

// A host made of a few directories and files; `made` were made during learning.
struct FakeHost {
  std::set<std::string> dirs, files, made;
  LearnFacts Facts() const {
    LearnFacts f;
    f.is_directory = [this](const std::string& p) { return dirs.count(p) > 0; };
    f.existed_before = [this](const std::string& p) { return (dirs.count(p) || files.count(p)) && !made.count(p); };
    f.entries = [this](const std::string& d) {
      std::vector<std::string> out;
      for (const auto* set : {&dirs, &files})
        for (const auto& p : *set)
          if (p.size() > d.size() + 1 && p.compare(0, d.size() + 1, d + "/") == 0 &&
              p.find('/', d.size() + 1) == std::string::npos)
            out.push_back(p.substr(d.size() + 1));
      std::sort(out.begin(), out.end());
      return out;
    };
    return f;
  }
};

struct Learned {
  LearnResult result;
  ParsedPolicy reread;
  CompiledPolicy compiled;
  std::vector<std::string> read, write, exec;
  std::string Report() const {
    std::string out;
    for (const auto& l : result.report) out += l + "\n";
    return out;
  }
};

Learned LearnFrom(const std::vector<Observation>& observations, const FakeHost& host, const char* base_text = kBase,
                  const std::vector<LearnRound>& rounds = {}) {
  Learned l;
  const ParsedPolicy base = Parse(base_text);
  const CompiledPolicy compiled = CompileOk(base);
  l.result = Learn(base, compiled, observations, rounds, host.Facts());
  // What `cordon policy check` reads back: it parses and compiles.
  l.reread = Parse(l.result.text, "learned.json");
  l.compiled = CompileOk(l.reread);
  const auto& f = l.reread.proto.spec().files();
  l.read.assign(f.read().begin(), f.read().end());
  l.write.assign(f.write().begin(), f.write().end());
  l.exec.assign(f.exec().begin(), f.exec().end());
  return l;
}

TEST(LearnBoundaries, NeverOntoOrAboveABoundaryNorInsideAWholeTree) {
  // Boundaries themselves.
  for (const char* dir : {"/", "/etc", "/usr", "/home", "/tmp", "/home/alice", "/var/lib", "/var/log", "/root",
                          "/home/alice/.ssh", "/home/alice/.aws", "/home/alice/.config", "/proc", "/run/cordon"})
    EXPECT_NE(BoundaryOf(dir), "") << dir;
  // Above one: /var holds /var/lib, /run holds /run/secrets.
  EXPECT_NE(BoundaryOf("/var").find("/var"), std::string::npos);
  EXPECT_NE(BoundaryOf("/home/alice/.local/share").find(".local/share/keyrings"), std::string::npos)
      << BoundaryOf("/home/alice/.local/share");
  // Inside whole trees: keys, the host's configuration, kernel files.
  for (const char* dir : {"/etc/ssl/certs", "/etc/ssh", "/home/bob/.ssh/keys", "/home/bob/.gnupg/private-keys-v1.d",
                          "/root/project", "/proc/sys/net", "/sys/fs/cgroup", "/run/cordon/credentials/run-1",
                          "/var/lib/cordon/oidc", "/run/secrets/db", "/run/user/1000/gnupg"})
    EXPECT_NE(BoundaryOf(dir).find("inside"), std::string::npos) << dir << ": " << BoundaryOf(dir);
  // Ordinary directories below a boundary collapse.
  for (const char* dir : {"/usr/lib/python3.11", "/home/alice/project/src", "/var/lib/apt/lists", "/work/b6/src",
                          "/opt/tool/lib", "/var/cache/pip"})
    EXPECT_EQ(BoundaryOf(dir), "") << dir;
  // The caller's home is a whole tree too.
  EXPECT_NE(BoundaryOf("/work/me/src", {"/work/me"}), "");
  EXPECT_EQ(BoundaryOf("/work/other/src", {"/work/me"}), "");
}

TEST(Learn, ReadsCollapseByDirectoryAndTheReportNamesWhatWasNeverOpened) {
  FakeHost host;
  host.dirs = {"/work", "/work/proj", "/work/proj/src", "/work/proj/src/sub"};
  host.files = {"/work/proj/src/a.py", "/work/proj/src/b.py", "/work/proj/src/c.py", "/work/proj/src/sub/d.py"};
  // Each access reported several times (BPF LSM reports each hook): deduplicated.
  std::vector<Observation> obs = {Open("/work/proj/src/a.py"), Open("/work/proj/src/b.py"), Open("/work/proj/src/a.py"),
                                  Open("/work/proj/src/b.py")};
  DedupeObservations(&obs);
  EXPECT_EQ(obs.size(), 2u);
  Learned l = LearnFrom(obs, host);
  EXPECT_EQ(l.read, (std::vector<std::string>{"/work/data", "/work/proj/src"})) << l.result.text;
  EXPECT_TRUE(l.write.empty());
  EXPECT_EQ(l.result.learned_rules, 1u);
  EXPECT_TRUE(l.result.not_learned.empty());
  const std::string report = l.Report();
  EXPECT_NE(report.find("read /work/proj/src: read every file below it; observed 2 paths; never observed: 2 entries "
                        "(c.py, sub/), and everything below them"),
            std::string::npos)
      << report;
  // The base's own rules and profiles stay as they were.
  EXPECT_EQ(l.reread.proto.spec().files().include_size(), 1);
  EXPECT_EQ(l.reread.proto.metadata().name(), "base");
}

TEST(Learn, SensitiveFilesAreNamedExactlyNeverTheirDirectory) {
  FakeHost host;
  host.dirs = {"/etc", "/etc/ssl", "/etc/ssl/certs", "/home", "/home/u", "/home/u/.ssh", "/home/u/work"};
  host.files = {"/etc/app.conf",           "/etc/passwd",       "/etc/ssl/certs/ca.pem", "/home/u/.ssh/known_hosts",
                "/home/u/.ssh/id_ed25519", "/home/u/notes.txt", "/home/u/work/a.c"};
  // (/etc/hosts would be runtime-minimal's: the base allows it.)
  Learned l = LearnFrom({Open("/etc/app.conf"), Open("/etc/hosts"), Open("/etc/ssl/certs/ca.pem"),
                         Open("/home/u/.ssh/known_hosts"), Open("/home/u/notes.txt"), Open("/home/u/work/a.c")},
                        host);
  EXPECT_EQ(l.read, (std::vector<std::string>{"/work/data", "/etc/app.conf", "/etc/ssl/certs/ca.pem",
                                              "/home/u/.ssh/known_hosts", "/home/u/notes.txt", "/home/u/work"}))
      << l.result.text;
  const std::string report = l.Report();
  EXPECT_NE(report.find("read /home/u/.ssh/known_hosts: exactly this file (/home/u/.ssh is a sensitive boundary"),
            std::string::npos)
      << report;
  EXPECT_NE(
      report.find("read /home/u/notes.txt: exactly this file (/home/u is a sensitive boundary (a home directory))"),
      std::string::npos)
      << report;
}

TEST(Learn, WritesClimbToTheDirectoryThatExistedBeforeAndNeverOntoABoundary) {
  FakeHost host;
  host.dirs = {"/work", "/work/out", "/work/out/new", "/work/out/new/deep", "/etc", "/work/proj", "/work/proj/src"};
  host.files = {"/work/out/new/deep/f.txt", "/etc/app.conf", "/etc/made.conf", "/work/proj/src/a.py"};
  host.made = {"/work/out/new", "/work/out/new/deep", "/work/out/new/deep/f.txt", "/etc/made.conf"};
  Learned l = LearnFrom(
      {
          Open("/work/out/new/deep/f.txt", CORDON_FILE_WRITE),          // made in directories made during the run
          Open("/work/out/tmp.123", CORDON_FILE_WRITE),                 // a temporary file, gone (renamed) by now
          Open("/etc/app.conf", CORDON_FILE_READ | CORDON_FILE_WRITE),  // the host's configuration: never
          Open("/etc/made.conf", CORDON_FILE_WRITE),                    // the same
          OfKind("file.create", "/work/proj/src/__pycache__"),  // BPF LSM: the mkdir itself
          Open("/work/proj/src/a.py"),                          // read where it also writes: the write covers it
      },
      host);
  EXPECT_EQ(l.write, (std::vector<std::string>{"/work/out", "/work/proj/src"})) << l.result.text;
  EXPECT_EQ(l.read, (std::vector<std::string>{"/work/data"})) << l.result.text;
  ASSERT_EQ(l.result.not_learned.size(), 2u) << l.Report();
  for (const auto& line : l.result.not_learned)
    EXPECT_NE(line.find(": a learned policy never writes below /etc (the host's programs, libraries, configuration"),
              std::string::npos)
        << line;
  const std::string report = l.Report();
  EXPECT_NE(report.find("write /work/out: read, write, create, delete and rename anywhere below it; observed 2 paths"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("not learned (observed, but the candidate does not allow it"), std::string::npos) << report;
}

// Writes that would let the workload's next run change the host are never
// learned, wherever the workload wrote while learning: programs, libraries,
// configuration, whole-tree boundaries (keys), also through a symlink; the
// control: the same kinds of writes in a directory of its own are.
TEST(Learn, WritesToTheHostsProgramsConfigurationAndKeysAreNeverLearned) {
  FakeHost host;
  host.dirs = {"/usr", "/usr/bin", "/etc", "/home", "/home/u", "/home/u/.ssh", "/var", "/var/lib", "/var/lib/dpkg",
               "/work", "/work/out", "/work/link"};
  host.files = {"/usr/bin/python3", "/etc/shadow", "/home/u/.ssh/authorized_keys", "/var/lib/dpkg/status",
                "/work/out/result.txt"};
  LearnFacts facts = host.Facts();
  Learned l;
  {
    // /work/link is a symlink to /usr/bin here.
    const ParsedPolicy base = Parse(kBase);
    const CompiledPolicy compiled = CompileOk(base);
    facts.canonical = [](const std::string& p) {
      return p.rfind("/work/link", 0) == 0 ? "/usr/bin" + p.substr(std::string("/work/link").size()) : p;
    };
    l.result = Learn(base, compiled,
                     {Open("/usr/bin/python3", CORDON_FILE_WRITE), Open("/usr/bin/new-tool", CORDON_FILE_WRITE),
                      Open("/etc/shadow", CORDON_FILE_READ | CORDON_FILE_WRITE),
                      Open("/home/u/.ssh/authorized_keys", CORDON_FILE_WRITE),
                      Open("/var/lib/dpkg/status", CORDON_FILE_WRITE), Open("/work/link/sneaky", CORDON_FILE_WRITE),
                      Open("/work/out/result.txt", CORDON_FILE_WRITE)},
                     {}, facts);
    l.reread = Parse(l.result.text, "learned.json");
    const auto& f = l.reread.proto.spec().files();
    l.write.assign(f.write().begin(), f.write().end());
  }
  EXPECT_EQ(l.write, (std::vector<std::string>{"/work/out"})) << l.result.text;
  ASSERT_EQ(l.result.not_learned.size(), 6u) << l.Report();
  for (const char* why : {"/usr/bin/python3: a learned policy never writes below /usr (",
                          "/usr/bin/new-tool: a learned policy never writes below /usr (",
                          "/etc/shadow: a learned policy never writes below /etc (",
                          "/home/u/.ssh/authorized_keys: a learned policy never writes below /home/*/.ssh (SSH keys)",
                          "/var/lib/dpkg/status: a learned policy never writes below /var/lib (",
                          "/work/link/sneaky: a learned policy never writes below /usr ("}) {
    bool found = false;
    for (const auto& line : l.result.not_learned) found |= line.find(why) != std::string::npos;
    EXPECT_TRUE(found) << why << "\n" << l.Report();
  }
  EXPECT_EQ(HostWriteRefusal("/work/out/x"), "");
  EXPECT_EQ(HostWriteRefusal("/usr2/x"), "") << "a prefix of a name is not the directory";
}

// A connect to a host daemon's socket (the container engine's: root on the
// host) is never learned; the control: a socket of the workload's own is.
TEST(Learn, HostDaemonsSocketsAreNeverLearned) {
  FakeHost host;
  host.dirs = {"/run", "/var", "/var/run", "/work"};
  host.files = {"/run/docker.sock", "/var/run/dbus/system_bus_socket", "/work/app.sock"};
  Learned l = LearnFrom({OfKind("net.unix", "/run/docker.sock"), OfKind("net.unix", "/var/run/dbus/system_bus_socket"),
                         OfKind("net.unix", "/work/app.sock")},
                        host);
  EXPECT_EQ(l.write, (std::vector<std::string>{"/work/app.sock"})) << l.result.text;
  ASSERT_EQ(l.result.not_learned.size(), 2u) << l.Report();
  EXPECT_NE(l.result.not_learned[0].find("/run/docker.sock: a learned policy never connects to a socket below /run "
                                         "holds host daemons' sockets"),
            std::string::npos)
      << l.result.not_learned[0];
}

TEST(Learn, ListingADirectoryReadsItAndABoundaryIsNotListed) {
  FakeHost host;
  host.dirs = {"/work", "/work/proj", "/work/proj/x", "/etc"};
  host.files = {"/work/proj/y"};
  Learned l = LearnFrom({Open("/work/proj"), Open("/etc")}, host);
  EXPECT_EQ(l.read, (std::vector<std::string>{"/work/data", "/work/proj"})) << l.result.text;
  ASSERT_EQ(l.result.not_learned.size(), 1u) << l.Report();
  EXPECT_NE(l.result.not_learned[0].find("file.open /etc: listing it needs read on the directory"), std::string::npos);
  EXPECT_NE(l.Report().find("(the directory itself was listed); never observed: 2 entries (x/, y)"), std::string::npos)
      << l.Report();
}

TEST(Learn, ProgramsAreExactAndOnesMadeDuringTheRunAreNotLearned) {
  FakeHost host;
  host.dirs = {"/usr", "/usr/bin", "/work", "/work/build"};
  host.files = {"/usr/bin/git", "/usr/lib/libz.so", "/work/build/a.out"};
  host.made = {"/work/build/a.out"};
  Observation mmap = OfKind("file.mmap_exec", "/usr/lib/libz.so");
  mmap.access = CORDON_FILE_MAP_EXEC;
  Learned l = LearnFrom(
      {OfKind("file.exec", "/usr/bin/git"), mmap, OfKind("file.exec", "/work/build/a.out"), Open("/usr/bin/git")},
      host);
  EXPECT_EQ(l.exec, (std::vector<std::string>{"/usr/bin/git", "/usr/lib/libz.so"})) << l.result.text;
  EXPECT_EQ(l.read, (std::vector<std::string>{"/work/data"})) << "the exec rule covers reading the program";
  ASSERT_EQ(l.result.not_learned.size(), 1u);
  EXPECT_NE(l.result.not_learned[0].find("/work/build/a.out: the program was made during the run"), std::string::npos);
}

TEST(Learn, NetworkRulesAreExactAddressesWithTheObservedPorts) {
  FakeHost host;
  Learned l = LearnFrom({Net("net.connect", "127.0.0.1", 8080, "tcp"), Net("net.connect", "127.0.0.1", 8081, "tcp"),
                         Net("net.connect", "127.0.0.1", 8080, "tcp"), Net("net.sendmsg", "::1", 53, "udp"),
                         Net("net.connect", "10.1.2.3", 443, "mptcp"), Net("net.bind", "127.0.0.1", 9000, "tcp")},
                        host);
  const auto& egress = l.reread.proto.spec().network().egress();
  ASSERT_EQ(egress.size(), 3) << l.result.text;
  std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> rules;
  for (const auto& r : egress)
    rules[r.cidr()] = {{r.ports().begin(), r.ports().end()}, {r.protocols().begin(), r.protocols().end()}};
  EXPECT_EQ(rules["127.0.0.1"].first, (std::vector<std::string>{"8080", "8081"}));
  EXPECT_EQ(rules["127.0.0.1"].second, (std::vector<std::string>{"tcp"}));
  EXPECT_EQ(rules["::1"].first, (std::vector<std::string>{"53"}));
  EXPECT_EQ(rules["::1"].second, (std::vector<std::string>{"udp"}));
  EXPECT_EQ(rules["10.1.2.3"].second, (std::vector<std::string>{"tcp"})) << "MPTCP is judged by tcp rules";
  ASSERT_EQ(l.reread.proto.spec().network().listen_size(), 1);
  EXPECT_EQ(l.reread.proto.spec().network().listen(0).address(), "127.0.0.1");
  // Judged by the compiled image: exactly what was observed.
  auto allowed = [&](const char* ip, uint16_t port, uint8_t proto) {
    std::string error;
    auto prefix = ParsePrefix(ip, &error);
    EXPECT_TRUE(prefix) << error;
    return prefix && EvaluateImage(l.compiled, prefix->addr, port, proto, nullptr);
  };
  EXPECT_TRUE(allowed("127.0.0.1", 8080, kProtoTcp));
  EXPECT_TRUE(allowed("127.0.0.1", 8081, kProtoTcp));
  EXPECT_FALSE(allowed("127.0.0.1", 8082, kProtoTcp)) << "a port never used";
  EXPECT_FALSE(allowed("127.0.0.1", 8080, kProtoUdp)) << "a protocol never used";
  EXPECT_FALSE(allowed("127.0.0.2", 8080, kProtoTcp)) << "an address never used";
  EXPECT_TRUE(allowed("::1", 53, kProtoUdp));
  EXPECT_NE(l.Report().find("egress 127.0.0.1 ports 8080,8081/tcp: exactly the observed address and ports"),
            std::string::npos)
      << l.Report();
}

TEST(Learn, SwitchesFamiliesAndKindsAreLearnedTamperIsNot) {
  FakeHost host;
  host.dirs = {"/proc"};
  Observation netlink;
  netlink.kind = "net.socket";
  netlink.family = "netlink";
  netlink.sock_type = "raw";
  netlink.protocol = "0";
  Observation ping;
  ping.kind = "net.socket";
  ping.family = "inet";
  ping.sock_type = "dgram";
  ping.protocol = "icmp";
  Observation bpf = OfKind("tamper.bpf");
  bpf.reason = "never allowed inside a sandbox";
  Observation relative = Open("src/a.py");
  relative.path_as_written = true;
  Learned l = LearnFrom({netlink, ping, OfKind("file.memfd"), OfKind("net.unix", "@/tmp/.X11-unix/X0"), bpf,
                         Open("/proc/4242/status"), relative, OfKind("tamper.keyring"), OfKind("tamper.userns")},
                        host);
  const auto& spec = l.reread.proto.spec();
  EXPECT_EQ(std::vector<std::string>(spec.network().families().begin(), spec.network().families().end()),
            (std::vector<std::string>{"unix", "inet", "inet6", "netlink"}));
  EXPECT_EQ(std::vector<std::string>(spec.network().extra_protocols().begin(), spec.network().extra_protocols().end()),
            (std::vector<std::string>{"icmp"}));
  EXPECT_TRUE(spec.files().allow_memfd_exec());
  EXPECT_TRUE(spec.network().abstract_unix());
  EXPECT_TRUE(spec.allow_keyrings());
  EXPECT_FALSE(spec.allow_user_namespaces()) << "one attempt never opens user namespaces";
  ASSERT_EQ(l.result.not_learned.size(), 4u) << l.Report();
  EXPECT_NE(l.Report().find("tamper.userns: user namespaces are a large kernel surface"), std::string::npos)
      << l.Report();
  EXPECT_NE(l.result.not_learned[0].find("tamper.bpf: no policy allows it (never allowed inside a sandbox)"),
            std::string::npos);
  EXPECT_NE(l.result.not_learned[1].find("/proc/4242/status: an entry of one process's /proc/<pid>"),
            std::string::npos);
  EXPECT_NE(l.result.not_learned[2].find("src/a.py: the path is relative"), std::string::npos);
}

TEST(Learn, WhatTheBaseAllowsIsNotLearnedAgainAndAuditBecomesEnforce) {
  FakeHost host;
  host.dirs = {"/work", "/work/data", "/work/data/sub"};
  host.files = {"/work/data/sub/x"};
  const char* base =
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: base}\nspec:\n  mode: audit\n"
      "  network:\n    egress: [{cidr: 127.0.0.0/8, ports: [80]}]\n"
      "  files:\n    read: [/work/data]\n";
  Learned l = LearnFrom({Open("/work/data/sub/x")}, host, base);
  EXPECT_EQ(l.result.learned_rules, 0u);
  EXPECT_EQ(l.read, (std::vector<std::string>{"/work/data"}));
  EXPECT_EQ(l.reread.proto.spec().mode(), "enforce");
  EXPECT_EQ(l.reread.proto.spec().network().egress_size(), 1);
  // A policy without spec.files restricts no file: nothing to learn there.
  Learned open = LearnFrom({Open("/work/data/sub/x")}, host,
                           "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: nofiles}\nspec: {}\n");
  EXPECT_FALSE(open.reread.proto.spec().has_files()) << open.result.text;
  EXPECT_FALSE(open.compiled.has_files);
}

// BPF LSM reports chmod, utime and xattr changes from the root of the
// file's file system (the hooks carry no mount): on a file system mounted at
// /run, "/job/x" is /run/job/x. Such paths name no rule; they are set apart.
TEST(Learn, MetadataChangesFromAFileSystemRootAreNotPlaced) {
  FakeHost host;
  host.dirs = {"/run", "/run/job", "/run/job/tmp"};
  host.files = {"/run/job/tmp/a"};
  Learned l = LearnFrom({Open("/run/job/tmp/a", CORDON_FILE_WRITE), OfKind("file.setattr", "/job/tmp/a"),
                         OfKind("file.setattr", "/run/job/tmp/a")},
                        host);
  EXPECT_EQ(l.write, (std::vector<std::string>{"/run/job/tmp"})) << l.result.text;
  EXPECT_EQ(l.result.unplaced, (std::vector<std::string>{"file.setattr /job/tmp/a"}));
  EXPECT_TRUE(l.result.not_learned.empty()) << l.Report();
  EXPECT_NE(l.Report().find("not placed (metadata changes reported from the root of their file system"),
            std::string::npos)
      << l.Report();
}

TEST(Learn, TheReportSaysWhatTheTrailLost) {
  FakeHost host;
  LearnRound lossy;
  lossy.exit_status = 0;
  lossy.events = 2700;
  lossy.new_observations = 2000;
  lossy.lost = 312;
  LearnRound clean;
  clean.enforce = true;
  clean.events = 40;
  clean.new_observations = 0;
  EXPECT_TRUE(lossy.Incomplete());
  EXPECT_FALSE(clean.Incomplete());
  Learned l = LearnFrom({}, host, kBase, {lossy, clean});
  const std::string report = l.Report();
  EXPECT_NE(report.find("round 1 (audit): the command exited 0; 2700 events, 2000 new accesses; 312 events LOST"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("round 2 (enforce): the command exited 0; 40 events, 0 new accesses; trail complete"),
            std::string::npos)
      << report;
}

// A window of an attached cgroup (cordon learn --cgroup) has no command:
// its label names it, and what the agent's rate limit held back is said.
TEST(Learn, AWindowIsNamedByItsLabelAndSuppressedEventsAreSaid) {
  FakeHost host;
  LearnRound window;
  window.label = "window (audit) of 10m on /sys/fs/cgroup/jobs/a, through the agent";
  window.events = 120;
  window.new_observations = 3;
  window.suppressed = 17;
  window.not_received = 2;
  EXPECT_TRUE(window.Incomplete());
  Learned l = LearnFrom({}, host, kBase, {window});
  const std::string report = l.Report();
  EXPECT_NE(report.find("window (audit) of 10m on /sys/fs/cgroup/jobs/a, through the agent; 120 events, 3 new "
                        "accesses; 17 events SUPPRESSED (the agent's rate limit); 2 events NOT RECEIVED"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("the command exited"), std::string::npos) << report;
}

}  // namespace
}  // namespace cordon::policy
