// inspect/environ.h: which environment variables look like credentials (names
// only, never values), and reading environments in a child that a stalled
// read cannot hold up. No root needed: the stall is a pipe nobody writes to
// (the integration suite stalls a real /proc/<pid>/environ with userfaultfd).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "inspect/environ.h"
#include "tests/unit/temp_dir.h"
#include "util/clock.h"

namespace cordon {
namespace {

std::string Env(std::initializer_list<std::string> entries) {
  std::string out;
  for (const auto& e : entries) out += e + std::string(1, '\0');
  return out;
}

const std::string kGithub = "ghp_" + std::string(36, 'a');

std::string Describe(const std::vector<ExposedVariable>& vars) {
  std::string out;
  for (const auto& v : vars) out += v.name + "=" + v.why + ";";
  return out;
}

TEST(CredentialLikeVariables, NamesAndValuesThatLookLikeCredentialsAreFoundValuesNeverReturned) {
  std::string env = Env({"HOME=/root", "GITHUB_TOKEN=abc123", "db_password=hunter2", "AWS_SECRET_ACCESS_KEY=x",
                         "PLAIN=" + kGithub, "PATH=/usr/bin", "MY_API_KEY=k", "SESSION=eyJhbGciOi.eyJzdWIi.sig"});
  auto vars = CredentialLikeVariables(env);
  EXPECT_EQ(Describe(vars),
            "GITHUB_TOKEN=name;db_password=name;AWS_SECRET_ACCESS_KEY=name;PLAIN=value looks like a GitHub token;"
            "MY_API_KEY=name;SESSION=value looks like a JWT;");
  for (const auto& v : vars) {
    EXPECT_EQ(v.name.find("abc123"), std::string::npos);
    EXPECT_EQ(v.why.find(kGithub), std::string::npos);
  }
}

TEST(CredentialLikeVariables, HarmlessEnvironmentsAndEmptyValuesAreNotReported) {
  EXPECT_TRUE(CredentialLikeVariables(Env({"HOME=/root", "LANG=C.UTF-8", "TERM=xterm", "SHLVL=1"})).empty());
  EXPECT_TRUE(CredentialLikeVariables(Env({"GITHUB_TOKEN=", "PASSWORD="})).empty());
  EXPECT_TRUE(CredentialLikeVariables("").empty());
  EXPECT_TRUE(CredentialLikeVariables(std::string(5, '\0')).empty());
  EXPECT_TRUE(CredentialLikeVariables(Env({"JUSTTEXT"})).empty());  // no '=', not a value
  EXPECT_TRUE(CredentialLikeVariables(Env({"X=ghp_short"})).empty());  // a prefix alone is not a token
}

TEST(CredentialLikeVariables, ANameThatIsItselfACredentialIsNeverRecorded) {
  auto vars = CredentialLikeVariables(Env({kGithub + "=1", kGithub, "AKIAABCDEFGHIJKLMNOP=x"}));
  ASSERT_EQ(vars.size(), 3u) << Describe(vars);
  EXPECT_EQ(vars[0].name, "(a name that looks like a GitHub token)");
  EXPECT_EQ(vars[1].name, "(an entry without '=' that looks like a GitHub token)");
  EXPECT_EQ(vars[2].name, "(a name that looks like an AWS access key id)");
  EXPECT_EQ(Describe(vars).find("ghp_aaaa"), std::string::npos);
  EXPECT_EQ(Describe(vars).find("AKIAABCD"), std::string::npos);
}

TEST(CredentialLikeVariables, HostileNamesAreNotRecordedLongOnesCutEachListedOnce) {
  std::string bidi = "EVIL_\xe2\x80\xae_TOKEN";  // U+202E
  std::string bad = "BAD\xff\x1b[31m_SECRET";
  std::string longname = std::string(300, 'K') + "_TOKEN";
  auto vars = CredentialLikeVariables(Env({bidi + "=1", bad + "=1", longname + "=1", "GITHUB_TOKEN=1", "GITHUB_TOKEN=2"}));
  ASSERT_EQ(vars.size(), 3u) << Describe(vars);
  EXPECT_EQ(vars[0].name, "(a name that is not an identifier)");  // both hostile ones, once
  EXPECT_EQ(vars[1].name, std::string(128, 'K'));
  EXPECT_EQ(vars[2].name, "GITHUB_TOKEN");
}

TEST(CredentialLikeVariables, OnlyIdentifiersAreRecordedAsNames) {
  // A bare secret with an '=' inside, commas and parentheses that would fake
  // entries in the reason, a bidi override: none is written down.
  auto vars = CredentialLikeVariables(
      Env({"mykey_c2VjcmV0=value", "A, FAKE (name), B_TOKEN=1", "EVIL_\xe2\x80\xae_KEY=1", "=" + kGithub}));
  ASSERT_EQ(vars.size(), 2u) << Describe(vars);
  EXPECT_EQ(vars[0].name, "mykey_c2VjcmV0");  // an identifier: recorded
  EXPECT_EQ(vars[1].name, "(a name that is not an identifier)");
}

TEST(CredentialLikeVariables, AtMostMaxAreListedTheRestCounted) {
  std::string env;
  for (int i = 0; i < 500; ++i) env += "K" + std::to_string(i) + "_TOKEN=1" + std::string(1, '\0');
  size_t more = 0;
  auto vars = CredentialLikeVariables(env, 100, &more);
  EXPECT_EQ(vars.size(), 100u);
  EXPECT_EQ(more, 400u);
  EXPECT_EQ(vars[99].name, "K99_TOKEN");
}

TEST(CredentialValueKind, KnownFormats) {
  EXPECT_EQ(CredentialValueKind(kGithub), "a GitHub token");
  EXPECT_EQ(CredentialValueKind("github_pat_" + std::string(40, 'Z')), "a GitHub token");
  EXPECT_EQ(CredentialValueKind("glpat-" + std::string(20, 'x')), "a GitLab token");
  EXPECT_EQ(CredentialValueKind("xoxb-" + std::string(30, '1')), "a Slack token");
  EXPECT_EQ(CredentialValueKind("AKIAIOSFODNN7EXAMPLE"), "an AWS access key id");
  EXPECT_EQ(CredentialValueKind("AKIAiosfodnn7example"), "");
  EXPECT_EQ(CredentialValueKind("AIza" + std::string(35, 'b')), "a Google API key");
  EXPECT_EQ(CredentialValueKind("-----BEGIN EC PRIVATE KEY-----\nMHc..."), "a private key");
  EXPECT_EQ(CredentialValueKind("-----BEGIN CERTIFICATE-----"), "");
  EXPECT_EQ(CredentialValueKind("hello"), "");
  // Inside a URL, quotes or a header value; with a password in a URL.
  EXPECT_EQ(CredentialValueKind("https://x-access-token:" + kGithub + "@github.com/acme/app.git"), "a GitHub token");
  EXPECT_EQ(CredentialValueKind("'" + kGithub + "'"), "a GitHub token");
  EXPECT_EQ(CredentialValueKind("Authorization: token " + kGithub), "a GitHub token");
  EXPECT_EQ(CredentialValueKind("key=AKIAIOSFODNN7EXAMPLE;"), "an AWS access key id");
  EXPECT_EQ(CredentialValueKind("postgres://app:hunter2@db:5432/app"), "a URL with a password");
  EXPECT_EQ(CredentialValueKind("postgres://app@db:5432/app"), "");
  EXPECT_EQ(CredentialValueKind("https://example.com/a@b:c"), "");  // '@' past the authority
  EXPECT_EQ(CredentialValueKind("Bearer abcdefghijklmnopqrstuvwxyz"), "a bearer token");
  EXPECT_EQ(CredentialValueKind("xghp_" + std::string(36, 'a')), "");  // not at a word's start
  EXPECT_EQ(CredentialValueKind("/usr/lib/ghp_tools:/bin"), "");
  EXPECT_EQ(CredentialValueKind(""), "");
}

class EnvironFiles : public test::TempDir {
 public:
  EnvironFiles() : TempDir("environ") {}
  std::string File(const std::string& name, const std::string& data) {
    std::string path = this->path() + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
    return path;
  }
  // A FIFO nobody opens for writing: opening it for reading blocks.
  std::string Fifo(const std::string& name) {
    std::string path = this->path() + "/" + name;
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
    return path;
  }
};

TEST(ReadEnvironments, ReadsEachWholeOrCutAtTheLimit) {
  EnvironFiles files;
  std::string big(200 * 1024, 'x');
  EnvironLimits limits;
  limits.max_bytes = 100 * 1024;
  auto reads = ReadEnvironments({files.File("a", Env({"A=1", "B=2"})), files.File("b", big), files.File("c", "")},
                                limits);
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_TRUE(reads[0].read);
  EXPECT_EQ(reads[0].data, Env({"A=1", "B=2"}));
  EXPECT_FALSE(reads[0].truncated);
  EXPECT_TRUE(reads[1].read);
  EXPECT_TRUE(reads[1].truncated);
  EXPECT_EQ(reads[1].data, big.substr(0, 100 * 1024));
  EXPECT_TRUE(reads[2].read);
  EXPECT_EQ(reads[2].data, "");
  // Exactly the limit is whole, not cut.
  auto exact = ReadEnvironments({files.File("d", std::string(100 * 1024, 'y'))}, limits);
  EXPECT_TRUE(exact[0].read);
  EXPECT_FALSE(exact[0].truncated);
  EXPECT_EQ(exact[0].data.size(), 100u * 1024);
}

TEST(ReadEnvironments, AnUnreadableOneIsReportedAndTheOthersStillRead) {
  EnvironFiles files;
  auto reads = ReadEnvironments({"/", files.path() + "/absent", files.File("good", "X=1")});  // EISDIR, ENOENT
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_FALSE(reads[0].read);
  EXPECT_NE(reads[0].error.find("directory"), std::string::npos) << reads[0].error;
  EXPECT_FALSE(reads[1].read);
  EXPECT_NE(reads[1].error.find("No such file"), std::string::npos) << reads[1].error;
  EXPECT_TRUE(reads[2].read);
  EXPECT_EQ(reads[2].data, "X=1");
}

TEST(ReadEnvironments, AStalledOpenIsGivenUpAndTheRestStillRead) {
  EnvironFiles files;
  EnvironLimits limits;
  limits.stall_ms = 1000;  // the files on either side get as long, even on a loaded machine
  const int64_t start = MonoNs();
  auto reads = ReadEnvironments({files.File("before", "A=1"), files.Fifo("stall"), files.File("after", "B=2")}, limits);
  const int64_t took_ms = (MonoNs() - start) / 1'000'000;
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_TRUE(reads[0].read);
  EXPECT_EQ(reads[0].data, "A=1");
  EXPECT_FALSE(reads[1].read);
  EXPECT_EQ(reads[1].error, "timed out after 1000 ms");
  EXPECT_TRUE(reads[2].read) << reads[2].error;
  EXPECT_EQ(reads[2].data, "B=2");
  EXPECT_GE(took_ms, 1000);  // it did wait for the stalled one: the stall was real
}

TEST(ReadEnvironments, AStalledReadIsGivenUp) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);  // the write end stays open, nothing is written: read() blocks
  EnvironLimits limits;
  limits.stall_ms = 300;
  // Through our /proc entry: the reader child holds no descriptor of ours.
  auto reads = ReadEnvironments({"/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(p[0])}, limits);
  ::close(p[0]);
  ::close(p[1]);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_FALSE(reads[0].read);
  EXPECT_EQ(reads[0].error, "timed out after 300 ms");
}

// The reader child may be kept stuck by the workload: it must hold nothing of
// the caller's (in the agent: its lock, its clients' sockets). Seen from here:
// while it is stalled, the last copy of a pipe's write end is ours.
TEST(ReadEnvironments, TheReaderHoldsNoDescriptorOfTheCaller) {
  EnvironFiles files;
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  std::string fifo = files.Fifo("stall");
  EnvironLimits limits;
  limits.stall_ms = 2000;
  std::thread reader([&] { (void)ReadEnvironments({fifo}, limits); });
  ::usleep(300'000);  // the child is forked and blocked in open()
  ::close(p[1]);
  pollfd hup{p[0], POLLIN, 0};
  int r = ::poll(&hup, 1, 1000);
  EXPECT_EQ(r, 1) << "the write end is still open somewhere: the reader child inherited it";
  EXPECT_TRUE(hup.revents & POLLHUP);
  reader.join();
  ::close(p[0]);
}

TEST(ReadEnvironments, TheBudgetBoundsEveryStallTogether) {
  EnvironFiles files;
  std::vector<std::string> stalled;
  for (int i = 0; i < 6; ++i) stalled.push_back(files.Fifo("f" + std::to_string(i)));
  EnvironLimits limits;
  limits.stall_ms = 200;
  limits.budget_ms = 500;
  auto reads = ReadEnvironments(stalled, limits);
  ASSERT_EQ(reads.size(), 6u);
  size_t timed_out = 0, budget = 0;
  for (const auto& r : reads) {
    EXPECT_FALSE(r.read);
    timed_out += r.error == "timed out after 200 ms";
    budget += r.error == "not read: the 500 ms budget was spent";
  }
  EXPECT_EQ(timed_out + budget, 6u);
  EXPECT_GE(budget, 3u);  // at most 2.5 stalls fit in the budget
}

}  // namespace
}  // namespace cordon
