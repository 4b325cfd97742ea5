// Egress by name, end to end (README "Egress by name"): `cordon run` with a
// policy of name rules, in a network namespace the test creates, where a real
// dnsmasq (127.0.0.1:53) answers for the names and listeners stand on the
// addresses it answers with (on the namespace's loopback). The command, a
// python3 probe, asks an address nobody listens on (192.0.2.53:53, and
// [2001:db8::53]:53 for IPv6): only the redirection to cordon's resolver
// makes those queries answered. dnsmasq's query log shows what left the
// resolver; the run's audit log has the dns.query and net.connect records.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/dnsmasq_netns.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

// The probe: each argument is one step, each step prints one line.
//   q:NAME / qt:NAME / q6:NAME   A over UDP, A over TCP (to 192.0.2.53:53),
//                                AAAA over UDP6 (to [2001:db8::53]:53):
//                                "q NAME rcode N ADDR,ADDR" or "q NAME error E"
//   qp:NAME:PORT                 A over UDP to 192.0.2.53:PORT: "qp NAME PORT rcode N ADDR"
//   u:ADDR:PORT / uc:ADDR:PORT   a datagram that is not DNS, sent to / connected:
//                                "u ADDR PORT ok" or "u ADDR PORT errno N";
//                                "uc ADDR PORT connect ok errno N" when the
//                                connect succeeded and the send failed
//   c:ADDR:PORT                  TCP connect: "c ADDR PORT ok" or "c ADDR PORT errno N"
//   flood:PREFIX:N               N A queries for PREFIX<i>.test, one at a time:
//                                "flood answered N"
//   hold:NAME:PATH               A over a connected UDP socket that stays open:
//                                "held NAME rcode N tc T ADDR,ADDR"; its local
//                                "ADDRESS PORT" written to PATH
//   stray:SECONDS                a datagram on the held socket within SECONDS:
//                                "stray rcode N tc T an A" or "stray none"
//   sleep:SECONDS, touch:PATH, wait:PATH (until PATH exists, 20 s at most)
const char kProbe[] = R"PY(
import os, random, socket, struct, sys, time
def name_wire(name):
    return b''.join(bytes([len(l)]) + l.encode() for l in name.split('.')) + b'\0'
def ask(name, qtype, family, tcp, port=53):
    qid = random.randrange(65536)
    q = struct.pack('>HHHHHH', qid, 0x0100, 1, 0, 0, 0) + name_wire(name) + struct.pack('>HH', qtype, 1)
    server = ('192.0.2.53', port) if family == socket.AF_INET else ('2001:db8::53', port)
    s = socket.socket(family, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    s.settimeout(5)
    if tcp:
        s.connect(server)
        s.sendall(struct.pack('>H', len(q)) + q)
        n = struct.unpack('>H', s.recv(2, socket.MSG_WAITALL))[0]
        r = s.recv(n, socket.MSG_WAITALL)
    else:
        s.sendto(q, server)
        r = s.recv(4096)
    s.close()
    if struct.unpack('>H', r[:2])[0] != qid: raise Exception('wrong id')
    rcode, an = r[3] & 15, struct.unpack('>H', r[6:8])[0]
    i = 12
    while r[i]: i += r[i] + 1
    i += 5
    addrs = []
    for _ in range(an):
        if r[i] & 0xc0 == 0xc0: i += 2
        else:
            while r[i]: i += r[i] + 1
            i += 1
        t, c, ttl, l = struct.unpack('>HHIH', r[i:i + 10]); i += 10
        if t == 1: addrs.append(socket.inet_ntop(socket.AF_INET, r[i:i + 4]))
        if t == 28: addrs.append(socket.inet_ntop(socket.AF_INET6, r[i:i + 16]))
        i += l
    return rcode, addrs
def parse(r):
    rcode, an = r[3] & 15, struct.unpack('>H', r[6:8])[0]
    return rcode, (r[2] >> 1) & 1, an
held = None
for step in sys.argv[1:]:
    op, _, arg = step.partition(':')
    if op == 'hold':
        name, _, path = arg.partition(':')
        held = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        held.settimeout(5)
        held.connect(('192.0.2.53', 53))
        q = struct.pack('>HHHHHH', 7, 0x0100, 1, 0, 0, 0) + name_wire(name) + struct.pack('>HH', 1, 1)
        held.send(q)
        r = held.recv(4096)
        rcode, tc, an = parse(r)
        addrs = [socket.inet_ntop(socket.AF_INET, r[-4:])] if an else []
        print('held', name, 'rcode', rcode, 'tc', tc, ','.join(addrs), flush=True)
        with open(path, 'w') as f: f.write('%s %d' % held.getsockname())
    elif op == 'stray':
        held.settimeout(float(arg))
        try:
            rcode, tc, an = parse(held.recv(4096)); print('stray rcode', rcode, 'tc', tc, 'an', an, flush=True)
        except socket.timeout:
            print('stray none', flush=True)
    elif op == 'qp':
        name, _, port = arg.partition(':')
        try:
            rcode, addrs = ask(name, 1, socket.AF_INET, False, int(port))
            print(op, name, port, 'rcode', rcode, ','.join(addrs), flush=True)
        except Exception as e:
            print(op, name, port, 'error', type(e).__name__, flush=True)
    elif op in ('u', 'uc'):
        addr, _, port = arg.rpartition(':')
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        head = [op, addr, port]
        try:
            if op == 'uc':
                s.connect((addr, int(port))); head.append('connect ok')
                s.send(b'not a DNS message, just data')
            else:
                s.sendto(b'not a DNS message, just data', (addr, int(port)))
            print(*head, 'ok', flush=True)
        except OSError as e:
            print(*head, 'errno', e.errno, flush=True)
        s.close()
    elif op in ('q', 'qt', 'q6'):
        try:
            rcode, addrs = ask(arg, 28 if op == 'q6' else 1, socket.AF_INET6 if op == 'q6' else socket.AF_INET, op == 'qt')
            print(op, arg, 'rcode', rcode, ','.join(addrs), flush=True)
        except Exception as e:
            print(op, arg, 'error', type(e).__name__, flush=True)
    elif op == 'c':
        addr, _, port = arg.rpartition(':')
        s = socket.socket(socket.AF_INET6 if ':' in addr else socket.AF_INET)
        s.settimeout(5)
        try:
            s.connect((addr, int(port))); print('c', addr, port, 'ok', flush=True)
        except OSError as e:
            print('c', addr, port, 'errno', e.errno, flush=True)
        s.close()
    elif op == 'flood':
        prefix, _, n = arg.partition(':')
        answered = 0
        for i in range(int(n)):
            try:
                ask('%s%d.test' % (prefix, i), 1, socket.AF_INET, False); answered += 1
            except Exception:
                pass
        print('flood answered', answered, flush=True)
    elif op == 'sleep':
        time.sleep(float(arg))
    elif op == 'touch':
        open(arg, 'w').close()
    elif op == 'wait':
        deadline = time.time() + 20
        while not os.path.exists(arg) and time.time() < deadline: time.sleep(0.05)
        print('waited', arg, os.path.exists(arg), flush=True)
)PY";

