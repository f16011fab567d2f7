// kernels/cuda/topk_call.h — what one topk launch is, as the host side
// (topk_kernels.h) describes it to the device side (topk.cu): for every
// slice of `self` along the topk dim (a row), its k first elements in the
// CPU kernel's order, values and int64 indices. Plain C++ (no CUDA header),
// so host code builds calls and the host tests run them.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_TOPK_CALL_H_
#define TENSORD_KERNELS_CUDA_TOPK_CALL_H_

#include <cstdint>

#include "offset_calculator.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

// Rows whose padded length (the power of two >= n) is at most this many
// slots sort in shared memory (16 bytes a slot: 32 KiB); longer ones in
// scratch memory of TopkScratchBytes.
inline constexpr int64_t kTopkSharedSlots = 2048;
// Threads of a block: one block sorts one row at a time.
inline constexpr int kTopkThreads = 256;

struct TopkCall {
  ScalarType dtype = ScalarType::kFloat32;  // self's and values'
  const char* self = nullptr;
  char* values = nullptr;
  char* indices = nullptr;  // int64
  // The rows: self's shape with the topk dim dropped, 3 operands (0 self,
  // 1 values, 2 indices) with byte strides.
  ElementwiseGeometry geometry;
  int64_t n = 0;        // the row's length (self's size along the dim), >= 1
  int64_t k = 0;        // 1..n
  int64_t padded = 0;   // the power of two >= n
  // Byte strides along the topk dim.
  int64_t self_stride = 0, values_stride = 0, indices_stride = 0;
  bool largest = true;
  // Blocks of the launch, and for padded > kTopkSharedSlots their sort
  // space: blocks * padded * 16 bytes of device memory (else null).
  int64_t blocks = 1;
  char* scratch = nullptr;
};

// Launches `call` on the CUDA stream `stream`; a LaunchCode or the launch's
// cudaError_t. Defined in topk.cu, built only with CUDA.
int LaunchTopkCuda(const TopkCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_TOPK_CALL_H_
