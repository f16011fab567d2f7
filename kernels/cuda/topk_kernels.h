// kernels/cuda/topk_kernels.h — the host side of the CUDA topk kernel:
// reads the call's arguments as the CPU kernel does (kernels/cpu/index.cc:
// the same checks, errors and dtype set), describes one launch (TopkCall,
// topk.cuh) to `L`, the device (see elementwise_kernels.h), with scratch
// memory from L::Allocate for rows too long for shared memory:
//
//   RegisterTopkKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// The results equal the CPU kernel's bit for bit (values and indices; ties
// lower index first, NaN largest). `sorted` is accepted and, as on the CPU,
// the k values always come sorted. Host code only.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_TOPK_KERNELS_H_
#define TENSORD_KERNELS_CUDA_TOPK_KERNELS_H_

#include <algorithm>
#include <memory>
#include <string>

#include "elementwise_kernels.h"
#include "index_kernels.h"
#include "topk_call.h"

namespace tensord::cuda::ew {

// Scratch memory a long-row topk launch may use at most (its blocks are
// cut down to fit); a row needs padded * 16 bytes.
inline constexpr int64_t kTopkScratchBudget = int64_t{256} << 20;

// How many blocks a topk launch of `rows` rows, each `padded` slots long,
// runs: one per row up to 4096, fewer for long rows so that their scratch
// (blocks * padded * 16 bytes) stays within kTopkScratchBudget.
inline int64_t TopkBlocks(int64_t rows, int64_t padded) {
  int64_t blocks = std::min<int64_t>(rows, 4096);
  if (padded > kTopkSharedSlots) blocks = std::min(blocks, std::max<int64_t>(1, kTopkScratchBudget / (padded * 16)));
  return std::max<int64_t>(blocks, 1);
}

// topk(self, k, dim, largest, sorted) -> (values, indices).
template <class L>
absl::Status Topk(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::TopkArgs a, cpu::ReadTopk(ctx));
  const TensorRef& self_in = a.self;
  const TensorMeta &self = a.self1d, &values = a.values1d, &indices = a.indices1d;
  const int64_t k = a.k, dim = a.dim;
  const bool largest = a.largest;
  const int64_t n = self.sizes[dim];
  if (k == 0 || self.numel() == 0) return absl::OkStatus();
  if (!DtypeInSet(self.dtype, kSetInts | kSetFloats)) return DtypeNotImplemented("topk", self.dtype);
  const int64_t item = self.itemsize();
  // The rows: every dim but `dim`.
  Shape rows, strides[3];
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == dim) continue;
    rows.push_back(self.sizes[d]);
    strides[0].push_back(self.strides[d] * item);
    strides[1].push_back(values.strides[d] * item);
    strides[2].push_back(indices.strides[d] * 8);
  }
  TopkCall call;
  const int64_t* ptrs[3] = {strides[0].data(), strides[1].data(), strides[2].data()};
  if (!BuildGeometry(static_cast<int>(rows.size()), rows.data(), 3, ptrs, &call.geometry)) {
    return NotImplementedErr(absl::StrCat("topk: CUDA topk supports at most ", kMaxDims,
                                          " dimensions besides dim after merging; got ", ShapeToString(self.sizes)));
  }
  call.dtype = self.dtype;
  call.self = self_in.base + self.storage_offset * item;
  call.values = ctx.outputs[0].base + values.storage_offset * item;
  call.indices = ctx.outputs[1].base + indices.storage_offset * 8;
  call.n = n;
  call.k = k;
  call.padded = 1;
  while (call.padded < n) call.padded <<= 1;
  call.self_stride = self.strides[dim] * item;
  call.values_stride = values.strides[dim] * item;
  call.indices_stride = indices.strides[dim] * 8;
  call.largest = largest;
  call.blocks = TopkBlocks(call.geometry.numel(), call.padded);
  std::shared_ptr<char> scratch;
  if (call.padded > kTopkSharedSlots) {
    TD_ASSIGN_OR_RETURN(scratch, L::Allocate("topk", call.blocks * call.padded * 16, ctx.stream));
    call.scratch = scratch.get();
  }
  const int code = L::Topk(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

template <class L>
absl::Status RegisterTopkKernels(KernelRegistry& r, DeviceType device) {
  return r.Register(device, "topk", Topk<L>);
}

}  // namespace tensord::cuda::ew

#endif  // TENSORD_KERNELS_CUDA_TOPK_KERNELS_H_
