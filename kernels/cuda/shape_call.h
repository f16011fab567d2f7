// kernels/cuda/shape_call.h — what one launch of the shape kernels is, as
// the host side (shape_kernels.h) describes it to the device side
// (shape.cu): copies whose source element follows from the output
// coordinate by a closed form per dim (flip, roll, repeat, constant_pad_nd:
// RemapCall; tril/triu: the same walk with a triangle mask), and factories
// whose values follow the index (arange, linspace: SequenceCall). Plain C++
// (no CUDA header), so host code builds calls and the host tests run them.
//
//   RemapCall call;                  // flip(x, [0]) of a [3, 4] tensor
//   call.ndim = 2;  call.dims[0] = RemapDim::Wrap(3, 3, 16, 48);  call.dims[0].reverse = true;
//   int code = LaunchRemapCuda(call, stream);   // kLaunchOk or an error
//
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_SHAPE_CALL_H_
#define TENSORD_KERNELS_CUDA_SHAPE_CALL_H_

#include <cstdint>

#include "elementwise_call.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

// The most dims a remap walks: the meta functions' rank limit (64), so
// every tensor a client can make fits without merging dims.
inline constexpr int kMaxRemapDims = 64;

// One output dim of a remap: output coordinate j (in [0, out_size), at byte
// offset j * out_stride) reads source index i along the dim, at byte offset
// i * src_stride:
//   kWrap:   i = (r + shift) mod src_size with r = reverse ? src_size - 1 - j : j
//            (flip: reverse; roll: shift; repeat: out_size > src_size);
//   kPadded: i = j - before, and no element (the fill value) when i falls
//            outside [0, src_size) (constant_pad_nd; negative pads crop).
// The CPU's DimMap (kernels/cpu/shape.cc), with byte strides.
struct RemapDim {
  int64_t out_size = 1;
  int64_t out_stride = 0;
  int64_t src_size = 1;
  int64_t src_stride = 0;
  int64_t shift = 0;   // kWrap: in [0, src_size)
  int64_t before = 0;  // kPadded
  bool padded = false;
  bool reverse = false;

  static RemapDim Wrap(int64_t out_size, int64_t out_stride, int64_t src_size, int64_t src_stride) {
    RemapDim d;
    d.out_size = out_size;
    d.out_stride = out_stride;
    d.src_size = src_size;
    d.src_stride = src_stride;
    return d;
  }
};

enum class RemapOp : int {
  // out[j...] = src[sum_d map_d(j_d)], or `fill` where a padded dim gives none.
  kGather,
  // tril / triu: out[j...] = src[j...] (each dim's src_stride, coordinates
  // unmapped) where the last two coordinates (r, c) satisfy
  // c - r <= diagonal (kTril) / c - r >= diagonal (kTriu), else zero bytes.
  kTril,
  kTriu,
};

struct RemapCall {
  RemapOp op = RemapOp::kGather;
  int64_t itemsize = 4;          // bytes per element (1, 2, 4 or 8): elements are moved as bits
  char* out = nullptr;           // the output's first element
  const char* src = nullptr;     // the source's first element (may be null when it has none)
  uint64_t fill = 0;             // kGather's fill value: the element's bytes, little end first
  int64_t diagonal = 0;          // kTril / kTriu, clamped to +-2^62 (no overflow in r + diagonal)
  int ndim = 0;                  // 0: one element
  RemapDim dims[kMaxRemapDims];  // the output's dims, outermost first
};

// Factories whose element i is a closed form of i, written to out + i * stride.
enum class SequenceOp : int {
  // start + i * step: in double for floating dtypes (`start`/`step` hold
  // doubles' bits), in wrapping int64 for integers (int64s' bits).
  kArange,
  // PyTorch's two-sided formula: start + step * i below n / 2, else
  // end - step * (n - 1 - i); n == 1 gives start. Computed in double for
  // float64 and integers (then FloatToInt), in float for float32, float16
  // and bfloat16 (`start`/`end`/`step` hold that type's bits).
  kLinspace,
};

struct SequenceCall {
  SequenceOp op = SequenceOp::kArange;
  ScalarType dtype = ScalarType::kFloat32;  // the output's: a numeric dtype
  char* out = nullptr;
  int64_t n = 0;       // elements
  int64_t stride = 0;  // bytes between elements
  uint64_t start = 0, end = 0, step = 0;
};

// Launch `call` on the CUDA stream `stream`; a LaunchCode or the launch's
// cudaError_t. Defined in shape.cu, built only with CUDA.
int LaunchRemapCuda(const RemapCall& call, void* stream);
int LaunchSequenceCuda(const SequenceCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_SHAPE_CALL_H_
