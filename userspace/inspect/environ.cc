// Environments of a sandbox's processes read without trusting them, and the
// credential-like variables in them. See environ.h.
#include "inspect/environ.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <set>

#include "util/clock.h"
#include "util/fd.h"
#include "util/text.h"

namespace cordon {

namespace {

// The child's frames: {index, n} then n bytes of data when n > 0; n == 0 ends
// entry `index`, kTruncated ends it at max_bytes, n < 0 ends it with -errno.
struct Frame {
  uint32_t index;
  int32_t n;
};
constexpr int32_t kTruncated = INT32_MIN;
constexpr uint32_t kReady = UINT32_MAX;  // the child's first frame, before any entry

// Writes all of buf; in the child: no allocation, no locks.
bool ChildWrite(int fd, const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void ChildReads(int out, pid_t parent, const std::vector<std::string>& paths, size_t first,
                             size_t max_bytes, char* buf, size_t buf_size) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // the parent died before the prctl
  // Nothing of the caller's (the agent's lock, its sockets, its stdio) stays
  // open in a child that the workload may keep stuck.
  if (out > 0) ::syscall(SYS_close_range, 0u, static_cast<unsigned>(out - 1), 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(out + 1), ~0u, 0u);
  // Ready: the per-process stall limit starts now, not while a loaded
  // machine (or a sanitizer's large fork) is still starting this child.
  const Frame ready{kReady, 0};
  if (!ChildWrite(out, &ready, sizeof ready)) ::_exit(1);
  for (size_t i = first; i < paths.size(); ++i) {
    size_t total = 0;
    Frame end{static_cast<uint32_t>(i), 0};
    // Opening takes the process's exec lock, which the workload can keep
    // taken: that too happens here, under the parent's deadline.
    int fd = ::open(paths[i].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) end.n = -errno;
    while (fd >= 0) {
      if (total >= max_bytes) {  // more than max_bytes? one byte tells
        ssize_t more = ::read(fd, buf, 1);
        if (more < 0 && errno == EINTR) continue;
        if (more != 0) end.n = kTruncated;
        break;
      }
      ssize_t n = ::read(fd, buf, std::min(buf_size, max_bytes - total));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        end.n = -errno;
        break;
      }
      if (n == 0) break;
      Frame f{static_cast<uint32_t>(i), static_cast<int32_t>(n)};
      if (!ChildWrite(out, &f, sizeof f) || !ChildWrite(out, buf, static_cast<size_t>(n))) ::_exit(1);
      total += static_cast<size_t>(n);
    }
    if (fd >= 0) ::close(fd);
    if (!ChildWrite(out, &end, sizeof end)) ::_exit(1);
  }
  ::_exit(0);
}

// Reads exactly len bytes from fd by `deadline_ms` (monotonic): 1 done, 0 end
// of file, -1 the deadline passed, -2 an error.
int ReadExact(int fd, void* buf, size_t len, int64_t deadline_ms) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    const int64_t left = deadline_ms - MonoMs();
    if (left <= 0) return -1;
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -2;
    if (r == 0) return -1;
    ssize_t n = ::read(fd, p, len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return -2;
    if (n == 0) return 0;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return 1;
}

// Readers that did not die within Reap's wait: stuck in an uninterruptible
// wait on a workload's memory (a FUSE page its server never answers). They
// hold nothing of ours but a pid; while one is stuck no new reader starts, so
// a workload cannot pile them up.
std::mutex g_stuck_mutex;
std::vector<pid_t> g_stuck;

// Reaps our reader child, waiting at most 200 ms; one that does not go is
// remembered in g_stuck and reaped by a later call.
void Reap(pid_t pid) {
  for (int i = 0; i < 20; ++i) {
    pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return;
    ::usleep(10'000);
  }
  std::lock_guard<std::mutex> lock(g_stuck_mutex);
  g_stuck.push_back(pid);
}

// The first reader still stuck, after reaping those that went; 0 if none.
pid_t StillStuck() {
  std::lock_guard<std::mutex> lock(g_stuck_mutex);
  std::vector<pid_t> left;
  for (pid_t pid : g_stuck) {
    pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r == 0) left.push_back(pid);
  }
  g_stuck = left;
  return g_stuck.empty() ? 0 : g_stuck.front();
}

}  // namespace