// Listeners on the addresses the names point at (in the test's namespace).
class Listeners {
 public:
  void Add(const std::string& address, uint16_t port) {
    const bool v6 = address.find(':') != std::string::npos;
    int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const sockaddr_storage ss = v6 ? V6(address.c_str(), port) : V4(address.c_str(), port);
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&ss), SockaddrLen(ss)), 0)
        << address << " " << std::strerror(errno);
    ASSERT_EQ(::listen(fd, 64), 0);
    fds_.push_back(fd);
  }
  ~Listeners() {
    for (int fd : fds_) ::close(fd);
  }

 private:
  std::vector<int> fds_;
};

constexpr uint16_t kPort = 8443;

// Name rules for the tests' names; `extra`: more egress rules.
std::string NamePolicy(const std::string& name, const std::string& extra = "") {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: " + name +
         "}\nspec:\n  network:\n    dns: {upstream: [\"127.0.0.1:53\"]}\n    egress:\n"
         "      - host: allowed.test\n        ports: [8443]\n        protocols: [tcp]\n"
         "      - host: \"*.wild.test\"\n        ports: [8443]\n"
         "      - host: alias.test\n        ports: [8443]\n"
         "      - host: private.test\n        ports: [8443]\n"
         "      - host: shortttl.test\n        ports: [8443]\n" +
         extra;
}

