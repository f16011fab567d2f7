// kernels/cuda/advindex_call.h — what one launch of the advanced-indexing
// and mask kernels is, as the host side (advindex_kernels.h) describes it to
// the device side (advindex.cu): index.Tensor and index_put (offsets from
// several broadcast index tensors, then a gather, or sorted writes), and the
// mask ops nonzero, masked_select and masked_scatter (flags, a prefix sum,
// then a fill). Plain C++ (no CUDA header), so host code builds calls and
// the host tests run them.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ADVINDEX_CALL_H_
#define TENSORD_KERNELS_CUDA_ADVINDEX_CALL_H_

#include <cstddef>
#include <cstdint>

#include "offset_calculator.h"
#include "tensord/kernels/device_error.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

// Each op runs one thread per element of `geometry` (3 operands, byte
// offsets o0, o1, o2 from out, in and src). "Positions" are int64 arrays in
// row-major order of a shape (contiguous), so o0 / 8 is an element's
// row-major number whatever order the geometry walks it in.
enum class AdvOp : int {
  // Over the broadcast index shape B: o0 offs (int64 positions), o1 one
  // index tensor broadcast to B. v = index (int32 or int64); v outside
  // [-dim_size, dim_size) is recorded in the error word (dim `dim`) and
  // makes offs -1; else offs (= when `first`, += otherwise) (v wrapped) *
  // dim_stride. An offs already -1 stays -1 (an earlier index was bad).
  kIndexOffsets,
  // Over B: o0 int64 positions := o1 (the byte offset of operand 1 there:
  // where a tensor broadcast over B starts for each element of B).
  kOffsetOf,
  // Over the result: o0 out, o1 offs (byte strides over B's dims, 0 on the
  // others), o2 src (0 on B's dims): out = src[o2 + offs], nothing when
  // offs is -1.
  kGatherOffsets,
  // index_put's writes. Over (j, the result's other dims): o0 out (0 on j),
  // o1 `keys` (8 on j, 0 elsewhere), o2 values (0 on j). keys: the
  // destinations' byte offsets over B sorted (stably) ascending, `vals`
  // (in) the matching values' byte offsets over B. A run of equal keys is
  // one destination, written by one thread: without `accumulate` the run's
  // last (the CPU's last write in row-major order), with it the first,
  // which adds the whole run in order. Keys of -1 (a bad index) are skipped.
  kPutSorted,
  // Over a shape: o0 flags (int64 positions), o1 a tensor of `dtype`
  // broadcast to it: flags = its element != 0 (masks: kUInt8, the byte).
  kMaskFlags,
  // Over the positions [n] of a shape of `ndim` sizes `sizes`: o0 flags,
  // `incl` (in) their inclusive prefix sum at the same offset. A set flag
  // at row-major p writes p's coordinates into row incl-1 of `out` (int64,
  // element strides out_stride0 rows, out_stride1 columns).
  kNonzeroFill,
  // Over a shape: o0 flags, o1 src broadcast to it. A set flag writes src's
  // element to out[(incl - 1) * out_stride0] (bytes).
  kMaskedSelectFill,
  // Over a shape: o0 flags, o1 out. A set flag with r = incl - 1 <
  // `src_numel` writes the contiguous src's element r there. The thread of
  // the last position checks the total (its incl) against src_numel and
  // records kSourceTooShort when src is short.
  kMaskedScatterFill,
};

struct AdvIndexCall {
  AdvOp op = AdvOp::kIndexOffsets;
  int32_t itemsize = 4;                         // bytes of out's / src's element (kGatherOffsets, the fills, kPutSorted)
  ScalarType dtype = ScalarType::kFloat32;      // kPutSorted with accumulate, kMaskFlags: the element's dtype
  ScalarType index_dtype = ScalarType::kInt64;  // kIndexOffsets: kInt64 or kInt32
  char* out = nullptr;
  const char* in = nullptr;
  const char* src = nullptr;
  const char* keys = nullptr;  // kPutSorted
  const char* vals = nullptr;  // kPutSorted: values' byte offsets; the fills: incl
  ElementwiseGeometry geometry;
  bool first = false;       // kIndexOffsets
  bool accumulate = false;  // kPutSorted
  int64_t dim = 0, dim_size = 0, dim_stride = 0;  // kIndexOffsets
  int64_t count = 0;        // kPutSorted: keys; the fills: positions
  int64_t src_numel = 0;    // kMaskedScatterFill
  int64_t out_stride0 = 0, out_stride1 = 0;
  int32_t ndim = 0;         // kNonzeroFill
  int64_t sizes[kMaxDims] = {};
  DeviceErrorWord* error_word = nullptr;
  uint32_t op_id = 0;
};

// Launches `call` on the CUDA stream `stream`; a LaunchCode or the launch's
// cudaError_t. Defined in advindex.cu, built only with CUDA.
int LaunchAdvIndexCuda(const AdvIndexCall& call, void* stream);

// CUB's inclusive sum and stable radix sort of n int64s (pairs) in device
// memory, on `stream` (advindex.cu). With `temp` null they only set
// *temp_bytes, the scratch the call then needs at `temp`. A cudaError_t.
int InclusiveSumCuda(void* temp, size_t* temp_bytes, const int64_t* in, int64_t* out, int64_t n, void* stream);
int SortPairsCuda(void* temp, size_t* temp_bytes, const int64_t* keys_in, int64_t* keys_out, const int64_t* vals_in,
                  int64_t* vals_out, int64_t n, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_ADVINDEX_CALL_H_
