// The environments of a sandbox's processes, for the retroactive check's
// credential.exposed detection: which variable names look like credentials.
//
// /proc/<pid>/environ is the process's own memory, so reading it can block for
// as long as the workload likes (the pages behind it mapped from a FUSE file
// whose server never answers; pages registered with userfaultfd do not block
// a reader on 6.18, measured: they read as empty). The reads therefore happen
// in a forked child that only reads and writes pipes:
// a read that stalls is given up after a deadline (the child is killed and a
// new one goes on with the next process) and the caller (cordon attach, the
// agent's main loop) never waits longer than the budget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>


namespace cordon {

struct EnvironLimits {
  size_t max_bytes = 1 << 20;   // per process; what is past it is not read
  int stall_ms = 1000;          // one process's read may take this long
  int budget_ms = 5000;         // every read together
};

// What reading one process's environment gave.
struct EnvironRead {
  bool read = false;      // data holds its environment (maybe cut at max_bytes)
  bool truncated = false;
  std::string data;       // NUL-separated entries, as the kernel gives them
  std::string error;      // !read: why ("timed out after 1000 ms", "not read: the 5000 ms budget was spent", an errno)
};

// Opens and reads each of `paths` (/proc/<pid>/environ: opening takes the
// process's exec lock, reading touches its memory) in a child process that
// holds no descriptor of the caller's; one result per path, in order.
// `deadline_ms` (CLOCK_MONOTONIC, ms) ends the budget instead of now +
// budget_ms. A reader that did not die when killed is remembered: while it is
// stuck, no new one starts (every result says so).
std::vector<EnvironRead> ReadEnvironments(const std::vector<std::string>& paths, const EnvironLimits& limits = {},
                                          int64_t deadline_ms = 0);

// A variable of an environment that looks like a credential.
struct ExposedVariable {
  std::string name;  // a shell identifier ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes); any other name is replaced by "(a name that is not an identifier)", one that looks like a credential value by "(a name that looks like <kind>)"
  std::string why;   // "name" (…TOKEN…, …SECRET…, …KEY…, …PASSWORD…, …PASSWD…, …CREDENTIAL…, AWS_…) or "value looks like <kind>"
};

// The variables of `environ` (NUL-separated NAME=VALUE entries) whose name or
// value looks like a credential (see README "Retroactive attach"), each name
// once, in order. Entries with an empty value are not credentials; an entry
// without '=' counts only if it looks like a credential value. Values are
// never returned. At most `max` are returned; `not_listed` counts the rest.
std::vector<ExposedVariable> CredentialLikeVariables(std::string_view environ, size_t max = SIZE_MAX,
                                                     size_t* not_listed = nullptr);

// The kind of credential `value` looks like ("a GitHub token", "a JWT", ...),
// or "" if none.
std::string CredentialValueKind(std::string_view value);

}  // namespace cordon
