// The audit trail as cordon learn reads it (events/learn_trail.h): events as
// observations, records of loss counted, lines that are no event counted.
#include <gtest/gtest.h>

#include "abi/cordon_file.h"
#include "events/json_line.h"
#include "events/learn_trail.h"

namespace cordon {
namespace {

std::string Line(const cordon::v1::AuditEvent& e) { return ToJsonLine(e) + "\n"; }

TEST(LearnTrail, EventsBecomeObservationsAndLossesAreCounted) {
  cordon::v1::AuditEvent open;
  open.set_kind("file.open");
  open.set_verdict("detected");
  open.set_enforcement("detect");
  open.mutable_file()->set_path("/work/a\\\\b\\x01c");  // the escaped form: "a\b" then byte 0x01
  open.mutable_file()->set_access("read,write");
  cordon::v1::AuditEvent connect;
  connect.set_kind("net.connect");
  connect.set_verdict("audited");
  connect.mutable_net()->set_address("127.0.0.1");
  connect.mutable_net()->set_port(8080);
  connect.mutable_net()->set_protocol("tcp");
  connect.mutable_net()->set_family("inet");
  cordon::v1::AuditEvent unix_hook;
  unix_hook.set_kind("net.unix");
  unix_hook.set_verdict("audited");
  unix_hook.set_enforcement("kernel-cgroup");
  unix_hook.mutable_file()->set_path("run/x.sock");
  cordon::v1::AuditEvent loss;
  loss.set_kind("loss");
  loss.mutable_loss()->set_dropped(17);
  cordon::v1::AuditEvent suppressed;
  suppressed.set_kind("suppressed");
  suppressed.mutable_suppressed()->set_count(5);
  cordon::v1::AuditEvent credential;
  credential.set_kind("credential.issued");
  credential.set_verdict("noted");
  cordon::v1::AuditEvent resource;
  resource.set_kind("resource.pids");
  resource.set_verdict("denied");
  cordon::v1::AuditEvent preexisting;
  preexisting.set_kind("file.preexisting");
  preexisting.set_verdict("listed");

  const std::string text = "{\"kind\":\"chain.start\",\"chainStart\":{\"previous\":\"\"}}\n" + Line(open) +
                           Line(connect) + Line(unix_hook) + Line(loss) + Line(suppressed) + Line(credential) +
                           Line(resource) + Line(preexisting) + "not json\n\n" +
                           Line(open).substr(0, 20);  // a torn last line
  const LearnTrail trail = ReadLearnTrail(text);
  EXPECT_EQ(trail.events, 8u);
  EXPECT_EQ(trail.lost, 17u);
  EXPECT_EQ(trail.suppressed, 5u);
  EXPECT_EQ(trail.unreadable, 2u);
  ASSERT_EQ(trail.observations.size(), 3u);
  const policy::Observation& o = trail.observations[0];
  EXPECT_EQ(o.kind, "file.open");
  EXPECT_EQ(o.path, std::string("/work/a\\b\x01"
                                "c"));
  EXPECT_EQ(o.access, static_cast<uint32_t>(CORDON_FILE_READ | CORDON_FILE_WRITE));
  EXPECT_FALSE(o.path_as_written);
  const policy::Observation& c = trail.observations[1];
  EXPECT_EQ(c.kind, "net.connect");
  EXPECT_EQ(c.address, "127.0.0.1");
  EXPECT_EQ(c.port, 8080u);
  EXPECT_EQ(c.protocol, "tcp");
  EXPECT_TRUE(trail.observations[2].path_as_written) << "the cgroup unix hooks report the address as written";
}

// Repeated accesses are one observation (a window of a busy workload holds
// many); a connection the retroactive check of an attach found open and the
// policy denies is a connect to its destination; open files are counted.
TEST(LearnTrail, RepeatsAreOneObservationAndPreexistingConnectionsAreDestinations) {
  LearnTrail trail;
  cordon::v1::AuditEvent connect;
  connect.set_kind("net.connect");
  connect.set_verdict("audited");
  connect.mutable_net()->set_address("127.0.0.1");
  connect.mutable_net()->set_port(8080);
  connect.mutable_net()->set_protocol("tcp");
  for (int i = 0; i < 1000; ++i) trail.Add(connect);
  cordon::v1::AuditEvent other = connect;
  other.mutable_net()->set_port(8081);
  trail.Add(other);
  cordon::v1::AuditEvent kept;  // audit mode: the check keeps it, and says the policy denies it
  kept.set_kind("net.preexisting");
  kept.set_verdict("audited");
  kept.set_enforcement("sock_diag");
  kept.mutable_net()->set_address("10.1.2.3");
  kept.mutable_net()->set_port(5432);
  kept.mutable_net()->set_protocol("tcp");
  trail.Add(kept);
  cordon::v1::AuditEvent files;
  files.set_kind("file.preexisting");
  files.set_verdict("listed");
  files.mutable_file()->set_path("/var/log/app.log");
  trail.Add(files);
  cordon::v1::AuditEvent env;
  env.set_kind("credential.exposed");
  env.set_verdict("detected");
  trail.Add(env);
  EXPECT_EQ(trail.events, 1004u);
  ASSERT_EQ(trail.observations.size(), 3u);
  EXPECT_EQ(trail.observations[0].port, 8080u);
  EXPECT_EQ(trail.observations[1].port, 8081u);
  const policy::Observation& p = trail.observations[2];
  EXPECT_EQ(p.kind, "net.connect");
  EXPECT_EQ(p.address, "10.1.2.3");
  EXPECT_EQ(p.port, 5432u);
  EXPECT_EQ(p.protocol, "tcp");
  EXPECT_EQ(trail.preexisting_connections, 1u);
  EXPECT_EQ(trail.preexisting_files, 1u);
  // Not a record of a denied connection: nothing to learn from.
  policy::Observation o;
  cordon::v1::AuditEvent listed = kept;
  listed.set_verdict("listed");
  EXPECT_FALSE(PreexistingObservationOf(listed, &o));
  EXPECT_FALSE(PreexistingObservationOf(files, &o));
}

}  // namespace
}  // namespace cordon