class NameEgress : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespace, cgroups)";
    dnsmasq_.Start("names",
                   {"--host-record=allowed.test,93.184.216.34,2606:2800:220:1::1",
                    "--host-record=unlisted.test,93.184.216.40", "--host-record=a.wild.test,93.184.216.35",
                    "--host-record=target.test,93.184.216.50", "--cname=alias.test,target.test",
                    "--host-record=private.test,10.9.8.7", "--host-record=shortttl.test,93.184.216.60,1"},
                   {"93.184.216.34/32", "93.184.216.35/32", "93.184.216.40/32", "93.184.216.50/32", "93.184.216.60/32",
                    "10.9.8.7/32", "2606:2800:220:1::1/128"});
    if (HasFatalFailure()) return;
    for (const char* a : {"93.184.216.34", "93.184.216.35", "93.184.216.40", "93.184.216.50", "93.184.216.60",
                          "10.9.8.7", "2606:2800:220:1::1"})
      listeners_.Add(a, kPort);
    audit_ = dnsmasq_.dir() + "/audit.jsonl";
    policy_ = dnsmasq_.dir() + "/policy.yaml";
  }

  // `cordon run` of the probe with `steps`, under `policy_text`; its stdout.
  CommandResult Probe(const std::string& policy_text, const std::vector<std::string>& steps,
                      const std::string& audit = "") {
    WriteFile(policy_, policy_text);
    std::vector<std::string> args = {
        "run", "-q",  "--policy", policy_, "--audit", audit.empty() ? audit_ : audit, "--", "/usr/bin/python3",
        "-c",  kProbe};
    args.insert(args.end(), steps.begin(), steps.end());
    return Cordon(args);
  }
  static void WriteFile(const std::string& path, const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  static std::vector<std::string> Lines(const std::string& out) {
    std::istringstream in(out);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  // The audit file has a net.connect denial of address:port.
  void ExpectDeniedConnect(const std::string& address, uint32_t port) {
    const auto events = AuditFileEvents(audit_);
    const auto* denied = Connect(events, address, port);
    ASSERT_NE(denied, nullptr) << address << ":" << port;
    EXPECT_EQ(denied->verdict(), "denied");
  }
  // A directory the runs' users (dynamic) may write, outside the test's own
  // (mode 0700); the caller removes it.
  static std::string SharedDir(const std::string& tag) {
    const std::string dir = "/tmp/cordon-names-" + tag + "-" + std::to_string(::getpid());
    EXPECT_EQ(::mkdir(dir.c_str(), 0777), 0) << dir;
    EXPECT_EQ(::chmod(dir.c_str(), 0777), 0) << dir;
    return dir;
  }
  // NamePolicy(name) with the probe's files and `shared` writable.
  static std::string WritingPolicy(const std::string& name, const std::string& shared) {
    return NamePolicy(name) + "  files:\n    include: [runtime-minimal, python3]\n    write: [" + shared + "]\n";
  }
  // The pid of our child `cordon run` whose arguments name `policy` (0: none).
  static pid_t ChildRunning(const std::string& policy) {
    DIR* d = ::opendir("/proc");
    pid_t found = 0;
    while (dirent* e = d ? ::readdir(d) : nullptr) {
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid <= 0) continue;
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const size_t close = text.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(text.substr(close + 2));
      std::string state;
      pid_t ppid = 0;
      rest >> state >> ppid;
      if (ppid != ::getpid()) continue;
      std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
      std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
      if (args.find(std::string("run") + '\0') != std::string::npos && args.find(policy) != std::string::npos)
        found = pid;
    }
    if (d) ::closedir(d);
    return found;
  }
  static bool Has(const std::string& out, const std::string& line) {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (l == line) return true;
    return false;
  }
  static const cordon::v1::AuditEvent* Query(const std::vector<cordon::v1::AuditEvent>& events, const std::string& name,
                                             const std::string& verdict) {
    for (const auto& e : events)
      if (e.kind() == "dns.query" && e.dns().name() == name && e.verdict() == verdict) return &e;
    return nullptr;
  }
  static const cordon::v1::AuditEvent* Connect(const std::vector<cordon::v1::AuditEvent>& events,
                                               const std::string& address, uint32_t port) {
    for (const auto& e : events)
      if (e.kind() == "net.connect" && e.net().address() == address && e.net().port() == port) return &e;
    return nullptr;
  }

  DnsmasqNetns dnsmasq_;
  Listeners listeners_;
  std::string audit_, policy_;
};

