// The non-template parts of the CUDA shape kernels' host side
// (shape_kernels.h), and CudaLaunch's shape launches (cuda_launch.h).
#include "shape_kernels.h"

#include <cstring>
#include <memory>

#include "../cpu/dtypes.h"
#include "cuda_launch.h"

namespace tensord::cuda {

int CudaLaunch::Remap(const RemapCall& call, void* stream) { return LaunchRemapCuda(call, stream); }

int CudaLaunch::Sequence(const SequenceCall& call, void* stream) { return LaunchSequenceCuda(call, stream); }

namespace ew {

absl::StatusOr<RemapCall> NewRemap(absl::string_view op, const TensorRef& out, const TensorRef& src) {
  TD_INTERNAL_CHECK(src.meta->itemsize() == out.meta->itemsize(), op, ": source and output element sizes differ");
  if (out.meta->dim() > kMaxRemapDims) {
    return NotImplementedErr(absl::StrCat(op, ": CUDA shape kernels support at most ", kMaxRemapDims,
                                          " dimensions; got ", ShapeToString(out.meta->sizes)));
  }
  RemapCall call;
  call.itemsize = out.meta->itemsize();
  call.out = out.data_at_offset();
  call.src = src.data_at_offset();
  call.ndim = static_cast<int>(out.meta->dim());
  return call;
}

absl::StatusOr<uint64_t> ElementBits(const Scalar& value, ScalarType dtype) {
  TD_ASSIGN_OR_RETURN(std::unique_ptr<cpu::TempTensor> fill, cpu::TempTensor::Make({}, dtype));
  TD_RETURN_IF_ERROR(cpu::Fill(fill->ref(), value));
  uint64_t bits = 0;
  TD_INTERNAL_CHECK(fill->meta().itemsize() <= static_cast<int64_t>(sizeof(bits)), "fill value: element size");
  std::memcpy(&bits, fill->data(), static_cast<size_t>(fill->meta().itemsize()));
  return bits;
}

absl::Status SetLinspaceBounds(const Scalar& start, const Scalar& end, SequenceCall* call) {
  return cpu::Dispatch<cpu::kSetNumeric>(call->dtype, "linspace", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    // The CPU kernel's StepT (kernels/cpu/factory.cc), and the device's
    // (LinspaceStepT in shape.cuh): the same C++ type for each dtype.
    using StepT = std::conditional_t<std::is_same_v<T, double>, double,
                                     std::conditional_t<cpu::kIsFloat<T>, float, double>>;
    const StepT s = static_cast<StepT>(cpu::ScalarTo<T>(start));
    const StepT e = static_cast<StepT>(cpu::ScalarTo<T>(end));
    // steps == 1 reads only start; steps == 0 reads nothing.
    const StepT step = call->n > 1 ? (e - s) / static_cast<StepT>(call->n - 1) : StepT(0);
    call->start = call->end = call->step = 0;
    std::memcpy(&call->start, &s, sizeof(s));
    std::memcpy(&call->end, &e, sizeof(e));
    std::memcpy(&call->step, &step, sizeof(step));
    return absl::OkStatus();
  });
}

}  // namespace ew
}  // namespace tensord::cuda
