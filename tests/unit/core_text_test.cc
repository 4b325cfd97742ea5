// Workload text (util/text.h): the data form is valid UTF-8, lossless and
// free of control characters; the display form cannot steer a terminal.
// Protobuf's own UTF-8 check is the oracle: it is what refused invalid
// strings (and so cut off `cordon tail`).
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "abi/cordon_file.h"
#include "events/decoder.h"
#include "events/json_line.h"
#include "tests/unit/event_records.h"
#include "util/text.h"

namespace cordon {
namespace {

bool ValidUtf8(const std::string& s) { return google::protobuf::internal::IsStructurallyValidUTF8(s); }

// No C0, DEL or C1 control as a raw character (C1 in UTF-8: C2 80..C2 9F).
bool NoControls(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f) return false;
  }
  return true;
}

// Names, paths and reasons an attacker would choose: invalid UTF-8 (a lone
// continuation byte, an overlong '/', a surrogate, a truncated sequence),
// CSI as ESC [ and as the C1 byte, bidi overrides, zero-width characters,
// escapes that look like ours.
const char* const kHostile[] = {
    "\xff\xfe",          "a\x80" "b",         "\xc0\xaf",       "\xed\xa0\x80",     "\xe2\x82",
    "\x1b[2J\x1b[31mroot", "\xc2\x9b" "31m",  "safe\xe2\x80\xaetxt.exe", "a\xe2\x80\x8b" "b",
    "\\x41",             "\\",                "\\\\x",          "line\nbreak\r",    "\xf4\x90\x80\x80",
    "\xef\xbb\xbf" "bom", "tag\xf3\xa0\x80\x81", "\xe2\x81\xa6" "iso",
};