TEST_F(NameEgress, AnAllowedNameConnectsAndAnUnlistedOneNeverLeavesTheHost) {
  CommandResult r =
      Probe(NamePolicy("names"),
            {"q:allowed.test", "c:93.184.216.34:8443", "c:93.184.216.34:8444", "q:unlisted.test",
             "c:93.184.216.40:8443", "qt:a.wild.test", "c:93.184.216.35:8443", "q6:allowed.test",
             "c:2606:2800:220:1::1:8443", "q:alias.test", "c:93.184.216.50:8443", "q:private.test", "c:10.9.8.7:8443"});
  EXPECT_EQ(r.status, 0) << r.err;  // the command's status (violations without --fail-on-violation)
  // Allowed name over UDP: answered through the redirection, the connect allowed;
  // another port of the same address is not (the rule says 8443).
  EXPECT_TRUE(Has(r.out, "q allowed.test rcode 0 93.184.216.34")) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, "c 93.184.216.34 8443 ok")) << r.out;
  EXPECT_TRUE(Has(r.out, "c 93.184.216.34 8444 errno 1")) << r.out;
  // Unlisted: REFUSED, never sent upstream; its address is denied.
  EXPECT_TRUE(Has(r.out, "q unlisted.test rcode 5 ")) << r.out;
  EXPECT_TRUE(Has(r.out, "c 93.184.216.40 8443 errno 1")) << r.out;
  // A wildcard rule, asked over TCP; AAAA over UDP6 and an IPv6 connect.
  EXPECT_TRUE(Has(r.out, "qt a.wild.test rcode 0 93.184.216.35")) << r.out;
  EXPECT_TRUE(Has(r.out, "c 93.184.216.35 8443 ok")) << r.out;
  EXPECT_TRUE(Has(r.out, "q6 allowed.test rcode 0 2606:2800:220:1::1")) << r.out;
  EXPECT_TRUE(Has(r.out, "c 2606:2800:220:1::1 8443 ok")) << r.out;
  // A CNAME to a name no rule lists: granted under the queried name's rule.
  EXPECT_TRUE(r.out.find("q alias.test rcode 0 93.184.216.50") != std::string::npos) << r.out;
  EXPECT_TRUE(Has(r.out, "c 93.184.216.50 8443 ok")) << r.out;
  // A private answer without allowPrivate: not passed on, not granted.
  EXPECT_TRUE(r.out.find("q private.test rcode 0 \n") != std::string::npos ||
              r.out.find("q private.test rcode 0\n") != std::string::npos)
      << r.out;
  EXPECT_TRUE(Has(r.out, "c 10.9.8.7 8443 errno 1")) << r.out;

  EXPECT_TRUE(dnsmasq_.Saw("allowed.test")) << dnsmasq_.Log();
  EXPECT_TRUE(dnsmasq_.Saw("allowed.test", "AAAA")) << dnsmasq_.Log();
  EXPECT_TRUE(dnsmasq_.Saw("a.wild.test")) << dnsmasq_.Log();
  EXPECT_FALSE(dnsmasq_.Saw("unlisted.test")) << dnsmasq_.Log();

  const auto events = AuditFileEvents(audit_);
  const auto* allowed = Query(events, "allowed.test", "noted");
  ASSERT_NE(allowed, nullptr);
  EXPECT_EQ(allowed->dns().type(), "A");
  EXPECT_EQ(allowed->dns().addresses(), 1u);
  EXPECT_EQ(allowed->enforcement(), "cordon-dns");
  const auto* refused = Query(events, "unlisted.test", "denied");
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->dns().addresses(), 0u);
  EXPECT_NE(Connect(events, "93.184.216.40", 8443), nullptr);
  // The port the name's rule does not allow: the record names the name.
  const auto* other_port = Connect(events, "93.184.216.34", 8444);
  ASSERT_NE(other_port, nullptr);
  EXPECT_EQ(other_port->net().host(), "allowed.test");
  EXPECT_EQ(Connect(events, "93.184.216.34", 8443), nullptr) << "an allowed connect was recorded";

  // Negative controls, unconfined in the same namespace: the upstream has
  // unlisted.test, and its address takes connections.
  CommandResult direct =
      test::Run({"/usr/bin/python3", "-c",
                 "import socket; s=socket.socket(); s.settimeout(5); s.connect(('93.184.216.40', 8443)); "
                 "print('connected')"});
  EXPECT_EQ(direct.out, "connected\n") << direct.err;
  // ... and nothing answers at 192.0.2.53:53 but cordon's resolver, for its sandbox.
  CommandResult unredirected = test::Run({"/usr/bin/python3", "-c", kProbe, "q:allowed.test"});
  EXPECT_EQ(unredirected.out.rfind("q allowed.test error ", 0), 0u) << unredirected.out << unredirected.err;
}

TEST_F(NameEgress, AHardCodedAddressIsDeniedUntilTheSandboxResolvedItsName) {
  CommandResult r = Probe(NamePolicy("hardcoded"), {"c:93.184.216.34:8443", "q:allowed.test", "c:93.184.216.34:8443"});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0], "c 93.184.216.34 8443 errno 1");
  EXPECT_EQ(lines[1], "q allowed.test rcode 0 93.184.216.34");
  EXPECT_EQ(lines[2], "c 93.184.216.34 8443 ok");
  ExpectDeniedConnect("93.184.216.34", 8443);
}

