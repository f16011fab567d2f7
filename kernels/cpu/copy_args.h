// kernels/cpu/copy_args.h — how the copying kernels (to.device, cat,
// stack) read a call's arguments and check them, shared by the CPU kernels
// (copy.cc) and the CUDA host side (cuda/elementwise_kernels.h), so that
// both devices raise the same errors with the same texts:
//
//   TD_ASSIGN_OR_RETURN(const std::vector<CopyPiece> pieces, ReadCat(ctx));
//   for (const CopyPiece& p : pieces) copy p.src into TensorRef{out.base, &p.view}
//
// Each starts with CheckContext. Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_COPY_ARGS_H_
#define TENSORD_KERNELS_CPU_COPY_ARGS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::cpu {

// to.device(self, ...): self. NotImplemented when outputs[0] is on another
// device than the kernel's (the dispatcher copies between devices);
// outputs[0] must have self's sizes.
absl::StatusOr<TensorRef> ReadToDevice(const KernelContext& ctx);

// One input of cat / stack and where it goes: `view`, metadata of the part
// of outputs[0] it is copied into (src broadcast to it: same sizes).
struct CopyPiece {
  TensorRef src;
  TensorMeta view;
};

// cat(tensors, dim): the pieces in order, 1-D empty tensors skipped
// (PyTorch's legacy rule). Internal errors when the inputs do not tile the
// output along `dim` (the meta function checked them); WrapDim's.
absl::StatusOr<std::vector<CopyPiece>> ReadCat(const KernelContext& ctx);

// stack(tensors, dim): the pieces in order. Internal errors when the
// inputs do not match the output (the meta function checked them);
// WrapDim's.
absl::StatusOr<std::vector<CopyPiece>> ReadStack(const KernelContext& ctx);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_COPY_ARGS_H_
