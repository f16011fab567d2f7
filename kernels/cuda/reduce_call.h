// kernels/cuda/reduce_call.h — what one reduction launch is, as the host
// side (reduce_kernels.h) describes it to the device side (reduce.cu): the
// input, the outputs, the kept dims (one output element each) and the
// reduced dims (folded into it), and which fold; and what one scan
// (cumsum, cumprod: scan.cu) is. Plain C++ (no CUDA
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
  kNansum,  // floating: kSum skipping NaN, in double
  kProd,    // floating in double, integers (and bool) in int64 (wrapping), as the CPU
  kAll,     // every element read as bool (NaN is true); the result bool or uint8
  kAny,
  kVar,     // Welford/Chan moments in double; divisor max(count - arg, 0) (arg: the correction)
  kStd,     // kVar's square root
  kLogsumexp,  // running (max, sum of exp(x - max)) pairs in double
  kNormInf,    // max |x|, NaN propagating; 0 for an empty reduction
  kNormNegInf, // min |x|, NaN propagating; 0 for an empty reduction
  kNormZero,   // the count of non-zero elements (NaN counts)
  kNormOne,    // sum |x|
  kNormTwo,    // sqrt(sum x^2)
  kNormP,      // (sum |x|^arg)^(1/arg); 0 for an empty reduction
};

// The dtypes each fold has instances for (`dtype` below). The host side
// refuses what the op's CPU kernel refuses first (argmax refuses bool,
// which max.dim, the same fold, accepts).
constexpr uint32_t ReduceDtypes(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kMin:
    case ReduceOp::kArgMax:
    case ReduceOp::kArgMin:
    case ReduceOp::kProd: return kSetAllButF8;
    case ReduceOp::kAll:
    case ReduceOp::kAny: return kSetBool | kSetInts;  // the output: bool, or uint8 for uint8 inputs
    default: return kSetFloats;
  }
}

struct ReduceCall {
  ReduceOp op = ReduceOp::kSum;
  // The fold's type: sum and mean read every input element converted to it
  // (the output's dtype, or int64 for integers summed to int64); the
  // extremes read the input's own dtype. nansum, prod and the norms read
  // the input converted to it (the output's dtype); all/any, var/std and
  // logsumexp read the input as bool or double and write it (the output's).
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
  double arg = 0;     // var/std's correction, kNormP's p
};

// Threads that fold one output element, and the width of its fixed tree.
inline constexpr int kReduceThreads = 256;

// Launches `call` on the CUDA stream `stream`; a LaunchCode or the launch's
// cudaError_t. Defined in reduce.cu, built only with CUDA.
int LaunchReduceCuda(const ReduceCall& call, void* stream);

// ---- scans ---------------------------------------------------------------------

enum class ScanOp : int {
  kCumsum,   // floating dtypes accumulate in double, integers in int64 (wrapping), as the CPU
  kCumprod,
};

// The dtypes the scans have instances for (the CPU kernel's; the meta
// function refuses float16 and bool outputs first).
inline constexpr uint32_t kScanDtypes = kSetInts | kSetFloats;

// One scan launch: every line along the scanned dim is folded in order,
// each prefix written to the output.
struct ScanCall {
  ScanOp op = ScanOp::kCumsum;
  // The output's dtype: every input element is converted to it (the CPU's
  // cast of the input to the output dtype), then to the accumulator.
  ScalarType dtype = ScalarType::kFloat32;
  const char* in = nullptr;
  ScalarType in_dtype = ScalarType::kFloat32;
  char* out = nullptr;
  // One index per line (operands: 0 the output's first element, 1 the
  // input's), and the lines' length and byte steps along the scanned dim.
  ElementwiseGeometry lines;
  int64_t length = 0;
  int64_t out_step = 0;
  int64_t in_step = 0;
};

// Threads per block of the scan kernel (one line per thread).
inline constexpr int kScanThreads = 256;

// Launches `call` on `stream`; a LaunchCode or the launch's cudaError_t.
// Defined in scan.cu, built only with CUDA.
int LaunchScanCuda(const ScanCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_REDUCE_CALL_H_
