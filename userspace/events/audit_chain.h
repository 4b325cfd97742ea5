// The hash chain of an audit file (README "Audit file integrity"): every
// line is a JSON object whose last member is
//   "chain":"<hex SHA-256 of (the previous line's chain, then this line
//             without that member)>"
// so that an edited, removed, inserted or reordered line breaks every chain
// value after it. A file (a fresh one, or the next after a rotation) begins
// with a "chain.start" record naming the previous file's last chain value;
// the very first one names "" (nothing before it). The chain is evidence
// against changes made without rewriting the rest of the file: whoever can
// rewrite the whole file can compute a new chain, which only a chain value
// kept elsewhere (`cordon audit verify` prints the last one) exposes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cordon {

constexpr size_t kChainHexSize = 64;
constexpr std::string_view kChainMember = ",\"chain\":\"";  // then kChainHexSize hex digits, then "}

// hex(SHA-256(previous || body)).
std::string ChainHash(std::string_view previous, std::string_view body);

// Appends the chained form of `body` (one JSON object, no newline) and a
// newline to *out; *previous becomes its chain value.
void AppendChained(std::string_view body, std::string* previous, std::string* out);
// How much longer a line gets chained (the member, its digits and quote;
// the closing brace moves after them).
constexpr size_t kChainGrowth = kChainMember.size() + kChainHexSize + 1;

// The body of the record a chain (file) starts with: an AuditEvent of kind
// "chain.start" (chainStart.previous, time), not an event.
constexpr std::string_view kChainStartPrefix = "{\"kind\":\"chain.start\",\"chainStart\":{\"previous\":\"";
std::string ChainStartBody(std::string_view previous, int64_t unix_seconds);

// The chain value a chained line ends with ("" if it is not chained).
std::string ChainOf(std::string_view line);

// Checks chained lines one by one, across files given oldest first. A file
// continues the chain of the file before it, except one whose chain.start
// names no previous value: it starts a chain of its own (new_chains()). A
// break across files is a chain.start naming a value that is not the last
// one of the file before it (a file missing, or out of order).
class ChainVerifier {
 public:
  // Starts the next file.
  void BeginFile(const std::string& name);
  // Feeds the file's next bytes, split anywhere: each line is verified once
  // its newline arrives. False at the first problem: error() names the file,
  // line and what is wrong.
  bool Feed(std::string_view bytes);
  // The file ended: false if it was empty or its last line has no newline.
  bool EndFile();
  // A whole file at once: BeginFile, Feed, EndFile.
  bool File(const std::string& name, std::string_view text);

  const std::string& error() const { return error_; }
  uint64_t lines() const { return total_; }
  const std::string& head() const { return previous_; }  // the last chain value verified
  // The files (after the first) where a chain of its own starts.
  const std::vector<std::string>& new_chains() const { return new_chains_; }

 private:
  bool Fail(const std::string& what);
  bool Line(std::string_view line);  // one line, without its newline
  std::string file_;
  std::string pending_;  // the start of a line whose newline has not come yet
  uint64_t line_ = 0, total_ = 0;
  std::string previous_;
  bool started_ = false;  // a chain value is known (from a line verified before)
  std::string error_;
  std::vector<std::string> new_chains_;
};

}  // namespace cordon
