// tensord/meta/autograd_rules.h — which inputs and outputs of an op take part
// in autograd. The client (to answer `requires_grad` and `grad_fn` without a
// round trip) and the daemon (to record the graph) apply the same rules, so
// both always agree.
//
// Follows PyTorch: an op's output requires grad when grad mode is on, the op
// is differentiable, some differentiable input requires grad, and the output
// has a floating dtype (integer and bool outputs, such as argmax or the
// indices of max.dim, never require grad).
#ifndef TENSORD_META_AUTOGRAD_RULES_H_
#define TENSORD_META_AUTOGRAD_RULES_H_

#include <string>
#include <vector>

#include "tensord/meta/dtype.h"
#include "tensord/meta/op_table.h"

namespace tensord {

// Floating dtypes (float16, bfloat16, float32, float64, float8_*) can carry
// gradients; bool and integer dtypes cannot ("only Tensors of floating point
// and complex dtype can require gradients", as PyTorch).
bool IsDifferentiableDtype(ScalarType dtype);

// Per schema argument of `op`: true when the argument is a tensor (or a
// tensor list) whose gradient the op's derivative formula gives. False for
// every argument of an op flagged kNotDifferentiable, for non-tensor
// arguments, and for integer/bool-only roles named index, indices, mask,
// condition and target.
const std::vector<bool>& DifferentiableArgs(const OpEntry& op);

// PyTorch's grad_fn class name for a node recording `op`: the base name in
// CamelCase plus "Backward0" ("add" -> "AddBackward0", "log_softmax" ->
// "LogSoftmaxBackward0"); in-place ops drop the trailing underscore.
std::string GradFnName(const OpEntry& op);

}  // namespace tensord

#endif  // TENSORD_META_AUTOGRAD_RULES_H_
