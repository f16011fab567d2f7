// kernels/cuda/nn_call.h — what one launch of the nn kernels is, as the host
// side (nn_kernels.h) describes it to the device side (nn.cu, nn.cuh):
// softmax / log_softmax rows, one fused Adam step, 2-D pooling forward and
// backward, and the im2col / col2im of a convolution (whose products go
// through L::Gemm). Plain C++ (no CUDA header), so host code builds calls
// and the host tests run them (HostLaunch::Nn).
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_NN_CALL_H_
#define TENSORD_KERNELS_CUDA_NN_CALL_H_

#include <cstdint>

#include "offset_calculator.h"
#include "tensord/kernels/device_error.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

// softmax / log_softmax along one dim: one block per row (all dims but the
// softmax dim), rows in `rows` (operands: 0 out, 1 in; byte strides).
// Element k of a row is at in + k * in_stride (converted from `in_dtype`
// to `dtype`, the output's, as the CPU converts self first) and goes to
// out + k * out_stride. float16 / bfloat16 / float32 compute in float,
// float64 in double.
struct SoftmaxCall {
  bool log = false;
  ScalarType dtype = ScalarType::kFloat32;
  ScalarType in_dtype = ScalarType::kFloat32;
  char* out = nullptr;
  const char* in = nullptr;
  ElementwiseGeometry rows;
  int64_t n = 0;           // elements per row (the dim's size; 1 for a 0-dim self)
  int64_t in_stride = 0;   // bytes
  int64_t out_stride = 0;  // bytes
};

// Threads per softmax row, and the width of its fixed reduction tree.
inline constexpr int kSoftmaxThreads = 256;

// One Adam / AdamW step over `numel` elements of four tensors of `dtype`
// (float32 or float64) that share one dense layout: element k of each is
// the k-th from its pointer. The constants are the CPU kernel's doubles
// (kernels/cpu/optim.cc), rounded to the compute type by the kernel.
struct AdamCall {
  ScalarType dtype = ScalarType::kFloat32;
  char* param = nullptr;
  const char* grad = nullptr;
  char* exp_avg = nullptr;
  char* exp_avg_sq = nullptr;
  int64_t numel = 0;
  double sign = 1, beta1 = 0, one_minus_beta1 = 0, beta2 = 0, one_minus_beta2 = 0, weight_decay = 0, decay = 1,
         bias_correction2_sqrt = 1, eps = 0, neg_step_size = 0;
  bool l2 = false;     // g += weight_decay * p (Adam with weight decay)
  bool decoupled = false;  // p *= decay (AdamW with weight decay)
};

enum class PoolOp : int {
  kMaxForward,   // values and int64 indices (h * W + w) of each window's max
  kMaxBackward,  // grad_input gathered from the outputs whose index names it
  kAvgForward,
  kAvgBackward,  // grad_input gathered from the windows that cover it
};

// 2-D pooling over planes (n, c) of an NCHW tensor; every tensor is read
// and written through its own element strides (n, c, h, w), so no layout
// needs a copy. `input` is the (N, C, H, W) side (self or grad_input),
// `output` the (N, C, OH, OW) side (values or grad_output), `indices` the
// max pool's. A 3-D tensor is (1, C, H, W) with stride 0 for n.
struct PoolCall {
  PoolOp op = PoolOp::kMaxForward;
  ScalarType dtype = ScalarType::kFloat32;  // float32 or float64
  char* input = nullptr;
  char* output = nullptr;
  char* indices = nullptr;
  int64_t in_strides[4] = {0, 0, 0, 0};
  int64_t out_strides[4] = {0, 0, 0, 0};
  int64_t idx_strides[4] = {0, 0, 0, 0};
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1};
  bool count_include_pad = true;
  int64_t divisor = 0;  // avg: divisor_override, 0 when none
  // kMaxBackward: where an index outside its plane is recorded.
  DeviceErrorWord* error_word = nullptr;
  uint32_t op_id = 0;
};

// im2col (kIm2Col) or its adjoint col2im (kCol2Im) for images n0 .. n0+nb-1
// of a convolution's input (N, C, H, W) through element strides. The
// columns are one contiguous buffer laid out [groups][cg*kh*kw][nb*oh*ow]:
// row (c', i, j) of group g, column b*oh*ow + y*ow + x holds
// img[n0+b, g*cg + c', y*s - p + i*d, x*s - p + j*d] (0 outside), so that
// each group's columns are one matrix for the GEMMs. col2im writes every
// image element of the range once: the sum, in (i, j) order, of the column
// entries that read it (a gather: no atomics, deterministic).
enum class ColOp : int { kIm2Col, kCol2Im };

struct ColCall {
  ColOp op = ColOp::kIm2Col;
  ScalarType dtype = ScalarType::kFloat32;  // float32 or float64
  char* image = nullptr;  // at image n0 0
  int64_t img_strides[4] = {0, 0, 0, 0};
  char* col = nullptr;
  int64_t nb = 0, c = 0, h = 0, w = 0, groups = 1, oh = 0, ow = 0;
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1};
};

// Each launches its call on the CUDA stream `stream`; a LaunchCode or the
// launch's cudaError_t. Defined in nn.cu, built only with CUDA.
int LaunchSoftmaxCuda(const SoftmaxCall& call, void* stream);
int LaunchAdamCuda(const AdamCall& call, void* stream);
int LaunchPoolCuda(const PoolCall& call, void* stream);
int LaunchColCuda(const ColCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_NN_CALL_H_
