// How the CLI renders outcomes (userspace/cli): attach/update and the
// summary line of `cordon run`. No root needed.
#include <gtest/gtest.h>

#include "cli/attach_report.h"
#include "cli/run_events.h"

namespace cordon::cli {
namespace {

ops::AttachOutcome Attached() {
  ops::AttachOutcome out;
  out.sandbox_id = 4242;
  out.name = "job-1";
  out.cgroup = "/sys/fs/cgroup/unified/agents/job-1";
  out.policy = "web";
  out.mode = "enforce";
  out.retro_summary = "retroactive check: no connection or open file the policy denies";
  return out;
}

TEST(AttachReport, AttachLineNotesThenSummary) {
  ops::AttachOutcome out = Attached();
  out.notes = {"profile path absent on this host, skipped: /opt/x"};
  AttachReport r = RenderAttachOutcome(out);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.head,
            "cordon: attached sandbox 'job-1' on /sys/fs/cgroup/unified/agents/job-1 (cgroup id 4242): policy 'web', "
            "mode enforce\n"
            "cordon: note: profile path absent on this host, skipped: /opt/x\n");
  EXPECT_EQ(r.events, "");
  EXPECT_EQ(r.tail, "cordon: retroactive check: no connection or open file the policy denies\n");
}

TEST(AttachReport, ReplacementSaysHowLongTheSwapTook) {
  ops::AttachOutcome out = Attached();
  out.replaced = true;
  out.swap_ns = 12345;
  AttachReport r = RenderAttachOutcome(out);
  EXPECT_NE(r.head.find("cordon: replaced policy of sandbox 'job-1'"), std::string::npos) << r.head;
  EXPECT_NE(r.head.find("cordon: the network programs were swapped in 12.3 us (each hook atomically)\n"),
            std::string::npos)
      << r.head;
}

TEST(AttachReport, ErrorIsOneLineAndStatusOne) {
  ops::AttachOutcome out;
  out.error = "no sandbox is attached to /x";
  AttachReport r = RenderAttachOutcome(out);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.head, "cordon: no sandbox is attached to /x\n");
  EXPECT_EQ(r.events + r.tail, "");
}

TEST(AttachReport, RetroactiveEventsGoToStdoutAndFailuresFail) {
  ops::AttachOutcome out = Attached();
  cordon::v1::AuditEvent event;
  event.set_kind("net.connect");
  event.set_verdict("destroyed");
  out.retro_events = {event, event};
  out.retro_destroy_failed = 1;
  AttachReport r = RenderAttachOutcome(out);
  EXPECT_EQ(r.status, 1);
  size_t lines = 0;
  for (char c : r.events) lines += c == '\n';
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(r.events.find("\"kind\":\"net.connect\""), std::string::npos) << r.events;
  EXPECT_NE(r.tail.find("1 pre-existing connection(s) the policy denies could not be destroyed"), std::string::npos)
      << r.tail;

  ops::AttachOutcome failed = Attached();
  failed.retro_error = "sock_diag: Operation not permitted";
  AttachReport f = RenderAttachOutcome(failed);
  EXPECT_EQ(f.status, 1);
  EXPECT_EQ(f.tail, "cordon: attached, but retroactive check failed: sock_diag: Operation not permitted\n");
}

TEST(RunSummaryLine, NoViolations) {
  RunSummary s;
  EXPECT_EQ(SummaryLine(s), "no violations");
  s.lost = 3;
  EXPECT_EQ(SummaryLine(s), "no violations; 3 events LOST (ring buffer full)");
}

TEST(RunSummaryLine, CountsByVerdictAndKind) {
  RunSummary s;
  s.denied = 2;
  s.killed = 1;
  s.by_kind = {{"net.connect", 2}, {"file.open", 1}};
  s.suppressed = 5;
  s.not_received = 4;
  EXPECT_EQ(SummaryLine(s),
            "3 violations (2 denied, 0 audited, 1 killed: file.open x1 net.connect x2); 5 more suppressed by the "
            "agent's rate limit (counted, not logged); 4 events not received from the agent (its audit log has them)");
  RunSummary one;
  one.audited = 1;
  one.by_kind = {{"exec", 1}};
  EXPECT_EQ(SummaryLine(one), "1 violation (0 denied, 1 audited: exec x1)");
}

}  // namespace
}  // namespace cordon::cli
