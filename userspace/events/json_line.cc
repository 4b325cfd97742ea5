#include "events/json_line.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "util/colour.h"
#include "util/text.h"

namespace cordon {
namespace {

// ---- the audit-file line, by hand -------------------------------------------
//
// Exactly what protobuf 3's MessageToJsonString prints with add_whitespace
// off: fields in field-number order, lowerCamelCase names, proto3 defaults
// omitted, set sub-messages printed even when empty ({}), 64-bit integers as
// strings, Timestamp as RFC 3339 with 0, 3, 6 or 9 fractional digits. Strings
// are escaped as protobuf escapes ASCII (control characters, '"', '\\', '<',
// '>' and DEL). Unknown fields (an event parsed from a newer writer) are not
// printed, as protobuf does not print them. Anything this writer does not
// reproduce byte for byte (non-ASCII strings, timestamps out of range) makes
// it return false, and protobuf prints the whole line instead.
// tests/unit/core_json_test.cc compares both on varied events.

// Characters written as they are: printable ASCII but '"', '\\', '<', '>'.
struct PlainTable {
  bool v[256] = {};
  constexpr PlainTable() {
    for (int c = 0x20; c < 0x7f; ++c) v[c] = c != '"' && c != '\\' && c != '<' && c != '>';
  }
  constexpr bool operator[](unsigned char c) const { return v[c]; }
};
constexpr PlainTable kPlain;

// Writes into a buffer sized beforehand for the worst case (every string
// character escaped as \u00XX), then trimmed.
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  bool Event(const cordon::v1::AuditEvent& e) {
    size_t chars = e.sandbox().size() + e.cgroup_path().size() + e.comm().size() + e.exe().size() + e.kind().size() +
                   e.verdict().size() + e.policy().size() + e.reason().size() + e.enforcement().size() + e.id().size() +
                   e.policy_digest().size();
    if (e.has_net())
      chars += e.net().address().size() + e.net().protocol().size() + e.net().family().size() +
               e.net().sock_type().size();
    if (e.has_file()) chars += e.file().path().size() + e.file().access().size() + e.file().granted().size();
    for (const auto& f : e.open_files()) chars += f.size() + 3;
    // Names, numbers and punctuation take less than 1024 bytes; a string
    // character at most 6 (\u00XX). Written into a scratch buffer that is
    // kept (not zero-filled for every event as a resized string would be).
    thread_local std::vector<char> scratch;
    const size_t need = 1024 + 6 * chars;
    if (scratch.size() < need) scratch.resize(need);
    p_ = scratch.data();
    if (!Body(e)) return false;
    out_->append(scratch.data(), static_cast<size_t>(p_ - scratch.data()));
    if (scratch.size() > (1u << 20)) std::vector<char>().swap(scratch);  // after a huge event
    return true;
  }

