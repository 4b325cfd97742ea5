#include "events/audit_chain.h"

#include <openssl/evp.h>
#include <time.h>

#include <cstdlib>
#include <ctime>

namespace cordon {
namespace {

bool IsHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The line without its chain member (the body it was computed over) and the
// value; false if the line does not end with a chain member.
bool Split(std::string_view line, std::string* body, std::string_view* value) {
  const size_t tail = kChainMember.size() + kChainHexSize + 2;  // member, digits, "}
  if (line.size() < tail + 1 || line.substr(line.size() - 2) != "\"}") return false;
  const size_t at = line.size() - tail;
  if (line.substr(at, kChainMember.size()) != kChainMember) return false;
  *value = line.substr(at + kChainMember.size(), kChainHexSize);
  if (!IsHex(*value)) return false;
  body->assign(line.substr(0, at));
  body->push_back('}');
  return true;
}

// Whether a body is a chain.start record, and the previous value it names.
bool IsStart(std::string_view body, std::string* previous) {
  if (body.substr(0, kChainStartPrefix.size()) != kChainStartPrefix) return false;
  const size_t at = kChainStartPrefix.size();
  size_t end = body.find('"', at);
  if (end == std::string_view::npos) return false;
  previous->assign(body.substr(at, end - at));
  return true;
}

}  // namespace

std::string ChainHash(std::string_view previous, std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, previous.data(), previous.size()) == 1 &&
            EVP_DigestUpdate(ctx, body.data(), body.size()) == 1 && EVP_DigestFinal_ex(ctx, digest, &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) std::abort();  // SHA-256 in OpenSSL does not fail short of memory exhaustion
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

void AppendChained(std::string_view body, std::string* previous, std::string* out) {
  std::string hash = ChainHash(*previous, body);
  out->append(body.substr(0, body.size() - 1));  // without its closing brace
  out->append(kChainMember);
  out->append(hash);
  out->append("\"}\n");
  *previous = std::move(hash);
}

std::string ChainStartBody(std::string_view previous, int64_t unix_seconds) {
  time_t secs = static_cast<time_t>(unix_seconds);
  struct tm tm = {};
  char when[32] = "1970-01-01T00:00:00Z";
  if (::gmtime_r(&secs, &tm)) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(kChainStartPrefix) + std::string(previous) + "\"},\"time\":\"" + when + "\"}";
}

std::string ChainOf(std::string_view line) {
  std::string body;
  std::string_view value;
  return Split(line, &body, &value) ? std::string(value) : std::string();
}

void ChainVerifier::BeginFile(const std::string& name) {
  file_ = name;
  line_ = 0;
  pending_.clear();
}

bool ChainVerifier::Feed(std::string_view bytes) {
  for (size_t nl; (nl = bytes.find('\n')) != std::string_view::npos; bytes.remove_prefix(nl + 1)) {
    bool ok;
    if (pending_.empty()) {
      ok = Line(bytes.substr(0, nl));
    } else {
      pending_.append(bytes.substr(0, nl));
      ok = Line(pending_);
      pending_.clear();
    }
    if (!ok) return false;
  }
  pending_.append(bytes);
  return true;
}

bool ChainVerifier::File(const std::string& name, std::string_view text) {
  BeginFile(name);
  return Feed(text) && EndFile();
}

bool ChainVerifier::Fail(const std::string& what) {
  error_ = file_ + ":" + std::to_string(line_) + ": " + what;
  return false;
}

bool ChainVerifier::Line(std::string_view line) {
  ++line_;
  std::string body;
  std::string_view value;
  if (!Split(line, &body, &value)) return Fail("not a chained line (no \"chain\" member at its end)");
  std::string named;
  if (IsStart(body, &named)) {
    // A file's first record. Elsewhere only a writer that found a file
    // ending in an unchained line writes one (and that line fails before).
    if (started_ && line_ > 1) return Fail("the chain restarts in the middle of the file");
    // Naming no previous value, a file starts a chain of its own (another
    // writer's: a cordon run log next to the agent's files): not a break.
    if (started_ && named.empty()) new_chains_.push_back(file_);
    if (started_ && !named.empty() && named != previous_)
      return Fail("the file starts after chain value " + (named.empty() ? std::string("\"\"") : named) +
                  ", but the file before it ends with " + previous_ +
                  " (a file is missing, or the files are out of order)");
    previous_ = named;
    started_ = true;
  } else if (!started_) {
    return Fail("the chain starts in the middle (no chain.start record before this line): verify from the "
                "oldest file");
  }
  if (ChainHash(previous_, body) != value)
    return Fail("chain value does not match: this line was changed, or a line before it was removed, inserted or "
                "reordered");
  previous_.assign(value);
  ++total_;
  return true;
}

bool ChainVerifier::EndFile() {
  if (line_ == 0 && pending_.empty()) return Fail("empty file");
  if (!pending_.empty()) {
    ++line_;
    return Fail("the last line is incomplete");
  }
  return true;
}

}  // namespace cordon
