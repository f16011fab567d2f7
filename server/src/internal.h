// Helpers shared by the session's files (session.cc, session_autograd.cc).
#ifndef TENSORD_SERVER_SRC_INTERNAL_H_
#define TENSORD_SERVER_SRC_INTERNAL_H_

#include <vector>

#include "absl/types/span.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/value.h"
#include "tensord/server/autograd.h"

namespace tensord::server {

// True when the derivative of in-place `op` reads self's value from before
// the op (so recording it saves a clone of self first).
bool InplaceNeedsOriginalSelf(const OpEntry& op);
// True when some differentiable argument of `op` (autograd_rules.h) is a
// tensor of `inputs` that requires grad. `args` point at `inputs`' metas.
bool AnyDifferentiableInputRequiresGrad(const OpEntry& op, absl::Span<const Value> args,
                                        const std::vector<Tensor*>& inputs);

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SRC_INTERNAL_H_