 private:
  bool Body(const cordon::v1::AuditEvent& e) {
    if (e.has_resource() || e.has_credential() || e.has_containment() || e.has_repeats() || e.has_dns())
      return false;  // rare (resource.*, credential.*, sandbox.*, repeats, dns.query): protobuf prints those
    Open();
    if (e.has_time() && !Time(e.time())) return false;
    if (!Str("sandbox", e.sandbox()) || !Str("cgroupPath", e.cgroup_path())) return false;
    U64("cgroupId", e.cgroup_id());
    U64("sandboxCgroupId", e.sandbox_cgroup_id());
    U32("pid", e.pid());
    U32("tid", e.tid());
    U32("ppid", e.ppid());
    U32("uid", e.uid());
    U32("gid", e.gid());
    if (!Str("comm", e.comm()) || !Str("exe", e.exe()) || !Str("kind", e.kind()) || !Str("verdict", e.verdict()) ||
        !Str("policy", e.policy()) || !Str("reason", e.reason()))
      return false;
    if (e.has_net()) {
      const auto& n = e.net();
      Key("net");
      Open();
      if (!Str("address", n.address())) return false;
      U32("port", n.port());
      if (!Str("protocol", n.protocol()) || !Str("family", n.family()) || !Str("sockType", n.sock_type())) return false;
      U32("rule", n.rule());
      U32("nameId", n.name_id());
      if (!Str("host", n.host())) return false;
      Close();
    }
    if (e.has_loss()) {
      Key("loss");
      Open();
      U64("dropped", e.loss().dropped());
      U64("firstSeq", e.loss().first_seq());
      U64("lastSeq", e.loss().last_seq());
      Close();
    }
    if (!Str("enforcement", e.enforcement())) return false;
    if (e.has_file()) {
      const auto& f = e.file();
      Key("file");
      Open();
      if (!Str("path", f.path()) || !Str("access", f.access()) || !Str("granted", f.granted())) return false;
      Bool("truncated", f.truncated());
      U64("inode", f.inode());
      U32("device", f.device());
      U32("rule", f.rule());
      Close();
    }
    if (e.has_target()) {
      Key("target");
      Open();
      U32("pid", e.target().pid());
      U32("arg", e.target().arg());
      U32("arg2", e.target().arg2());
      Close();
    }
    if (e.open_files_size() > 0) {
      Key("openFiles");
      *p_++ = '[';
      for (int i = 0; i < e.open_files_size(); ++i) {
        if (i) *p_++ = ',';
        if (!Quoted(e.open_files(i))) return false;
      }
      *p_++ = ']';
    }
    if (e.has_suppressed()) {
      Key("suppressed");
      Open();
      U64("count", e.suppressed().count());
      Bool("final", e.suppressed().final());
      Close();
    }
    Bool("quiet", e.quiet());  // 28: after resource and credential, which protobuf prints
    if (!Str("id", e.id())) return false;  // 31, 32: after containment and repeats, which protobuf prints
    U64("seq", e.seq());
    if (!Str("policyDigest", e.policy_digest())) return false;  // 33
    Close();
    return true;
  }

