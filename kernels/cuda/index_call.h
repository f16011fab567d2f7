// kernels/cuda/index_call.h — what one indexing launch is, as the host side
// (index_kernels.h) describes it to the device side (index.cu): gather-like
// reads through an index (gather, index_select) and scatter-like writes
// through one (scatter.src, scatter.value, scatter_add, index_add). Plain C++ (no CUDA
// header), so host code builds calls and the host tests run them.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_INDEX_CALL_H_
#define TENSORD_KERNELS_CUDA_INDEX_CALL_H_

#include <cstdint>

#include "offset_calculator.h"
#include "tensord/kernels/device_error.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

enum class IndexOp : int {
  // One thread per output element i (geometry: operands 0 out, 1 index,
  // 2 src with stride 0 along the indexed dim):
  // out[i] = src[i + index[i] * dim_stride].
  kGather,
  // One thread per element of `out` along the indexed dim in each row
  // (geometry over the other dims: operands 0 out, 1 index, 2 src; the
  // indexed dim is walked with the strides below). The thread scans the
  // row's `scan_count` indices in order and, for each equal to its
  // position: kScatter stores src (or `value`), so the last write wins as
  // on the CPU; kScatterAdd adds alpha * src (scatter_add: alpha 1;
  // index_add: one index vector for every row, index stride 0). Each output element has one writer,
  // so results are deterministic and equal the CPU's bit for bit, with no
  // atomics (PyTorch's CUDA scatter_add uses float atomics and is not).
  kScatter,
  kScatterAdd,
};

struct IndexCall {
  IndexOp op = IndexOp::kGather;
  ScalarType dtype = ScalarType::kFloat32;        // out's and src's
  ScalarType index_dtype = ScalarType::kInt64;    // kInt64 or kInt32
  char* out = nullptr;
  const char* index = nullptr;
  const char* src = nullptr;  // null for kScatter with `value`
  uint64_t value = 0;         // kScatter without src: the element's bytes (little end first)
  uint64_t alpha = 0;         // kScatterAdd: the bytes of alpha as ComputeT<dtype> (the CPU's ScalarTo)
  ElementwiseGeometry geometry;
  // The indexed dim: its number (for the error word), its size (an index
  // must lie in [0, dim_size)), and the indexed operand's byte stride along
  // it (kGather: src's; the scatters: out's).
  int64_t dim = 0;
  int64_t dim_size = 0;
  int64_t dim_stride = 0;
  // The scatters: indices per row, and index's and src's byte strides along
  // the indexed dim.
  int64_t scan_count = 0;
  int64_t scan_index_stride = 0;
  int64_t scan_src_stride = 0;
  // Where a bad index is recorded (device memory of the stream's word) and
  // the op that records it.
  DeviceErrorWord* error_word = nullptr;
  uint32_t op_id = 0;
};

// Launches `call` on the CUDA stream `stream`; a LaunchCode or the launch's
// cudaError_t. Defined in index.cu, built only with CUDA.
int LaunchIndexCuda(const IndexCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_INDEX_CALL_H_