std::vector<EnvironRead> ReadEnvironments(const std::vector<std::string>& paths, const EnvironLimits& limits,
                                          int64_t deadline_ms) {
  std::vector<EnvironRead> out(paths.size());
  if (paths.empty()) return out;
  const std::string spent = "not read: the " + std::to_string(limits.budget_ms) + " ms budget was spent";
  if (pid_t stuck = StillStuck()) {
    for (auto& r : out)
      r.error = "not read: an earlier reader (pid " + std::to_string(stuck) + ") is still stuck in a workload's memory";
    return out;
  }
  const int64_t budget_end = deadline_ms ? deadline_ms : MonoMs() + limits.budget_ms;
  std::vector<char> buffer(64 * 1024);  // the child's, allocated before fork
  std::vector<char> chunk;
  size_t next = 0;
  while (next < paths.size()) {
    if (MonoMs() >= budget_end) break;
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      const std::string why = std::string("pipe: ") + std::strerror(errno);
      for (size_t i = next; i < out.size(); ++i) out[i].error = why;
      return out;
    }
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::string("fork: ") + std::strerror(errno);
      ::close(p[0]);
      ::close(p[1]);
      for (size_t i = next; i < out.size(); ++i) out[i].error = why;
      return out;
    }
    if (pid == 0) {
      ::close(p[0]);
      ChildReads(p[1], parent, paths, next, limits.max_bytes, buffer.data(), buffer.size());
    }
    ::close(p[1]);
    UniqueFd in(p[0]);
    size_t current = next;  // the entry being read
    Frame ready;
    int started = ReadExact(in.get(), &ready, sizeof ready, budget_end);
    if (started == 1 && ready.index != kReady) started = -2;
    int64_t stall_end = std::min(budget_end, MonoMs() + limits.stall_ms);
    for (;;) {
      Frame f;
      int r = started == 1 ? ReadExact(in.get(), &f, sizeof f, stall_end) : started;
      if (started != 1) stall_end = budget_end;  // never started: the budget, not a stall
      if (r == 1 && (f.index != current || (f.n > 0 && static_cast<size_t>(f.n) > buffer.size()))) r = -2;
      if (r == 1 && f.n > 0) {
        chunk.resize(static_cast<size_t>(f.n));
        r = ReadExact(in.get(), chunk.data(), chunk.size(), stall_end);
        if (r == 1) out[current].data.append(chunk.data(), chunk.size());
      }
      if (r == 1 && f.n > 0) continue;
      if (r == 1) {  // the end of entry `current`
        out[current].read = f.n == 0 || f.n == kTruncated;
        out[current].truncated = f.n == kTruncated;
        if (f.n < 0 && f.n != kTruncated) out[current].error = std::strerror(-f.n);
        if (!out[current].read) out[current].data.clear();
        if (++current == paths.size()) break;
        stall_end = std::min(budget_end, MonoMs() + limits.stall_ms);
        continue;
      }
      // Stalled, the budget spent, or the child gone: this entry is not read.
      out[current].data.clear();
      if (r == -1) {
        const bool budget = stall_end == budget_end && MonoMs() >= budget_end;
        out[current].error = budget ? spent : "timed out after " + std::to_string(limits.stall_ms) + " ms";
      } else {
        out[current].error = "the reader process failed";
      }
      ::kill(pid, SIGKILL);  // our own child
      ++current;
      break;
    }
    Reap(pid);
    next = current;
    if (StillStuck()) break;  // that one did not die: start no other
  }
  for (size_t i = next; i < out.size(); ++i)
    if (!out[i].read && out[i].error.empty()) {
      pid_t stuck = StillStuck();
      out[i].error = stuck ? "not read: an earlier reader (pid " + std::to_string(stuck) +
                                 ") is still stuck in a workload's memory"
                           : spent;
    }
  return out;
}

// ---- What looks like a credential ----------------------------------------------

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool AllOf(std::string_view s, int (*pred)(int)) {
  for (unsigned char c : s)
    if (!pred(c)) return false;
  return true;
}

int UpperOrDigit(int c) { return std::isupper(c) || std::isdigit(c); }
int Base64Url(int c) { return std::isalnum(c) || c == '-' || c == '_' || c == '='; }

}  // namespace