TEST(WorkloadText, DataFormIsValidLosslessAndControlFree) {
  for (const char* raw : kHostile) {
    std::string escaped = EscapeWorkloadBytes(raw);
    EXPECT_TRUE(ValidUtf8(escaped)) << escaped;
    EXPECT_TRUE(NoControls(escaped)) << escaped;
    auto back = UnescapeWorkloadBytes(escaped);
    ASSERT_TRUE(back.has_value()) << escaped;
    EXPECT_EQ(*back, raw);
  }
  // Specific forms: the escapes an operator reads.
  EXPECT_EQ(EscapeWorkloadBytes("\xff/x"), "\\xff/x");
  EXPECT_EQ(EscapeWorkloadBytes("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(EscapeWorkloadBytes("\xc2\x9b"), "\\xc2\\x9b");
  EXPECT_EQ(EscapeWorkloadBytes("\\x41"), "\\\\x41") << "a literal backslash is doubled, so it cannot pose as an escape";
  EXPECT_EQ(EscapeWorkloadBytes("caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80")
      << "well-formed text outside ASCII is kept";
  EXPECT_EQ(EscapeWorkloadBytes("/usr/bin/python3"), "/usr/bin/python3");
}

TEST(WorkloadText, RandomBytesRoundTrip) {
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::string raw(rng() % 40, '\0');
    for (char& c : raw) {
      // Bias towards the interesting bytes: UTF-8 lead and continuation bytes, '\', controls.
      static const unsigned char kPick[] = {0x00, 0x1b, 0x5c, 0x78, 0x7f, 0x80, 0x9b, 0xbf, 0xc2,
                                            0xc3, 0xe0, 0xe2, 0xed, 0xf0, 0xf4, 0xff, 0x41};
      c = static_cast<char>(rng() % 3 ? kPick[rng() % sizeof kPick] : rng());
    }
    std::string escaped = EscapeWorkloadBytes(raw);
    ASSERT_TRUE(ValidUtf8(escaped));
    ASSERT_TRUE(NoControls(escaped));
    auto back = UnescapeWorkloadBytes(escaped);
    ASSERT_TRUE(back.has_value());
    ASSERT_EQ(*back, raw);
    std::string shown = DisplayText(escaped);
    ASSERT_TRUE(ValidUtf8(shown));
    ASSERT_TRUE(NoControls(shown));
    for (size_t max = 0; max <= escaped.size(); max += 3) {
      std::string_view cut = TruncateEscaped(escaped, max);
      ASSERT_LE(cut.size(), max);
      ASSERT_TRUE(ValidUtf8(std::string(cut)));
      ASSERT_TRUE(UnescapeWorkloadBytes(cut).has_value()) << "a cut never splits an escape";
    }
  }
}

TEST(WorkloadText, MalformedEscapesAreRefused) {
  EXPECT_FALSE(UnescapeWorkloadBytes("\\").has_value());
  EXPECT_FALSE(UnescapeWorkloadBytes("\\q").has_value());
  EXPECT_FALSE(UnescapeWorkloadBytes("\\x4").has_value());
  EXPECT_FALSE(UnescapeWorkloadBytes("\\xzz").has_value());
  EXPECT_EQ(UnescapeWorkloadBytes("\\x41\\\\"), "A\\");
}

TEST(WorkloadText, DisplayFormHidesNothingAndSteersNothing) {
  // Bidi override, isolates, zero-width space/joiners, BOM, tags, line separator.
  EXPECT_EQ(DisplayText("safe\xe2\x80\xaetxt.exe"), "safe\\u{202E}txt.exe");
  EXPECT_EQ(DisplayText("a\xe2\x80\x8b" "b"), "a\\u{200B}b");
  EXPECT_EQ(DisplayText("\xe2\x81\xa6" "x"), "\\u{2066}x");
  EXPECT_EQ(DisplayText("\xef\xbb\xbf" "x"), "\\u{FEFF}x");
  EXPECT_EQ(DisplayText("t\xf3\xa0\x80\x81"), "t\\u{E0001}");
  EXPECT_EQ(DisplayText("a\xe2\x80\xa8" "b"), "a\\u{2028}b");
  // Controls and invalid bytes, should text that did not go through the data form reach it.
  EXPECT_EQ(DisplayText("\x1b[2J\xc2\x9b\xff"), "\\x1b[2J\\xc2\\x9b\\xff");
  // Data-form text shows as it is stored: backslashes are not doubled again.
  EXPECT_EQ(DisplayText(EscapeWorkloadBytes("\\x41\xff")), "\\\\x41\\xff");
  EXPECT_EQ(DisplayText("caf\xc3\xa9"), "caf\xc3\xa9");
  for (const char* raw : kHostile) {
    std::string shown = DisplayText(EscapeWorkloadBytes(raw));
    EXPECT_EQ(shown.find("\xe2\x80\xae"), std::string::npos);
    EXPECT_EQ(shown.find("\xe2\x80\x8b"), std::string::npos);
    EXPECT_TRUE(NoControls(shown)) << shown;
  }
}

TEST(WorkloadText, OperatorNamesMustBeClean) {
  EXPECT_TRUE(IsCleanName("agent-1.build_7"));
  EXPECT_TRUE(IsCleanName("caf\xc3\xa9"));
  EXPECT_FALSE(IsCleanName("a\xff"));
  EXPECT_FALSE(IsCleanName("a\x1b[31m"));
  EXPECT_FALSE(IsCleanName("a\xe2\x80\xae"));
  EXPECT_FALSE(IsCleanName("a\\b"));
}

// Through the decoder: every string of a record with hostile comm and path
// serializes, parses back (the tail's frames), and is shown safely.
TEST(WorkloadText, HostileRecordsSurviveEveryForm) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  const SandboxContext sandbox{42, "agent-1", "build-agent", "/sandboxes/\xff\x1b[1m"};
  for (const char* raw : kHostile) {
    auto r = testing::MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_FILE_RULE, std::string("/w/") + raw);
    r.fe.hdr.verdict = CORDON_VERDICT_DETECTED;
    r.fe.hdr.layer = CORDON_LAYER_DETECT;
    r.fe.access = CORDON_FILE_READ;
    std::strncpy(r.fe.hdr.comm, raw, sizeof r.fe.hdr.comm - 1);
    auto event = decoder.Decode(r.data(), r.size(), sandbox);
    ASSERT_TRUE(event.ok()) << event.error().ToString();
    EXPECT_EQ(UnescapeWorkloadBytes(event->file().path()), std::string("/w/") + raw);
    EXPECT_EQ(UnescapeWorkloadBytes(event->comm()), std::string(raw).substr(0, 15));
    EXPECT_EQ(UnescapeWorkloadBytes(event->cgroup_path()), "/sandboxes/\xff\x1b[1m");
    for (const std::string* s : {&event->file().path(), &event->comm(), &event->reason(), &event->cgroup_path()}) {
      EXPECT_TRUE(ValidUtf8(*s)) << *s;
      EXPECT_TRUE(NoControls(*s)) << *s;
    }
    std::string wire;
    ASSERT_TRUE(event->SerializeToString(&wire));
    cordon::v1::AuditEvent back;
    ASSERT_TRUE(back.ParseFromString(wire)) << "a frame the tail can read";
    EXPECT_EQ(back.file().path(), event->file().path());
    std::string json = ToJsonLine(*event);
    cordon::v1::AuditEvent parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
    EXPECT_EQ(parsed.file().path(), event->file().path());
    std::string compact = ToCompactLine(*event);
    EXPECT_TRUE(NoControls(compact)) << compact;
    EXPECT_EQ(compact.find("\xe2\x80\xae"), std::string::npos) << compact;
  }
}

}  // namespace
}  // namespace cordon
