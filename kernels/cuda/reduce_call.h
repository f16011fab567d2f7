// kernels/cuda/reduce_call.h — what one reduction launch is, as the host
// side (reduce_kernels.h) describes it to the device side (reduce.cu): the
// input, the outputs, the kept dims (one output element each) and the
// reduced dims (folded into it), and which fold. Plain C++ (no CUDA
// header), so host code builds calls and the host tests run them.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_REDUCE_CALL_H_
#define TENSORD_KERNELS_CUDA_REDUCE_CALL_H_

#include <cstdint>

#include "elementwise_call.h"
#include "offset_calculator.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

enum class ReduceOp : int {
  kSum,     // floating dtypes accumulate in double, integers (and bool) in int64, as the CPU
  kMean,    // kSum divided by `count`
  kMax,     // NaN propagates
  kMin,
  kArgMax,  // the first extreme's index along the reduced dims (row-major); NaN is the extreme
  kArgMin,
};

// The dtypes each fold has instances for (`dtype` below). The host side
// refuses what the op's CPU kernel refuses first (argmax refuses bool,
// which max.dim, the same fold, accepts).
constexpr uint32_t ReduceDtypes(ReduceOp op) { return op == ReduceOp::kMean ? kSetFloats : kSetAllButF8; }

struct ReduceCall {
  ReduceOp op = ReduceOp::kSum;
  // The fold's type: sum and mean read every input element converted to it
  // (the output's dtype, or int64 for integers summed to int64); the
  // extremes read the input's own dtype.
  ScalarType dtype = ScalarType::kFloat32;
  char* in = nullptr;
  ScalarType in_dtype = ScalarType::kFloat32;
  // Outputs: `values` (of `values_dtype`; null for argmax/argmin) and
  // `indices` (int64; only for the arg folds, null otherwise).
  char* values = nullptr;
  ScalarType values_dtype = ScalarType::kFloat32;
  char* indices = nullptr;
  // One output element per index of `kept` (operands: 0 values, 1 indices,
  // 2 input; stride 0 for an absent output) and the elements folded into
  // it: `reduced` (operand 0: the input), in logical order
  // (BuildLogicalGeometry), so that its linear index is the row-major index
  // along the reduced dims.
  ElementwiseGeometry kept;
  ElementwiseGeometry reduced;
  int64_t count = 0;  // elements per output: reduced.numel(), mean's divisor
};

// Threads that fold one output element, and the width of its fixed tree.
inline constexpr int kReduceThreads = 256;

// Launches `call` on the CUDA stream `stream`; a LaunchCode or the launch's
// cudaError_t. Defined in reduce.cu, built only with CUDA.
int LaunchReduceCuda(const ReduceCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_REDUCE_CALL_H_
