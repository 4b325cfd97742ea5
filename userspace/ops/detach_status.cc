// Detach and status, directly.
#include "ops/ops.h"

namespace cordon::ops {

DetachOutcome Detach(const DetachRequest& request) {
  DetachOutcome out;
  cordon::Status detached = DetachSandbox(request.sandbox_id);
  if (!detached.ok())
    out.error = detached.error().ToString();
  else
    out.detached = true;
  return out;
}

StatusOutcome Status() {
  StatusOutcome out;
  auto list = ListSandboxes();
  if (!list)
    out.error = list.error().ToString();
  else
    out.sandboxes = std::move(*list);
  return out;
}

}  // namespace cordon::ops
