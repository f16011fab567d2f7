// kernels/cpu/shape_args.h — how the backward-of-a-view kernels
// (select_backward, slice_backward, diagonal_backward) and roll read a
// call's arguments and check them, shared by the CPU kernels (scatter.cc,
// shape.cc) and the CUDA host side (cuda/shape_kernels.h), so that both
// devices raise the same errors with the same texts:
//
//   TD_ASSIGN_OR_RETURN(const ViewBackwardArgs a, ReadSelectBackward(ctx));
//   // out = zeros, then the view a.view of out = a.grad
//
// Each starts with CheckContext and checks outputs[0]'s sizes (internal
// errors: the meta function decides them). Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_SHAPE_ARGS_H_
#define TENSORD_KERNELS_CPU_SHAPE_ARGS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::cpu {

// A negative dim counted from the end (a 0-dim tensor counts as rank 1),
// unchecked: the meta function checked it.
inline int64_t WrapDimUnchecked(int64_t d, int64_t rank) { return d < 0 ? d + (rank > 1 ? rank : 1) : d; }

// The backward of a view op (grad_output, input_sizes, ...): out =
// zeros(input_sizes), then `view` (metadata of a view of outputs[0]) =
// grad, grad broadcast to the view's sizes.
struct ViewBackwardArgs {
  TensorRef grad;
  TensorMeta view;
};

// select_backward(grad_output, input_sizes, dim, index). IndexError for a
// 0-dim input and for an index out of range.
absl::StatusOr<ViewBackwardArgs> ReadSelectBackward(const KernelContext& ctx);

// slice_backward(grad_output, input_sizes, dim, start, end, step): start
// and end clamped as Python slices. IndexError for a 0-dim input,
// RuntimeError for a step <= 0.
absl::StatusOr<ViewBackwardArgs> ReadSliceBackward(const KernelContext& ctx);

// diagonal_backward(grad_output, input_sizes, offset, dim1, dim2).
// Errors: DiagonalView's.
absl::StatusOr<ViewBackwardArgs> ReadDiagonalBackward(const KernelContext& ctx);

// flip(self, dims): self and, per dim of self, whether it is flipped
// (dims wrapped; the meta function checked them). outputs[0] must have
// self's sizes.
struct FlipArgs {
  TensorRef self;
  std::vector<bool> flipped;
};
absl::StatusOr<FlipArgs> ReadFlip(const KernelContext& ctx);

// repeat(self, repeats): self and `lead`, how many leading dims the output
// adds (internal error when it has fewer dims than self).
struct RepeatArgs {
  TensorRef self;
  int64_t lead = 0;
};
absl::StatusOr<RepeatArgs> ReadRepeat(const KernelContext& ctx);

// roll(self, shifts, dims). `flat`: no dims, the flattened roll, output j
// reading input (j - shift[0]) mod numel; else output j along dim d reads
// input (j - shift[d]) mod size(d). Shifts are in [0, size); all 0 for an
// empty self (nothing to do).
struct RollArgs {
  TensorRef self;
  bool flat = false;
  Shape shift;  // flat: one entry; else one per dim of self
};
absl::StatusOr<RollArgs> ReadRoll(const KernelContext& ctx);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_SHAPE_ARGS_H_
