// `cordon report`: a real `cordon run` whose workload does known things (an
// allowed connect, three denied ones, a write Landlock refuses, a write it
// allows), then the report of its audit file must say exactly that: counts,
// destinations, first and last times, verdicts; and nothing that was not done.
// The HTML page is rendered by a real browser (Debian's chromium, headless):
// the chart's colours in its screenshot, and no element the workload's names
// could have injected in its DOM.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

#include "events/audit_chain.h"
#include "events/decoder.h"
#include "events/json_line.h"
#include "report.pb.h"
#include "tests/integration/harness.h"
#include "util/text.h"

namespace cordon::test {
namespace {

using google::protobuf::util::TimeUtil;

struct TempTree {
  std::string dir;
  TempTree() {
    char tmpl[] = "/tmp/cordon-report-XXXXXX";
    dir = ::mkdtemp(tmpl);
    ::chmod(dir.c_str(), 0755);  // searchable by the command's own uid: Landlock refuses, not the mode
  }
  ~TempTree() { Run({"rm", "-rf", dir}); }
};

cordon::v1::ImpactReport ParseReport(const std::string& json) {
  cordon::v1::ImpactReport report;
  auto st = google::protobuf::util::JsonStringToMessage(json, &report);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << json;
  return report;
}

// The recorded run every test here reports on: what its workload did, and
// its audit file.
class Report : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    tree_ = new TempTree;
    const std::string dir = tree_->dir;
    out_ = dir + "/out";
    forbidden_ = dir + "/forbidden";
    audit_ = dir + "/audit.jsonl";
    ::mkdir(out_.c_str(), 0777);
    ::mkdir(forbidden_.c_str(), 0777);
    ::chmod(out_.c_str(), 0777);
    ::chmod(forbidden_.c_str(), 0777);
    allowed_ = new TcpListener;
    denied_ = new TcpListener;  // listening: a connect that got through would succeed
    const std::string port = std::to_string(allowed_->port());
    PolicyFile policy(
        "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: report-test}\nspec:\n"
        "  network:\n    egress:\n      - {cidr: 127.0.0.1, ports: [" +
        port +
        "]}\n"
        "  files:\n    include: [runtime-minimal, python3]\n    write: [" +
        out_ + "]\n");
    // argv: the allowed port, the denied port, the directory Landlock refuses, the one it allows.
    const std::string script =
        "import socket, sys\n"
        "allowed, denied, forbidden, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]\n"
        "res = []\n"
        "socket.create_connection(('127.0.0.1', allowed)).close()\n"
        "res.append('allowed=ok')\n"
        "for i in range(3):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', denied))\n"
        "        res.append('denied=connected')\n"
        "    except OSError as e:\n"
        "        res.append('denied=%d' % e.errno)\n"
        "try:\n"
        "    open(forbidden + '/x.txt', 'w')\n"
        "    res.append('write=ok')\n"
        "except OSError as e:\n"
        "    res.append('write=%d' % e.errno)\n"
        "open(out + '/ok.txt', 'w').write('ok')\n"
        "print(' '.join(res))\n";
    run_ = new CommandResult(
        Cordon({"run", "--policy", policy.path(), "--audit", audit_, "--", "/usr/bin/python3", "-c", script,
                std::to_string(allowed_->port()), std::to_string(denied_->port()), forbidden_, out_}));
  }
  static void TearDownTestSuite() {
    delete run_;
    delete allowed_;
    delete denied_;
    delete tree_;
    run_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    ASSERT_EQ(run_->status, 0) << run_->err;
    // What the workload saw: the allowed connect worked, each denied one got
    // EPERM (the negative control: a listener was there), Landlock refused the write.
    ASSERT_EQ(run_->out, "allowed=ok denied=1 denied=1 denied=1 write=13\n") << run_->err;
  }
  static inline TempTree* tree_ = nullptr;
  static inline TcpListener *allowed_ = nullptr, *denied_ = nullptr;
  static inline CommandResult* run_ = nullptr;
  static inline std::string out_, forbidden_, audit_;
};

