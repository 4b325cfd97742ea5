// The agent part of `cordon status`: its StatusReply as text or JSON.
#pragma once

#include <string>

#include "control.pb.h"

namespace cordon::cli {

std::string AgentStatusText(const cordon::v1::StatusReply& status);
std::string AgentStatusJson(const cordon::v1::StatusReply& status);

}  // namespace cordon::cli