namespace {

int TokenChar(int c) { return std::isalnum(c) || c == '_' || c == '-' || c == '.'; }

// One word of a value (a run of letters, digits, '_', '-' and '.').
std::string WordKind(std::string_view w) {
  // Prefixed tokens: the prefix and at least 16 more characters.
  static const struct {
    const char* prefix;
    const char* kind;
  } kPrefixes[] = {
      {"ghp_", "a GitHub token"},         {"gho_", "a GitHub token"},        {"ghu_", "a GitHub token"},
      {"ghs_", "a GitHub token"},         {"ghr_", "a GitHub token"},        {"github_pat_", "a GitHub token"},
      {"glpat-", "a GitLab token"},       {"xoxb-", "a Slack token"},        {"xoxp-", "a Slack token"},
      {"xoxa-", "a Slack token"},         {"xoxs-", "a Slack token"},        {"xoxe-", "a Slack token"},
      {"xoxe.", "a Slack token"},         {"xapp-", "a Slack token"},
      {"sk_live_", "a Stripe key"},       {"rk_live_", "a Stripe key"},      {"sk-ant-", "an Anthropic key"},
      {"sk-proj-", "an OpenAI key"},      {"npm_", "an npm token"},          {"pypi-", "a PyPI token"},
      {"hvs.", "a Vault token"},          {"dop_v1_", "a DigitalOcean token"},
  };
  for (const auto& p : kPrefixes)
    if (StartsWith(w, p.prefix) && w.size() >= std::strlen(p.prefix) + 16) return p.kind;
  // AWS access key ids: AKIA/ASIA and 16 upper-case letters or digits.
  if (w.size() == 20 && (StartsWith(w, "AKIA") || StartsWith(w, "ASIA")) && AllOf(w.substr(4), UpperOrDigit))
    return "an AWS access key id";
  // Google API keys: AIza and 35 more.
  if (w.size() == 39 && StartsWith(w, "AIza") && AllOf(w.substr(4), Base64Url)) return "a Google API key";
  // A JWT: three base64url parts, the first two JSON objects ("eyJ": '{"').
  if (StartsWith(w, "eyJ") && std::count(w.begin(), w.end(), '.') == 2 &&
      StartsWith(w.substr(w.find('.') + 1), "eyJ"))
    return "a JWT";
  return "";
}

// scheme://user:password@host...
bool UrlWithPassword(std::string_view v) {
  for (size_t at = v.find("://"); at != std::string_view::npos; at = v.find("://", at + 3)) {
    std::string_view rest = v.substr(at + 3);
    std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    size_t user_end = authority.rfind('@');
    if (user_end == std::string_view::npos) continue;
    size_t colon = authority.substr(0, user_end).find(':');
    if (colon != std::string_view::npos && colon + 1 < user_end) return true;
  }
  return false;
}

}  // namespace

std::string CredentialValueKind(std::string_view v) {
  // Each word: a token may sit inside a URL, quotes or a header value.
  for (size_t i = 0; i < v.size();) {
    while (i < v.size() && !TokenChar(static_cast<unsigned char>(v[i]))) ++i;
    size_t end = i;
    while (end < v.size() && TokenChar(static_cast<unsigned char>(v[end]))) ++end;
    if (end > i)
      if (std::string kind = WordKind(v.substr(i, end - i)); !kind.empty()) return kind;
    i = end;
  }
  if (v.find("-----BEGIN") != std::string_view::npos && v.find("PRIVATE KEY") != std::string_view::npos)
    return "a private key";
  if (UrlWithPassword(v)) return "a URL with a password";
  if (StartsWith(v, "Bearer ") && v.size() >= 7 + 16) return "a bearer token";
  return "";
}

namespace {

// A name to record: a shell identifier. Anything else (an '=' inside a
// secret, commas and parentheses that would fake entries in the reason,
// bidi controls) is not written down.
bool IsIdentifier(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

bool NameLooksSecret(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const char* const kWords[] = {"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL"};
  for (const char* w : kWords)
    if (upper.find(w) != std::string::npos) return true;
  return StartsWith(upper, "AWS_");
}

constexpr size_t kMaxName = 128;

}  // namespace

std::vector<ExposedVariable> CredentialLikeVariables(std::string_view environ, size_t max, size_t* not_listed) {
  std::vector<ExposedVariable> out;
  if (not_listed) *not_listed = 0;
  std::set<std::string> seen;
  size_t start = 0;
  while (start < environ.size()) {
    size_t end = environ.find('\0', start);
    if (end == std::string_view::npos) end = environ.size();
    std::string_view entry = environ.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    size_t eq = entry.find('=');
    std::string_view name = eq == std::string_view::npos ? std::string_view() : entry.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? entry : entry.substr(eq + 1);
    ExposedVariable v;
    std::string value_kind = CredentialValueKind(value);
    if (std::string name_kind = CredentialValueKind(name); !name_kind.empty() || eq == std::string_view::npos) {
      // The name itself may be the secret: never record it.
      if (name_kind.empty() && value_kind.empty()) continue;
      v.name = "(" + std::string(eq == std::string_view::npos ? "an entry without '=' that looks like "
                                                               : "a name that looks like ") +
               (name_kind.empty() ? value_kind : name_kind) + ")";
      v.why = value_kind.empty() ? "name" : "value looks like " + value_kind;
    } else {
      if (value.empty()) continue;
      if (!value_kind.empty()) v.why = "value looks like " + value_kind;
      else if (NameLooksSecret(name)) v.why = "name";
      else continue;
      v.name = IsIdentifier(name) ? std::string(name.substr(0, kMaxName)) : "(a name that is not an identifier)";
    }
    if (!seen.insert(v.name).second) continue;
    if (out.size() < max) {
      out.push_back(std::move(v));
    } else {
      seen.erase(v.name);  // only the listed ones are remembered
      if (not_listed) ++*not_listed;
    }
  }
  return out;
}

}  // namespace cordon