  void Put(const char* s, size_t n) {
    std::memcpy(p_, s, n);
    p_ += n;
  }
  void Open() {
    *p_++ = '{';
    first_ = true;
  }
  void Close() {
    *p_++ = '}';
    first_ = false;
  }
  template <size_t N>
  void Key(const char (&name)[N]) {
    if (!first_) *p_++ = ',';
    first_ = false;
    *p_++ = '"';
    Put(name, N - 1);
    *p_++ = '"';
    *p_++ = ':';
  }
  void Digits(uint64_t v) {
    char buf[24];
    char* q = buf + sizeof buf;
    do {
      *--q = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    Put(q, static_cast<size_t>(buf + sizeof buf - q));
  }
  template <size_t N>
  void U32(const char (&name)[N], uint32_t v) {
    if (!v) return;
    Key(name);
    Digits(v);
  }
  template <size_t N>
  void U64(const char (&name)[N], uint64_t v) {
    if (!v) return;
    Key(name);
    *p_++ = '"';
    Digits(v);
    *p_++ = '"';
  }
  template <size_t N>
  void Bool(const char (&name)[N], bool v) {
    if (!v) return;
    Key(name);
    Put("true", 4);
  }
  template <size_t N>
  bool Str(const char (&name)[N], const std::string& v) {
    if (v.empty()) return true;
    Key(name);
    return Quoted(v);
  }
  bool Quoted(const std::string& v) {
    static const char kHex[] = "0123456789abcdef";
    *p_++ = '"';
    const unsigned char* q = reinterpret_cast<const unsigned char*>(v.data());
    const unsigned char* end = q + v.size();
    while (q < end) {
      const unsigned char* run = q;
      while (q < end && kPlain[*q]) ++q;
      Put(reinterpret_cast<const char*>(run), static_cast<size_t>(q - run));
      if (q == end) break;
      const unsigned char c = *q++;
      if (c >= 0x80) return false;  // UTF-8: protobuf's rules (and its handling of invalid bytes) apply
      *p_++ = '\\';
      switch (c) {
        case '"': *p_++ = '"'; break;
        case '\\': *p_++ = '\\'; break;
        case '\b': *p_++ = 'b'; break;
        case '\t': *p_++ = 't'; break;
        case '\n': *p_++ = 'n'; break;
        case '\f': *p_++ = 'f'; break;
        case '\r': *p_++ = 'r'; break;
        default: {  // other control characters, '<', '>', DEL
          const char u[5] = {'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
          Put(u, sizeof u);
        }
      }
    }
    *p_++ = '"';
    return true;
  }
  bool Time(const google::protobuf::Timestamp& ts) {
    // The range protobuf accepts: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z.
    constexpr int64_t kMin = -62135596800, kMax = 253402300799;
    int64_t s = ts.seconds();
    int32_t nanos = ts.nanos();
    if (s < kMin || s > kMax || nanos < 0 || nanos > 999999999) return false;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    int64_t days = s >= 0 ? s / 86400 : (s - 86399) / 86400;
    int64_t secs = s - days * 86400;
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2) ++y;
    char buf[40];
    auto put = [&](int pos, int64_t v, int width) {
      for (int i = width - 1; i >= 0; --i, v /= 10) buf[pos + i] = static_cast<char>('0' + v % 10);
    };
    put(0, y, 4);
    buf[4] = '-';
    put(5, m, 2);
    buf[7] = '-';
    put(8, d, 2);
    buf[10] = 'T';
    put(11, secs / 3600, 2);
    buf[13] = ':';
    put(14, secs / 60 % 60, 2);
    buf[16] = ':';
    put(17, secs % 60, 2);
    int n = 19;
    if (nanos) {
      buf[n++] = '.';
      if (nanos % 1000000 == 0) put(n, nanos / 1000000, 3), n += 3;
      else if (nanos % 1000 == 0) put(n, nanos / 1000, 6), n += 6;
      else put(n, nanos, 9), n += 9;
    }
    buf[n++] = 'Z';
    Key("time");
    *p_++ = '"';
    Put(buf, static_cast<size_t>(n));
    *p_++ = '"';
    return true;
  }

  std::string* out_;
  char* p_ = nullptr;
  bool first_ = true;
};

}  // namespace

void AppendJsonLine(const cordon::v1::AuditEvent& event, std::string* out) {
  if (JsonWriter(out).Event(event)) return;
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.preserve_proto_field_names = false;
  (void)google::protobuf::util::MessageToJsonString(event, &json, options);
  out->append(json);
}

std::string ToJsonLine(const cordon::v1::AuditEvent& event) {
  std::string json;
  AppendJsonLine(event, &json);
  return json;
}

// For a terminal: every string goes through DisplayText (the workload chose
// comm, paths and the reasons quoting them; an event read back from a file
// may hold anything).
std::string ToCompactLine(const cordon::v1::AuditEvent& event, bool colour) {
  auto d = [](const std::string& s) { return DisplayText(s); };
  std::string time = google::protobuf::util::TimeUtil::ToString(event.time());
  std::string line = time + " " + d(event.sandbox()) + " ";
  if (event.kind() == "loss") return line + Paint("LOSS", Colour::kRed, colour) + " " + d(event.reason());
  if (event.kind() == "suppressed") return line + Paint("SUPPRESSED", Colour::kYellow, colour) + " " + d(event.reason());
  // An expected event (spec.quiet) says so and is not painted as an alarm.
  line += Paint(d(event.verdict()), event.quiet() ? Colour::kDim : VerdictColour(event.verdict()), colour) +
          (event.quiet() ? " (quiet) " : " ") + d(event.kind()) + " " + d(event.comm()) + "[" +
          std::to_string(event.pid()) + "]";
  const auto& n = event.net();
  if (event.has_net() && !n.address().empty())
    line += (event.kind() == "net.bind" ? " bind " : " -> ") + d(n.address()) + ":" + std::to_string(n.port()) + "/" +
            d(n.protocol());
  else if (event.has_net())
    line += " socket(" + d(n.family()) + ", " + d(n.sock_type()) + ", " + d(n.protocol()) + ")";
  else if (event.has_file())
    line += " " + d(event.file().path());
  if (event.has_repeats()) {
    const auto& r = event.repeats();
    line += (r.pending() ? " x" + std::to_string(r.count()) + " (counted in the kernel, "
                         : " (and " + std::to_string(r.count()) + " more before, ") +
            google::protobuf::util::TimeUtil::ToString(r.first()) + " to " +
            google::protobuf::util::TimeUtil::ToString(r.last()) + ")";
  }
  return line + ": " + d(event.reason());
}

}  // namespace cordon
