// AuditEvent -> OCSF (Open Cybersecurity Schema Framework) 1.3.0, one JSON
// object per event, for sinks configured with `format: ocsf` (README "OCSF").
//
// Classes: net.connect/net.sendmsg/net.bind/net.unix/net.socket/net.sockopt
// and net.preexisting -> Network Activity (4001); dns.query -> DNS Activity
// (4003); file.exec -> Process Activity (1007, Launch); other file.* -> File
// System Activity (1001); everything else (tamper.*, resource.*,
// credential.*, sandbox.*, loss, suppressed) -> Base Event (0, Other). The
// verdict is the security_control profile's action_id/disposition_id; the
// process that acted is `actor.process`. Nothing is lost: the whole event,
// as the audit file has it, is `unmapped.cordon`.
#pragma once

#include <string>

#include "event.pb.h"

namespace cordon {

constexpr const char* kOcsfVersion = "1.3.0";

// `hostname`: device.hostname ("" leaves it out). For a message that must
// fit a size (syslog's 8 KiB): `with_original` false leaves unmapped.cordon
// out (unmapped.cordon_omitted true instead), and `max_field` > 0 cuts every
// string the workload chose (paths, comm, exe, reason, names) to that many
// bytes with a "...[cut]" mark (unmapped.cut true), so the object stays whole
// JSON however long they were.
std::string ToOcsfJson(const cordon::v1::AuditEvent& event, const std::string& hostname, bool with_original = true,
                       size_t max_field = 0);

}  // namespace cordon
