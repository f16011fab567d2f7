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

// Heap bytes of a meta's sizes and strides where they do not fit inline (a
// Shape keeps 5 dims in place; 64 dims take a kilobyte more): what each
// copy of the meta costs beyond sizeof(TensorMeta). Counted by size, so
// that the same meta always gives the same number (a charge given back
// must equal the one taken).
inline int64_t MetaHeapBytes(const TensorMeta& m) {
  const auto heap = [](const Shape& s) {
    return s.size() > Shape().capacity() ? static_cast<int64_t>(s.size() * sizeof(int64_t)) : int64_t{0};
  };
  return heap(m.sizes) + heap(m.strides);
}

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SRC_INTERNAL_H_