// Sandbox A resolves allowed.test and connects; sandbox B, running at the
// same time with the same policy, connects to the same address without
// resolving: denied. A's answer is A's alone.
TEST_F(NameEgress, AnAnswerForOneSandboxAllowsNothingInAnother) {
  // Outside the test's own directory (mode 0700): the runs' users reach it.
  const std::string shared = "/tmp/cordon-names-shared-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);  // the runs' users (dynamic) write there
  const std::string files = "  files:\n    include: [runtime-minimal, python3]\n";
  const std::string policy_a = NamePolicy("sandbox-a") + files + "    write: [" + shared + "]\n";
  const std::string policy_b = NamePolicy("sandbox-b") + files + "    read: [" + shared + "]\n";
  const std::string a_done = shared + "/a-connected", b_done = shared + "/b-done";
  CommandResult a;
  std::thread first([&] {
    a = Probe(policy_a, {"q:allowed.test", "c:93.184.216.34:8443", "touch:" + a_done, "wait:" + b_done},
              dnsmasq_.dir() + "/a.jsonl");
  });
  // B: waits until A connected, then connects without asking.
  const std::string policy_b_path = dnsmasq_.dir() + "/policy-b.yaml";
  WriteFile(policy_b_path, policy_b);
  CommandResult b = Cordon({"run", "-q", "--policy", policy_b_path, "--audit", dnsmasq_.dir() + "/b.jsonl", "--",
                            "/usr/bin/python3", "-c", kProbe, "wait:" + a_done, "c:93.184.216.34:8443"});
  // A still runs (it waits for b-done): status lists what its resolver granted it.
  CommandResult status = Cordon({"status", "--json"});
  ::close(::open(b_done.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  first.join();
  EXPECT_EQ(status.status, 0) << status.err;
  const size_t a_at = status.out.find("\"policy\":\"sandbox-a\"");
  ASSERT_NE(a_at, std::string::npos) << status.out;
  const size_t names_at = status.out.find("\"names\":", a_at);
  ASSERT_NE(names_at, std::string::npos) << status.out;
  EXPECT_EQ(status.out.find("\"names\":[{\"name\":\"allowed.test\",\"address\":\"93.184.216.34\",\"rule\":1,"
                            "\"protocols\":\"tcp\",\"ports\":\"8443\",\"expiresInSeconds\":",
                            names_at),
            names_at)
      << status.out.substr(names_at, 200);
  EXPECT_TRUE(Has(a.out, "c 93.184.216.34 8443 ok")) << a.out << a.err;
  EXPECT_TRUE(Has(b.out, "waited " + a_done + " True")) << b.out << b.err;
  EXPECT_TRUE(Has(b.out, "c 93.184.216.34 8443 errno 1")) << b.out << b.err;
  const auto b_events = AuditFileEvents(dnsmasq_.dir() + "/b.jsonl");
  EXPECT_NE(Connect(b_events, "93.184.216.34", 8443), nullptr);
  test::Run({"rm", "-rf", shared});
}

// Only the sandbox is answered. A process outside it (here the test itself,
// root, in the same network namespace) that writes to the resolver's own
// address (found in /proc/net/udp: port 53 of 127.53.x.y) gets no answer over
// UDP and a closed connection over TCP, also when it closes its end at once
// after sending (TIME_WAIT: no cgroup): it can neither grant anything in the
// sandbox's map nor write dns.query records into its trail. Controls: the
// same outside query code is answered by dnsmasq (127.0.0.1:53), and the
// sandbox, asking before and after, is answered.
const char kOutsider[] = R"PY(
import random, socket, struct
def query(name):
    return struct.pack('>HHHHHH', random.randrange(65536), 0x0100, 1, 0, 0, 0) + b''.join(
        bytes([len(l)]) + l.encode() for l in name.split('.')) + b'\0' + struct.pack('>HH', 1, 1)
def udp(addr, name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    s.sendto(query(name), (addr, 53))
    try: r = s.recv(4096); return 'rcode %d' % (r[3] & 15)
    except socket.timeout: return 'timeout'
def tcp(addr, name):
    s = socket.socket(); s.settimeout(2); s.connect((addr, 53))
    q = query(name); s.sendall(struct.pack('>H', len(q)) + q)
    try: r = s.recv(4096); return ('rcode %d' % (r[5] & 15)) if len(r) > 5 else 'closed'
    except ConnectionResetError: return 'closed'
    except socket.timeout: return 'timeout'
def tcp_close(addr, name):
    s = socket.socket(); s.settimeout(2); s.connect((addr, 53))
    q = query(name); s.sendall(struct.pack('>H', len(q)) + q); s.close()
    return 'sent and closed'
resolvers = []
for line in open('/proc/net/udp').readlines()[1:]:
    local = line.split()[1]
    a, port = local.split(':')
    ip = socket.inet_ntoa(bytes.fromhex(a)[::-1])
    if port == '0035' and ip.startswith('127.53.'): resolvers.append(ip)
print('resolvers', len(resolvers))
import sys
for ip in resolvers:
    if sys.argv[1:] == ['close']:
        print('tcp', tcp_close(ip, 'd.wild.test'))
    else:
        print('udp', udp(ip, 'b.wild.test')); print('tcp', tcp(ip, 'b.wild.test'))
if sys.argv[1:] != ['close']:
    print('dnsmasq udp', udp('127.0.0.1', 'allowed.test')); print('dnsmasq tcp', tcp('127.0.0.1', 'allowed.test'))
)PY";

TEST_F(NameEgress, OnlyTheSandboxIsAnsweredNotAnotherLocalProcess) {
  const std::string shared = SharedDir("outsider");
  const std::string policy = WritingPolicy("outsider", shared);
  const std::string asked = shared + "/asked", outside_done = shared + "/outside-done";
  CommandResult run;
  std::thread sandbox([&] {
    run = Probe(policy, {"q:a.wild.test", "touch:" + asked, "wait:" + outside_done, "qt:a.wild.test"});
  });
  CommandResult outside, closing;
  for (int i = 0; i < 200 && ::access(asked.c_str(), F_OK) != 0; ++i) ::usleep(50'000);
  if (::access(asked.c_str(), F_OK) == 0) {
    outside = test::Run({"/usr/bin/python3", "-c", kOutsider});
    // The TCP client that sends and closes at once, while our `cordon run`
    // (the resolver's process) is stopped: the connection waits in the
    // listen queue and the client's socket is TIME_WAIT when the resolver
    // accepts it.
    const pid_t run_pid = ChildRunning(policy_);
    ASSERT_GT(run_pid, 0) << "our cordon run";
    ASSERT_EQ(::kill(run_pid, SIGSTOP), 0);
    closing = test::Run({"/usr/bin/python3", "-c", kOutsider, "close"});
    ::usleep(300'000);
    ::kill(run_pid, SIGCONT);
  }
  ::close(::open(outside_done.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  sandbox.join();
  test::Run({"rm", "-rf", shared});

  EXPECT_TRUE(Has(outside.out, "resolvers 1")) << outside.out << outside.err;
  EXPECT_TRUE(Has(outside.out, "udp timeout")) << outside.out;
  EXPECT_TRUE(Has(outside.out, "tcp closed")) << outside.out;
  EXPECT_TRUE(Has(outside.out, "dnsmasq udp rcode 0")) << outside.out;
  EXPECT_TRUE(Has(outside.out, "dnsmasq tcp rcode 0")) << outside.out;
  EXPECT_TRUE(Has(run.out, "q a.wild.test rcode 0 93.184.216.35")) << run.out << run.err;
  EXPECT_TRUE(Has(run.out, "qt a.wild.test rcode 0 93.184.216.35")) << run.out << run.err;
  EXPECT_TRUE(Has(closing.out, "tcp sent and closed")) << closing.out << closing.err;
  // A TCP client that closed at once (its socket is then TIME_WAIT, which
  // sock_diag reports without a cgroup) is not served either.
  EXPECT_FALSE(dnsmasq_.Saw("b.wild.test")) << dnsmasq_.Log();
  EXPECT_FALSE(dnsmasq_.Saw("d.wild.test")) << dnsmasq_.Log();
  const auto events = AuditFileEvents(audit_);
  for (const auto& e : events) {
    EXPECT_NE(e.dns().name(), "b.wild.test") << e.ShortDebugString();
    EXPECT_NE(e.dns().name(), "d.wild.test") << e.ShortDebugString();
  }
}

// A local process cannot make its UDP queries pass for the sandbox's. It
// takes the port of the sandbox's connected UDP socket on another loopback
// address and sends from the sandbox's address with IP_PKTINFO, so that the
// resolver's peer lookup (sock_diag, by the datagram's source) finds the
// sandbox's socket. The datagram lacks the mark the sandbox's egress program
// puts on the sandbox's own queries, so it gets an empty truncated answer
// (which reaches the sandbox's socket: that shows the spoof did point the
// lookup at it), is not forwarded, grants nothing and writes no record.
// Control: the sandbox's own query on that socket is answered in full over
// UDP (its mark arrives).
const char kSpoofer[] = R"PY(
import socket, struct, sys
address, port = open(sys.argv[1]).read().split()
resolver = None
for line in open('/proc/net/udp').readlines()[1:]:
    a, p = line.split()[1].split(':')
    ip = socket.inet_ntoa(bytes.fromhex(a)[::-1])
    if p == '0035' and ip.startswith('127.53.'): resolver = ip
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('127.0.0.2' if address != '127.0.0.2' else '127.0.0.3', int(port)))
q = struct.pack('>HHHHHH', 9, 0x0100, 1, 0, 0, 0) + b'\x01c\x04wild\x04test\x00' + struct.pack('>HH', 1, 1)
pktinfo = struct.pack('=i4s4s', 0, socket.inet_aton(address), socket.inet_aton('0.0.0.0'))
s.sendmsg([q], [(socket.IPPROTO_IP, 8, pktinfo)], 0, (resolver, 53))  # IP_PKTINFO
print('spoofed', address, port, 'to', resolver is not None, flush=True)
)PY";

TEST_F(NameEgress, AQuerySentFromTheSandboxsAddressByAnotherProcessIsNotServed) {
  const std::string shared = SharedDir("spoof");
  const std::string policy = WritingPolicy("spoofed", shared);
  const std::string held = shared + "/held", spoofed = shared + "/spoofed";
  CommandResult run;
  std::thread sandbox([&] { run = Probe(policy, {"hold:a.wild.test:" + held, "wait:" + spoofed, "stray:3"}); });
  CommandResult spoof;
  for (int i = 0; i < 200 && ::access(held.c_str(), F_OK) != 0; ++i) ::usleep(50'000);
  ::usleep(100'000);  // the address is written
  if (::access(held.c_str(), F_OK) == 0) spoof = test::Run({"/usr/bin/python3", "-c", kSpoofer, held});
  ::close(::open(spoofed.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  sandbox.join();
  test::Run({"rm", "-rf", shared});

  EXPECT_EQ(spoof.out.rfind("spoofed 127.", 0), 0u) << spoof.out << spoof.err;
  EXPECT_NE(spoof.out.find(" to True"), std::string::npos) << spoof.out;
  // The sandbox's own query: answered in full over UDP.
  EXPECT_TRUE(Has(run.out, "held a.wild.test rcode 0 tc 0 93.184.216.35")) << run.out << run.err;
  // The spoofed one: taken for the sandbox's socket (its answer arrives
  // there), answered empty and truncated.
  EXPECT_TRUE(Has(run.out, "stray rcode 0 tc 1 an 0")) << run.out << run.err;
  EXPECT_NE(run.err.find("without cordon's mark"), std::string::npos) << run.err;
  EXPECT_FALSE(dnsmasq_.Saw("c.wild.test")) << dnsmasq_.Log();
  for (const auto& e : AuditFileEvents(audit_)) EXPECT_NE(e.dns().name(), "c.wild.test") << e.ShortDebugString();
}

// DNS aimed at any port: a UDP destination the policy denies goes to the
// sandbox's resolver instead, so a query to 192.0.2.53:5353 is answered by
// the name rules (and grants as any answer does); the send is recorded as
// a denial of that destination, with the diversion as its reason. A datagram
// that is not a DNS query, sent or connected, still fails with EPERM (the
// egress program drops it). TCP to a port other than 53 is not diverted.
// Controls: unconfined, nothing answers at 192.0.2.53:5353 and the same
// datagrams do not fail with EPERM.
TEST_F(NameEgress, UdpDnsToAnyPortIsAnsweredByTheResolverAndOtherDatagramsAreRefused) {
  CommandResult r =
      Probe(NamePolicy("anyport"), {"qp:allowed.test:5353", "c:93.184.216.34:8443", "qp:unlisted.test:5353",
                                    "u:192.0.2.99:5353", "uc:192.0.2.99:9999", "c:192.0.2.53:5353"});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out << r.err;
  EXPECT_EQ(lines[0], "qp allowed.test 5353 rcode 0 93.184.216.34");
  EXPECT_EQ(lines[1], "c 93.184.216.34 8443 ok");
  EXPECT_EQ(lines[2], "qp unlisted.test 5353 rcode 5 ");
  EXPECT_EQ(lines[3], "u 192.0.2.99 5353 errno 1");
  EXPECT_EQ(lines[4], "uc 192.0.2.99 9999 connect ok errno 1");  // diverted, then dropped on its way
  EXPECT_EQ(lines[5], "c 192.0.2.53 5353 errno 1");
  EXPECT_TRUE(dnsmasq_.Saw("allowed.test")) << dnsmasq_.Log();
  EXPECT_FALSE(dnsmasq_.Saw("unlisted.test")) << dnsmasq_.Log();

  const auto events = AuditFileEvents(audit_);
  const cordon::v1::AuditEvent* diverted = nullptr;
  for (const auto& e : events)
    if (e.kind() == "net.sendmsg" && e.net().address() == "192.0.2.53" && e.net().port() == 5353) diverted = &e;
  ASSERT_NE(diverted, nullptr);
  EXPECT_EQ(diverted->verdict(), "denied");
  EXPECT_NE(diverted->reason().find("cordon's DNS resolver"), std::string::npos) << diverted->reason();
  EXPECT_NE(Query(events, "allowed.test", "noted"), nullptr);
  EXPECT_NE(Query(events, "unlisted.test", "denied"), nullptr);
  // The datagrams that are not DNS were diverted too (not refused at the
  // send): the egress program dropped them.
  for (const auto& [kind, port] : {std::pair<std::string, uint32_t>{"net.sendmsg", 5353}, {"net.connect", 9999}}) {
    const cordon::v1::AuditEvent* e = nullptr;
    for (const auto& ev : events)
      if (ev.kind() == kind && ev.net().address() == "192.0.2.99" && ev.net().port() == port) e = &ev;
    ASSERT_NE(e, nullptr) << kind;
    EXPECT_NE(e->reason().find("cordon's DNS resolver"), std::string::npos) << e->reason();
  }
  const auto* tcp = Connect(events, "192.0.2.53", 5353);
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->reason().find("cordon's DNS resolver"), std::string::npos) << tcp->reason();

  CommandResult unconfined =
      test::Run({"/usr/bin/python3", "-c", kProbe, "qp:allowed.test:5353", "u:192.0.2.99:5353", "uc:192.0.2.99:9999"});
  const std::vector<std::string> control = Lines(unconfined.out);
  ASSERT_EQ(control.size(), 3u) << unconfined.out << unconfined.err;
  EXPECT_EQ(control[0].rfind("qp allowed.test 5353 error ", 0), 0u) << control[0];
  EXPECT_NE(control[1], "u 192.0.2.99 5353 errno 1");
  EXPECT_NE(control[2], "uc 192.0.2.99 9999 connect ok errno 1");
  EXPECT_NE(control[2], "uc 192.0.2.99 9999 errno 1");
}

// A `cordon update` of the run's sandbox puts another policy in force while
// the run's resolver still has the run's rules: its answers are no longer
// granted (the policy they were judged by is not in force: the grant is
// refused, the client gets SERVFAIL), so no rule of the old policy allows
// anything under the new one. Control: before the update, the same query
// and connect succeed.
TEST_F(NameEgress, AnUpdateOfTheRunsSandboxEndsWhatItsResolverGrants) {
  const std::string shared = "/tmp/cordon-names-update-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  const std::string files = "  files:\n    include: [runtime-minimal, python3]\n    write: [" + shared + "]\n";
  CommandResult a;
  std::thread run([&] {
    a = Probe(NamePolicy("before-update") + files,
              {"q:allowed.test", "c:93.184.216.34:8443", "touch:" + shared + "/asked", "wait:" + shared + "/updated",
               "q:allowed.test", "c:93.184.216.34:8443"});
  });
  ASSERT_TRUE(WaitFor([&] { return ::access((shared + "/asked").c_str(), F_OK) == 0; }, 20000));
  // The run's cgroup, from status.
  CommandResult status = Cordon({"status", "--json"});
  const size_t at = status.out.find("\"policy\":\"before-update\"");
  const size_t cg_at = status.out.rfind("\"cgroup\":\"", at);
  std::string cgroup;
  if (at != std::string::npos && cg_at != std::string::npos) {
    const size_t begin = cg_at + 10;
    cgroup = status.out.substr(begin, status.out.find('"', begin) - begin);
  }
  const std::string after = dnsmasq_.dir() + "/after.yaml";
  WriteFile(after,
            "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: after-update}\nspec:\n"
            "  network:\n    egress:\n      - cidr: 192.0.2.0/24\n" +
                files);
  CommandResult update =
      cgroup.empty() ? CommandResult{} : Cordon({"update", "--cgroup", cgroup, "--policy", after, "--allow-degraded"});
  ::close(::open((shared + "/updated").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  run.join();
  test::Run({"rm", "-rf", shared});
  ASSERT_FALSE(cgroup.empty()) << status.out;
  EXPECT_EQ(update.status, 0) << update.err;
  const std::vector<std::string> lines = Lines(a.out);
  ASSERT_EQ(lines.size(), 5u) << a.out << a.err;
  EXPECT_EQ(lines[0], "q allowed.test rcode 0 93.184.216.34");
  EXPECT_EQ(lines[1], "c 93.184.216.34 8443 ok");
  EXPECT_EQ(lines[3], "q allowed.test rcode 2 ");  // SERVFAIL
  EXPECT_EQ(lines[4], "c 93.184.216.34 8443 errno 1");
}

// A grant lasts the answer's TTL (at least dns::kTtlFloor, 30 s) and
// dns::kGrantGraceSeconds (30 s) more: shortttl.test (TTL 1) connects at
// once and is denied 62 s later; asked again, allowed again.
TEST_F(NameEgress, AGrantRunsOutWithItsTtl) {
  CommandResult r = Probe(NamePolicy("ttl"), {"q:shortttl.test", "c:93.184.216.60:8443", "sleep:62",
                                              "c:93.184.216.60:8443", "q:shortttl.test", "c:93.184.216.60:8443"});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  EXPECT_EQ(lines[1], "c 93.184.216.60 8443 ok");
  EXPECT_EQ(lines[2], "c 93.184.216.60 8443 errno 1");
  EXPECT_EQ(lines[4], "c 93.184.216.60 8443 ok");
  ExpectDeniedConnect("93.184.216.60", 8443);
}

// A flood of queries for names no rule lists (a tunnel's way of talking):
// each refused, none forwarded, recorded once a name a second for at most
// kQueryEventsPerSecond names, the rest counted; every query accounted for.
TEST_F(NameEgress, AFloodOfQueriesIsRecordedAtMostTwentyNamesASecondAndCountedWhole) {
  // allowed.test a second later: recorded by name again (a new second).
  CommandResult r = Probe(NamePolicy("flood"), {"flood:tunnel-:600", "sleep:1.2", "q:allowed.test"});
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(Has(r.out, "flood answered 600")) << r.out << r.err;
  EXPECT_FALSE(dnsmasq_.Saw("tunnel-0.test")) << dnsmasq_.Log();
  EXPECT_FALSE(dnsmasq_.Saw("tunnel-599.test")) << dnsmasq_.Log();
  const auto events = AuditFileEvents(audit_);
  uint64_t refused = 0, named = 0, aggregated = 0;
  int64_t first = INT64_MAX, last = 0;
  for (const auto& e : events) {
    if (e.kind() != "dns.query" || e.verdict() != "denied") continue;
    refused += e.has_repeats() ? e.repeats().count() : 1;
    (e.has_repeats() ? aggregated : named)++;
    first = std::min<int64_t>(first, e.time().seconds());
    last = std::max<int64_t>(last, e.time().seconds());
  }
  EXPECT_EQ(refused, 600u);
  // Windows of one second, at most 20 names each.
  EXPECT_LE(named, 20u * static_cast<uint64_t>(last - first + 2))
      << named << " named records in " << last - first + 1 << " s";
  EXPECT_GT(aggregated, 0u);
  EXPECT_NE(Query(events, "allowed.test", "noted"), nullptr);
}

}  // namespace
}  // namespace cordon::test