TEST_F(Report, JsonSaysExactlyWhatTheWorkloadDid) {
  auto events = AuditFileEvents(audit_);
  std::vector<cordon::v1::AuditEvent> connects;
  for (const auto& e : OfKind(events, "net.connect"))
    if (e.net().port() == denied_->port()) connects.push_back(e);
  // Three connects: records, or fewer records and the kernel's repeats
  // (issue 16: the same denial within a second is counted, not recorded).
  uint64_t occurrences = 0;
  int64_t first_ns = INT64_MAX, last_ns = 0;
  auto ns = [](const google::protobuf::Timestamp& t) { return TimeUtil::TimestampToNanoseconds(t); };
  auto seen = [&](const google::protobuf::Timestamp& t) {
    first_ns = std::min(first_ns, ns(t));
    last_ns = std::max(last_ns, ns(t));
  };
  for (const auto& e : connects) {
    occurrences += Occurrences(e);
    seen(e.time());
    if (e.has_repeats()) seen(e.repeats().first()), seen(e.repeats().last());
  }
  ASSERT_EQ(occurrences, 3u) << Slurp(audit_);
  const std::string sandbox = connects[0].sandbox();
  uint64_t all_occurrences = 0;
  for (const auto& e : events) all_occurrences += Occurrences(e);

  CommandResult r = Cordon({"report", "--audit", audit_, "-o", "json"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto report = ParseReport(r.out);
  EXPECT_TRUE(report.integrity().chain_verified()) << report.integrity().chain_error();
  ASSERT_EQ(report.sandboxes_size(), 1) << r.out;
  const auto& s = report.sandboxes(0);
  EXPECT_EQ(s.name(), sandbox);
  EXPECT_EQ(s.events().count(), all_occurrences);

  // Network: the denied destination, three times, from the first to the
  // last of those connects; the allowed one is not an event, so not here.
  ASSERT_EQ(s.network_size(), 1) << r.out;
  const auto& d = s.network(0);
  EXPECT_EQ(d.kind(), "net.connect");
  EXPECT_EQ(d.address(), "127.0.0.1");
  EXPECT_EQ(d.port(), denied_->port());
  EXPECT_EQ(d.protocol(), "tcp");
  EXPECT_EQ(d.verdict(), "denied");
  EXPECT_EQ(d.source(), "audit");
  EXPECT_EQ(d.seen().count(), 3u);
  EXPECT_EQ(ns(d.seen().first()), first_ns);
  EXPECT_EQ(ns(d.seen().last()), last_ns);
  EXPECT_EQ(allowed_->AcceptCount(1), 1) << "the allowed connect reached its listener";
  EXPECT_EQ(denied_->AcceptPending(), 0) << "no denied connect reached its listener";

  // Files: the refused write, in its directory; the allowed one is not here.
  int refused_writes = 0;
  for (const auto& f : s.files()) {
    EXPECT_NE(f.directory(), out_) << "an allowed write was reported: " << r.out;
    if (f.directory() != forbidden_) continue;
    ++refused_writes;
    EXPECT_EQ(f.verdict(), "denied");
    EXPECT_EQ(f.seen().count(), 1u);
    EXPECT_EQ(f.distinct_files(), 1u);
    ASSERT_EQ(f.examples_size(), 1);
    EXPECT_EQ(f.examples(0), "x.txt");
  }
  EXPECT_EQ(refused_writes, 1) << r.out;

  bool python = false;
  // (In the test VMs the host tree is seen below /host.)
  for (const auto& p : s.processes()) python |= p.exe().find("/usr/bin/python3") != std::string::npos;
  EXPECT_TRUE(python) << r.out;
  // Controls: nothing the workload did not do.
  EXPECT_TRUE(s.credentials().empty()) << r.out;
  EXPECT_TRUE(s.containment().empty()) << r.out;
  EXPECT_TRUE(s.resources().empty()) << r.out;
  EXPECT_EQ(s.lost(), 0u);

  // A window after the run, and another sandbox's name: nothing.
  auto later = ParseReport(Cordon({"report", "--audit", audit_, "-o", "json", "--since", "2099-01-01T00:00:00Z"}).out);
  EXPECT_EQ(later.sandboxes_size(), 0);
  auto other = ParseReport(Cordon({"report", "--audit", audit_, "-o", "json", "--sandbox", "not-" + sandbox}).out);
  EXPECT_EQ(other.sandboxes_size(), 0);
  auto named = ParseReport(Cordon({"report", "--audit", audit_, "-o", "json", "--sandbox", sandbox}).out);
  EXPECT_EQ(named.sandboxes_size(), 1);

  CommandResult text = Cordon({"report", "--audit", audit_});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("denied net.connect 127.0.0.1:" + std::to_string(denied_->port()) + "/tcp: 3x"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("hash chain verified"), std::string::npos) << text.out;
}

TEST_F(Report, BadInputIsAnErrorNamingFileAndLine) {
  const std::string dir = tree_->dir;
  CommandResult missing = Cordon({"report", "--audit", dir + "/missing.jsonl"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find(dir + "/missing.jsonl: No such file or directory"), std::string::npos) << missing.err;
  std::ofstream(dir + "/passwd") << "root:x:0:0:root:/root:/bin/bash\n";
  CommandResult passwd = Cordon({"report", "--audit", dir + "/passwd"});
  EXPECT_EQ(passwd.status, 1);
  EXPECT_NE(passwd.err.find(dir + "/passwd:1: not an audit event"), std::string::npos) << passwd.err;
  std::string text = Slurp(audit_);
  const size_t second = text.find('\n') + 1;
  std::ofstream(dir + "/broken.jsonl") << text.substr(0, second) << "{\"kind\":\"net.conn\n" << text.substr(second);
  CommandResult broken = Cordon({"report", "--audit", dir + "/broken.jsonl"});
  EXPECT_EQ(broken.status, 1);
  EXPECT_NE(broken.err.find(dir + "/broken.jsonl:2: not an audit event"), std::string::npos) << broken.err;
  // A changed line: reported all the same, and the report says the chain breaks there.
  std::string edited = text;
  const std::string port = "\"port\":" + std::to_string(denied_->port());
  ASSERT_NE(edited.find(port), std::string::npos);
  edited.replace(edited.find(port), port.size(), "\"port\":1");
  std::ofstream(dir + "/edited.jsonl") << edited;
  CommandResult changed = Cordon({"report", "--audit", dir + "/edited.jsonl", "-o", "json"});
  EXPECT_EQ(changed.status, 0) << changed.err;
  auto report = ParseReport(changed.out);
  EXPECT_FALSE(report.integrity().chain_verified());
  EXPECT_NE(report.integrity().chain_error().find("edited.jsonl:"), std::string::npos) << changed.out;
  EXPECT_NE(changed.err.find("does not verify"), std::string::npos) << changed.err;
  ASSERT_EQ(report.sandboxes_size(), 1);
  EXPECT_EQ(report.sandboxes(0).network_size(), 2) << "the changed line is still reported";
}

// Writes an audit file whose workload-chosen names are hostile (markup, a
// bidi override, terminal controls), chained as the agent writes it.
std::string HostileAudit(const std::string& dir) {
  std::string previous, text;
  AppendChained(ChainStartBody("", 1700000000), &previous, &text);
  for (int i = 0; i < 4; ++i) {
    cordon::v1::AuditEvent e;
    e.mutable_time()->set_seconds(1700000000 + i * 10);
    e.set_sandbox("hostile");
    e.set_sandbox_cgroup_id(4242);
    e.set_pid(100 + i);
    e.set_comm("<script>x</script>");
    e.set_exe(EscapeWorkloadBytes("/tmp/<img src=x onerror=alert(1)>\u202e\x1b[2J"));
    e.set_verdict("denied");
    if (i % 2) {
      e.set_kind("file.open");
      e.mutable_file()->set_path(EscapeWorkloadBytes("/tmp/<iframe src=//203.0.113.9/>/\u202egnp.exe\x07"));
      e.mutable_file()->set_access("write");
    } else {
      e.set_kind("net.connect");
      e.mutable_net()->set_address("203.0.113.9");
      e.mutable_net()->set_port(443);
      e.mutable_net()->set_protocol("tcp");
    }
    AppendChained(ToJsonLine(e), &previous, &text);
  }
  const std::string path = dir + "/hostile.jsonl";
  std::ofstream(path) << text;
  return path;
}

TEST(ReportText, HostileNamesStayEscaped) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  TempTree tree;
  CommandResult r = Cordon({"report", "--audit", HostileAudit(tree.dir)});
  ASSERT_EQ(r.status, 0) << r.err;
  for (unsigned char c : r.out)
    ASSERT_TRUE(c >= 0x20 || c == '\n') << "a control character reached the text: " << int(c);
  EXPECT_EQ(r.out.find("\u202e"), std::string::npos);
  EXPECT_NE(r.out.find("\\u{202E}gnp.exe\\x07"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\\x1b[2J"), std::string::npos) << r.out;
}

// Runs headless chromium: a screenshot and the DOM of `html`.
struct Rendered {
  std::string dom, png;
  std::string skip;  // why it could not run
};

Rendered RenderInChromium(const std::string& dir, const std::string& html) {
  Rendered out;
  if (::access("/usr/bin/chromium", X_OK) != 0) {
    out.skip = "Debian's chromium is not installed (setup.sh installs it)";
    return out;
  }
  out.png = dir + "/shot.png";
  const std::vector<std::string> common = {"/usr/bin/chromium",
                                           "--headless",
                                           "--no-sandbox",
                                           "--disable-gpu",
                                           "--force-color-profile=srgb",
                                           "--hide-scrollbars",
                                           "--user-data-dir=" + dir + "/profile",
                                           "--window-size=1200,1400"};
  auto shot = common, dom = common;
  shot.push_back("--screenshot=" + out.png);
  shot.push_back("file://" + html);
  dom.push_back("--dump-dom");
  dom.push_back("file://" + html);
  CommandResult s = Run(shot);
  EXPECT_EQ(s.status, 0) << s.err;
  CommandResult d = Run(dom);
  EXPECT_EQ(d.status, 0) << d.err;
  out.dom = d.out;
  return out;
}

// "RRGGBB" -> pixels of that colour in the PNG (tests/integration/png_colours.py).
std::map<std::string, int> Colours(const std::string& png, const std::vector<std::string>& colours) {
  std::vector<std::string> argv = {"python3", std::string(CORDON_SOURCE_DIR) + "/tests/integration/png_colours.py",
                                   png};
  argv.insert(argv.end(), colours.begin(), colours.end());
  CommandResult r = Run(argv);
  EXPECT_EQ(r.status, 0) << r.err;
  std::map<std::string, int> out;
  std::istringstream in(r.out);
  std::string name;
  int count, x0, y0, x1, y1;
  while (in >> name >> count) {
    if (name == "size") {
      in >> x0;
      continue;
    }
    in >> x0 >> y0 >> x1 >> y1;
    out[name] = count;
  }
  return out;
}

TEST_F(Report, HtmlRendersInARealBrowserWithItsChart) {
  if (std::getenv("CORDON_VM")) GTEST_SKIP() << "chromium under TCG in the test VMs: the host renders the same page";
  const std::string html = tree_->dir + "/report.html";
  CommandResult r = Cordon({"report", "--audit", audit_, "-o", "html"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::ofstream(html) << r.out;
  Rendered page = RenderInChromium(tree_->dir, html);
  if (!page.skip.empty()) GTEST_SKIP() << page.skip;
  // The DOM: the chart with bars of the run's two families, the destination row.
  EXPECT_NE(page.dom.find("<svg class=\"timeline\""), std::string::npos) << page.dom;
  EXPECT_NE(page.dom.find("class=\"bar net\""), std::string::npos);
  EXPECT_NE(page.dom.find("class=\"bar file\""), std::string::npos);
  EXPECT_EQ(page.dom.find("class=\"bar tamper\""), std::string::npos) << "no tamper attempt was made";
  EXPECT_NE(page.dom.find("127.0.0.1:" + std::to_string(denied_->port()) + "/tcp"), std::string::npos);
  // The screenshot: the series' colours drawn (more than their legend's
  // 12x12 squares), and a colour of a family with no events nowhere.
  auto px = Colours(page.png, {"d62728", "1f77b4", "9467bd"});
  EXPECT_GT(px["d62728"], 300) << "net bars";
  EXPECT_GT(px["1f77b4"], 300) << "file bars";
  EXPECT_EQ(px["9467bd"], 0) << "tamper: no events, no bars";
}

TEST(ReportHtml, HostileNamesInjectNothingIntoTheDom) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (std::getenv("CORDON_VM")) GTEST_SKIP() << "chromium under TCG in the test VMs: the host renders the same page";
  TempTree tree;
  CommandResult r = Cordon({"report", "--audit", HostileAudit(tree.dir), "-o", "html"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = tree.dir + "/hostile.html";
  std::ofstream(html) << r.out;
  Rendered page = RenderInChromium(tree.dir, html);
  if (!page.skip.empty()) GTEST_SKIP() << page.skip;
  ASSERT_NE(page.dom.find("</section>"), std::string::npos) << page.dom;
  for (const char* element : {"<script", "<img", "<iframe"})
    EXPECT_EQ(page.dom.find(element), std::string::npos) << element << " injected:\n" << page.dom;
  // The names are there, as text.
  EXPECT_NE(page.dom.find("&lt;script&gt;x&lt;/script&gt;"), std::string::npos) << page.dom;
  EXPECT_NE(page.dom.find("&lt;img src=x onerror=alert(1)&gt;\\u{202E}\\x1b[2J"), std::string::npos) << page.dom;
  EXPECT_EQ(page.dom.find("\u202e"), std::string::npos) << "the bidi override is shown, not applied";
  // Control: the same page renders the chart (a page that failed to render would pass the checks above).
  auto px = Colours(page.png, {"d62728", "1f77b4"});
  EXPECT_GT(px["d62728"], 300);
  EXPECT_GT(px["1f77b4"], 300);
}

}  // namespace
}  // namespace cordon::test
