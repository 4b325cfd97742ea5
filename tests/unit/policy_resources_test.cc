// spec.resources: every unit spelling, every error with its file:line and field.
#include <gtest/gtest.h>

#include <string>

#include "policy/compiler.h"
#include "policy/describe.h"
#include "policy/parser.h"
#include "policy/resources.h"
#include "tests/unit/policy_section.h"

namespace cordon::policy {
namespace {

using Outcome = SectionOutcome;

// The header is 6 lines; the resources block starts on line 7.
constexpr int kFirstLine = 7;
Outcome CompileResourcesText(const std::string& body) { return CompileSection("resources", body, "r.yaml"); }

// Exactly one error, at r.yaml:<line>, naming `field`, containing `text`.
void ExpectError(const std::string& body, const std::string& field, int line, const std::string& text) {
  ExpectSectionError(CompileResourcesText(body), "r.yaml", field, line, text);
}

TEST(Resources, ByteSizes) {
  struct Case {
    const char* text;
    uint64_t bytes;
  } cases[] = {{"0", 0},
               {"1048576", 1048576},
               {"1Ki", 1024},
               {"512Mi", 512ull << 20},
               {"2Gi", 2ull << 30},
               {"1Ti", 1ull << 40},
               {"1K", 1000},
               {"5M", 5000000},
               {"1G", 1000000000},
               {"2T", 2000000000000},
               {"9223372036854775807", 9223372036854775807ull},
               {"8388607Ti", 8388607ull << 40}};
  for (const Case& c : cases) {
    uint64_t v = 1;
    std::string error;
    EXPECT_TRUE(ParseByteSize(c.text, &v, &error)) << c.text << ": " << error;
    EXPECT_EQ(v, c.bytes) << c.text;
  }
  for (const char* bad : {"", "-1", "1.5Gi", "0.5", "1MB", "1mi", "Mi", "1 Mi", " 1", "1Mi ", "+1", "1e6",
                          "9223372036854775808", "8388608Ti", "99999999999999999999999", "0x10"}) {
    uint64_t v = 7;
    std::string error;
    EXPECT_FALSE(ParseByteSize(bad, &v, &error)) << bad;
    EXPECT_EQ(v, 7u) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  std::string error;
  uint64_t v = 0;
  EXPECT_FALSE(ParseByteSize("-5Mi", &v, &error));
  EXPECT_NE(error.find("negative"), std::string::npos) << error;
  EXPECT_FALSE(ParseByteSize("1.5Gi", &v, &error));
  EXPECT_NE(error.find("fractions"), std::string::npos) << error;
  EXPECT_FALSE(ParseByteSize("8388608Ti", &v, &error));
  EXPECT_NE(error.find("too large"), std::string::npos) << error;
}

TEST(Resources, CpuCores) {
  struct Case {
    const char* text;
    uint64_t millicores;
  } cases[] = {{"1.5", 1500}, {"2", 2000},  {"0.25", 250},       {".5", 500},
               {"3.", 3000},  {"0.01", 10}, {"10000", 10000000}, {"1.125", 1125}};
  for (const Case& c : cases) {
    uint64_t v = 0;
    std::string error;
    EXPECT_TRUE(ParseCpuCores(c.text, &v, &error)) << c.text << ": " << error;
    EXPECT_EQ(v, c.millicores) << c.text;
  }
  for (const char* bad : {"", "0", "0.0", "0.009", "-1", "1.2345", "1,5", "1.5c", ".", "10000.001", "abc", "1e3",
                          "99999999999999999999"}) {
    uint64_t v = 0;
    std::string error;
    EXPECT_FALSE(ParseCpuCores(bad, &v, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(Resources, Durations) {
  struct Case {
    const char* text;
    uint64_t seconds;
  } cases[] = {{"30s", 30},
               {"30m", 1800},
               {"2h", 7200},
               {"1h30m", 5400},
               {"1h2m3s", 3723},
               {"90s", 90},
               {"8760h", 8760ull * 3600}};
  for (const Case& c : cases) {
    uint64_t v = 0;
    std::string error;
    EXPECT_TRUE(ParseDuration(c.text, &v, &error)) << c.text << ": " << error;
    EXPECT_EQ(v, c.seconds) << c.text;
  }
  for (const char* bad : {"", "30", "0s", "0h0m", "30m1h", "1h1h", "1d", "1.5h", "-1s", "h", "8761h",
                          "99999999999999999999s", "1h 30m"}) {
    uint64_t v = 0;
    std::string error;
    EXPECT_FALSE(ParseDuration(bad, &v, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(Resources, PercentAndIntegers) {
  uint64_t v = 0;
  std::string error;
  EXPECT_TRUE(ParsePercent("80%", &v, &error));
  EXPECT_EQ(v, 80u);
  EXPECT_TRUE(ParsePercent("1%", &v, &error));
  EXPECT_TRUE(ParsePercent("100%", &v, &error));
  for (const char* bad : {"0%", "101%", "80", "%", "8.5%", "-1%", "80 %"})
    EXPECT_FALSE(ParsePercent(bad, &v, &error)) << bad;
  EXPECT_TRUE(ParseBoundedInteger("128", 1, kMaxPids, &v, &error));
  EXPECT_EQ(v, 128u);
  for (const char* bad : {"0", "4194305", "-1", "1.0", "12a", "", "99999999999999999999999"})
    EXPECT_FALSE(ParseBoundedInteger(bad, 1, kMaxPids, &v, &error)) << bad;
}

TEST(Resources, TheIssueExampleCompiles) {
  Outcome out = CompileResourcesText(
      "    memory: 512Mi\n    memoryHigh: 400Mi\n    swap: 0\n    pids: 128\n    cpu: \"1.5\"\n"
      "    cpuWeight: 200\n    ioWriteBytesPerSecond: 50Mi\n    wallTime: 30m\n    egressBytes: 1Gi\n"
      "    disk: 2Gi\n    warnAt: 80%\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  const ResourceLimits& r = out.compiled.resources;
  EXPECT_EQ(r.memory, 512ull << 20);
  EXPECT_EQ(r.memory_high, 400ull << 20);
  EXPECT_EQ(r.swap, 0u);
  EXPECT_EQ(r.pids, 128u);
  EXPECT_EQ(r.cpu_millicores, 1500u);
  EXPECT_EQ(r.cpu_weight, 200u);
  EXPECT_EQ(r.io_write_bytes_per_second, 50ull << 20);
  EXPECT_EQ(r.wall_time_seconds, 1800u);
  EXPECT_EQ(r.egress_bytes, 1ull << 30);
  EXPECT_EQ(r.disk, 2ull << 30);
  EXPECT_EQ(r.warn_at_percent, 80u);
  const std::string text = Describe(out.compiled);
  for (const char* line :
       {"  memory: 512Mi  (memory.max)\n", "  swap: 0  (memory.swap.max)\n", "  pids: 128  (pids.max)\n",
        "  cpu: 1.5 cores  (cpu.max)\n",
        "  wallTime: 30m  (cordon run: SIGTERM, then SIGKILL; attach: the agent reports it, "
        "contains with onViolation: contain)\n",
        "  warnAt: 80%  (of memory.max and pids.max: an event (cordon run, the agent); of egressBytes: one "
        "resource.egress event)\n",
        "  egressBytes: 1Gi  (cgroup_skb/egress: bytes sent counted in the kernel, every packet dropped "
        "once over; one resource.egress event at the limit)\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
}

TEST(Resources, OmittedAndNullMeanNoLimit) {
  Outcome out = CompileResourcesText("    memory:\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  EXPECT_FALSE(out.compiled.resources.any());
  EXPECT_EQ(out.compiled.resources, ResourceLimits{});
  EXPECT_NE(Describe(out.compiled).find("resources: no limits"), std::string::npos);
  EXPECT_FALSE(DefaultPolicy().resources.any());
}

TEST(Resources, ErrorsNameFileLineAndField) {
  ExpectError("    pids: 16\n    memory: 1.5Gi\n", "spec.resources.memory", kFirstLine + 1, "fractions");
  ExpectError("    memory: -1Mi\n", "spec.resources.memory", kFirstLine, "negative");
  ExpectError("    memory: 512MB\n", "spec.resources.memory", kFirstLine, "unknown unit 'MB'");
  ExpectError("    memory: 0\n", "spec.resources.memory", kFirstLine, "greater than 0");
  ExpectError("    memory: 99999999Ti\n", "spec.resources.memory", kFirstLine, "too large");
  ExpectError("    memory: \"\"\n", "spec.resources.memory", kFirstLine, "invalid byte size ''");
  ExpectError("    swap: lots\n", "spec.resources.swap", kFirstLine, "invalid byte size");
  ExpectError("    pids: 0\n", "spec.resources.pids", kFirstLine, "out of range");
  ExpectError("    pids: 12.5\n", "spec.resources.pids", kFirstLine, "invalid integer");
  ExpectError("    cpu: \"0\"\n", "spec.resources.cpu", kFirstLine, "too small");
  ExpectError("    cpu: 1.5cores\n", "spec.resources.cpu", kFirstLine, "invalid cpu");
  ExpectError("    cpuWeight: 10001\n", "spec.resources.cpuWeight", kFirstLine, "out of range");
  ExpectError("    ioWriteBytesPerSecond: 50Mi/s\n", "spec.resources.ioWriteBytesPerSecond", kFirstLine,
              "unknown unit");
  ExpectError("    wallTime: 30\n", "spec.resources.wallTime", kFirstLine, "invalid duration");
  ExpectError("    wallTime: 1d\n", "spec.resources.wallTime", kFirstLine, "out of order");
  ExpectError("    egressBytes: 1.5G\n", "spec.resources.egressBytes", kFirstLine, "fractions");
  ExpectError("    disk: 0\n", "spec.resources.disk", kFirstLine, "greater than 0");
  ExpectError("    warnAt: 80\n", "spec.resources.warnAt", kFirstLine, "invalid percentage");
  ExpectError("    warnAt: 120%\n", "spec.resources.warnAt", kFirstLine, "invalid percentage");
  ExpectError("    memory: 256Mi\n    memoryHigh: 512Mi\n", "spec.resources.memoryHigh", kFirstLine + 1,
              "above memory 256Mi");
}

TEST(Resources, UnknownKeyIsAnErrorWithItsLine) {
  Outcome out = CompileResourcesText("    pids: 16\n    memroy: 1Gi\n");
  EXPECT_FALSE(out.ok);
  ASSERT_FALSE(out.diags.empty());
  EXPECT_EQ(out.diags[0].file, "r.yaml");
  EXPECT_EQ(out.diags[0].line, kFirstLine + 1) << out.diags[0].ToString();
  EXPECT_NE(out.diags[0].ToString().find("memroy"), std::string::npos) << out.diags[0].ToString();
}

TEST(Resources, EveryErrorIsReported) {
  Outcome out = CompileResourcesText("    memory: x\n    pids: y\n    cpu: z\n");
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.diags.size(), 3u) << FormatDiagnostics(out.diags);
}

TEST(Resources, DisplayForms) {
  EXPECT_EQ(ByteSizeText(0), "0");
  EXPECT_EQ(ByteSizeText(1023), "1023");
  EXPECT_EQ(ByteSizeText(1024), "1Ki");
  EXPECT_EQ(ByteSizeText(3ull << 30), "3Gi");
  EXPECT_EQ(CpuCoresText(1500), "1.5");
  EXPECT_EQ(CpuCoresText(250), "0.25");
  EXPECT_EQ(CpuCoresText(2000), "2");
  EXPECT_EQ(CpuCoresText(1125), "1.125");
  EXPECT_EQ(DurationText(5400), "1h30m");
  EXPECT_EQ(DurationText(30), "30s");
  EXPECT_EQ(DurationText(3723), "1h2m3s");
}

}  // namespace
}  // namespace cordon::policy
