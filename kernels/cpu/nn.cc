// CPU kernels of softmax.int and log_softmax.int: self converted to the
// output's dtype, then along `dim` out = exp(x - max) / sum(exp(x - max))
// (log_softmax: x - max - log(sum)). Rows along a contiguous last dim of
// float types are computed in float with a vectorised exp (as PyTorch's CPU
// kernel); other layouts and double are computed in double.
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "fast_math.h"
#include "kernel_util.h"
#include "nn_args.h"
#include "parallel.h"

namespace tensord::cpu {
namespace {

// One contiguous row of n elements of a float-computed dtype T (float32,
// and float16/bfloat16 through float) from `in` to `out`, with `row` as n
// floats of scratch: max, then e = exp(x - max) with ExpF (vectorised), summed
// in double, then e / sum (log_softmax: x - max - log(sum)). NaN anywhere
// makes the row NaN and an all -inf row gives NaN, as PyTorch's CPU kernel.
template <typename T, bool kLog>
void SoftmaxRowF(const char* in, char* out, int64_t n, float* row) {
  constexpr int64_t kItem = sizeof(T);
  for (int64_t k = 0; k < n; ++k) row[k] = Load<T>(in + k * kItem);
  float mx = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t k = 0; k < n; ++k) {
    nan |= row[k] != row[k];
    mx = row[k] > mx ? row[k] : mx;
  }
  if (nan) mx = std::numeric_limits<float>::quiet_NaN();
  double sum = 0;
  if constexpr (kLog) {
    for (int64_t k = 0; k < n; ++k) row[k] -= mx;
    ExpFArray(row, row, n);  // row is scratch here: the output needs x - max again
    for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(row[k]);
    const float log_sum = static_cast<float>(std::log(sum));
    for (int64_t k = 0; k < n; ++k) Store<T>(out + k * kItem, Load<T>(in + k * kItem) - mx - log_sum);
  } else {
    for (int64_t k = 0; k < n; ++k) row[k] -= mx;
    ExpFArray(row, row, n);
    for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(row[k]);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t k = 0; k < n; ++k) Store<T>(out + k * kItem, row[k] * inv);
  }
}

template <bool kLog>
absl::Status SoftmaxKernel(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const SoftmaxArgs a, ReadSoftmax(ctx, kLog));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const char* name = kLog ? "log_softmax" : "softmax";
  const int64_t rank = self.meta->dim();
  const int64_t dim = a.dim;
  // Inputs as a contiguous array of the output's dtype; the result goes to a
  // contiguous buffer first when the output is not contiguous.
  std::unique_ptr<TempTensor> hd, hc, ho;
  TD_ASSIGN_OR_RETURN(TensorRef x1, AsDtype(self, out.meta->dtype, hd));
  TD_ASSIGN_OR_RETURN(TensorRef x, AsContiguous(x1, hc));
  TensorRef dst = out;
  if (!out.meta->is_contiguous()) {
    TD_ASSIGN_OR_RETURN(ho, TempTensor::Make(out.meta->sizes, out.meta->dtype));
    dst = ho->ref();
  }
  int64_t outer = 1, inner = 1;
  const int64_t n = rank == 0 ? 1 : self.meta->sizes[dim];
  for (int64_t d = 0; d < dim && d < rank; ++d) outer *= self.meta->sizes[d];
  for (int64_t d = dim + 1; d < rank; ++d) inner *= self.meta->sizes[d];
  TD_RETURN_IF_ERROR(Dispatch<kSetFloats>(out.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const char* in = x.data_at_offset();
    char* o = dst.data_at_offset();
    constexpr int64_t kItem = sizeof(T);
    if constexpr (std::is_same_v<ComputeT<T>, float>) {
      if (inner == 1) {
        // Rows split across cores when there is enough work; a row of
        // scratch per chunk.
        const int64_t chunks = ParallelChunks(outer, n);
        TD_ASSIGN_OR_RETURN(std::shared_ptr<char> mem,
                            AllocateScratch(name, chunks * n * static_cast<int64_t>(sizeof(float))));
        float* rows = reinterpret_cast<float*>(mem.get());
        ParallelFor(outer, n, [&](int64_t r0, int64_t r1, int64_t chunk) {
          for (int64_t a = r0; a < r1; ++a) {
            SoftmaxRowF<T, kLog>(in + a * n * kItem, o + a * n * kItem, n, rows + chunk * n);
          }
        });
        return absl::OkStatus();
      }
    }
    TD_ASSIGN_OR_RETURN(std::shared_ptr<char> mem, AllocateScratchArray(name, n, sizeof(double)));
    double* row = reinterpret_cast<double*>(mem.get());
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t c = 0; c < inner; ++c) {
        const int64_t base = a * n * inner + c;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < n; ++k) {
          row[k] = static_cast<double>(Load<T>(in + (base + k * inner) * kItem));
          if (std::isnan(row[k]) || row[k] > mx) mx = row[k];
        }
        // All -inf (or a NaN max): keep PyTorch's NaN results.
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += std::exp(row[k] - mx);
        const double log_sum = std::log(sum);
        for (int64_t k = 0; k < n; ++k) {
          const double v = kLog ? row[k] - mx - log_sum : std::exp(row[k] - mx) / sum;
          Store<T>(o + (base + k * inner) * kItem, static_cast<ComputeT<T>>(v));
        }
      }
    }
    return absl::OkStatus();
  }));
  if (ho) return CopyConvert(out, dst);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterNnKernels(KernelRegistry& r) {
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "softmax.int", SoftmaxKernel<false>));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "log_softmax.int", SoftmaxKernel<true>));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
