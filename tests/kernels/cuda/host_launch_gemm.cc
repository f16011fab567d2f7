// HostLaunch::Gemm (host_launch.h): the GEMM the device layer would run
// (cuBLAS, gemm_int.cu), computed naively on the host after checking the
// call against cuBLAS's rules, so that the host tests check the matmul
// kernels' argument mapping (transposes, leading dimensions, batch strides,
// alpha and beta) against the CPU kernels.
#include <algorithm>
#include <climits>
#include <cstring>
#include <type_traits>

#include "../../../kernels/cpu/dtypes.h"
#include "../kernel_test_util.h"
#include "absl/strings/str_cat.h"
#include "host_launch.h"
#include "tensord/meta/errors.h"

namespace tensord::testing::cudatest {
namespace {

// What cuBLAS (and gemm_int.cu) require of a call; "" when it is valid.
std::string Invalid(const cuda::GemmCall& g) {
  for (const int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch}) {
    if (v < 0 || v > INT_MAX) return absl::StrCat("a size or leading dimension out of int range: ", v);
  }
  if (g.lda < std::max<int64_t>(1, g.trans_a ? g.m : g.k)) return absl::StrCat("lda ", g.lda, " too small");
  if (g.ldb < std::max<int64_t>(1, g.trans_b ? g.k : g.n)) return absl::StrCat("ldb ", g.ldb, " too small");
  if (g.ldc < std::max<int64_t>(1, g.n)) return absl::StrCat("ldc ", g.ldc, " too small");
  if (g.c == nullptr || (g.k > 0 && (g.a == nullptr || g.b == nullptr))) return "a null operand";
  if (g.allow_tf32 && g.dtype != ScalarType::kFloat32) return "TF32 for a dtype other than float32";
  return "";
}

template <typename T>
int64_t LoadInt(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<int64_t>(v);
}

template <typename T>
void Compute(const cuda::GemmCall& g) {
  const int64_t item = static_cast<int64_t>(sizeof(T));
  for (int64_t p = 0; p < g.batch; ++p) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        char* cp = g.c + (p * g.stride_c + i * g.ldc + j) * item;
        auto a_at = [&](int64_t l) {
          return g.a + (p * g.stride_a + (g.trans_a ? l * g.lda + i : i * g.lda + l)) * item;
        };
        auto b_at = [&](int64_t l) {
          return g.b + (p * g.stride_b + (g.trans_b ? j * g.ldb + l : l * g.ldb + j)) * item;
        };
        if constexpr (std::is_integral_v<T>) {
          uint64_t acc = 0;
          for (int64_t l = 0; l < g.k; ++l) {
            acc += static_cast<uint64_t>(LoadInt<T>(a_at(l))) * static_cast<uint64_t>(LoadInt<T>(b_at(l)));
          }
          uint64_t v = static_cast<uint64_t>(g.alpha_int) * acc;
          if (g.beta_int != 0) v += static_cast<uint64_t>(g.beta_int) * static_cast<uint64_t>(LoadInt<T>(cp));
          const T out = static_cast<T>(v);
          std::memcpy(cp, &out, sizeof(T));
        } else {
          double acc = 0;
          for (int64_t l = 0; l < g.k; ++l) acc += ReadAt(a_at(l), g.dtype) * ReadAt(b_at(l), g.dtype);
          double v = g.alpha * acc;
          if (g.beta != 0) v += g.beta * ReadAt(cp, g.dtype);
          WriteAt(cp, g.dtype, v);
        }
      }
    }
  }
}

}  // namespace

absl::Status HostLaunch::Gemm(absl::string_view op, const cuda::GemmCall& call, void* /*stream*/, int /*device*/) {
  ++gemms;
  last_gemm = call;
  const std::string why = Invalid(call);
  if (!why.empty()) return InternalErr(absl::StrCat("internal: ", op, ": invalid GEMM: ", why));
  return cpu::Dispatch<cpu::kSetInts | cpu::kSetFloats>(call.dtype, op, [&](auto tag) -> absl::Status {
    Compute<typename decltype(tag)::type>(call);
    return absl::OkStatus();
  });
}

}  // namespace tensord::testing::cudatest
