// kernels/cuda/elementwise_host.h — the host side's helpers for building
// elementwise launches from a kernel call: operands from TensorRefs
// (broadcast to the output's shape, as the CPU's StridedLoop does) or
// constants, Python scalars converted as the CPU kernels convert them, and
// the Status a failed launch becomes. Host code only (abseil; no CUDA
// header).
//
//   TD_ASSIGN_OR_RETURN(uint64_t alpha, ScalarBits("add", ctx.args[2].scalar(), dtype));
//   TD_ASSIGN_OR_RETURN(ElementwiseIter it, MakeIter("add", out, {EwInput::Of(a), EwInput::Of(b)}));
//
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ELEMENTWISE_HOST_H_
#define TENSORD_KERNELS_CUDA_ELEMENTWISE_HOST_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "elementwise_call.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/value.h"

namespace tensord::cuda {

// One input of an elementwise launch: a tensor, broadcast to the output's
// shape, or a constant (bits of its slot's compute type, from ScalarBits).
struct EwInput {
  const TensorRef* tensor = nullptr;
  uint64_t value = 0;

  static EwInput Of(const TensorRef& t) { return EwInput{&t, 0}; }
  static EwInput Constant(uint64_t bits) { return EwInput{nullptr, bits}; }
};

// The launch over every element of `out` with `inputs` (at most
// kMaxOperands - 1). Internal error (naming `op`) when an input does not
// broadcast to out's shape; NotImplemented when more than kMaxDims dims
// remain after merging contiguous ones (PyTorch's CUDA limit too).
absl::StatusOr<ElementwiseIter> MakeIter(absl::string_view op, const TensorRef& out,
                                         std::initializer_list<EwInput> inputs);

// `s` as the compute value of dtype `t` (cpu::ScalarTo: the conversion
// PyTorch applies when a Scalar meets a tensor of dtype t), in a constant's
// bits.
uint64_t ScalarBits(const Scalar& s, ScalarType t);

// The Status of a launch that returned `code` (!= kLaunchOk): an internal
// error naming `op` and, for CUDA errors (code > 0), `cuda_message`.
absl::Status LaunchError(absl::string_view op, int code, absl::string_view cuda_message);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_ELEMENTWISE_HOST_H_
