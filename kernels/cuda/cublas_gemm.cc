// CudaLaunch::Gemm (cuda_launch.h): floating GEMMs through cuBLAS, loaded
// with dlopen at the first product, so that the daemon starts (and runs
// everything but matmul) where libcublas is missing; integer GEMMs through
// gemm_int.cu.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <climits>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "cuda_launch.h"
#include "elementwise_host.h"
#include "gemm_call.h"
#include "tensord/kernels/cuda/cuda_kernels.h"
#include "tensord/meta/errors.h"

namespace tensord {
namespace cuda {
namespace {

constexpr const char* kCublasLibrary = "libcublas.so.13";

// cublasGemmStridedBatchedEx with a cublasComputeType_t (C++ code sees an
// overload taking a cudaDataType_t too); the static_cast picks it, and fails
// to compile if the header's prototype changes. Unevaluated: no link
// dependency on libcublas.
using GemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, long long int, const void*, cudaDataType, int,
                                  long long int, const void*, void*, cudaDataType, int, long long int, int,
                                  cublasComputeType_t, cublasGemmAlgo_t);
static_assert(std::is_same_v<decltype(static_cast<GemmFn>(&cublasGemmStridedBatchedEx)), GemmFn>);

// The few cuBLAS entry points the kernels call, typed by cublas_v2.h's own
// prototypes; `error` says why they are absent (then all are null).
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  GemmFn gemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string error;
};

template <typename F>
bool Resolve(void* lib, const char* name, F* fn, std::string* error) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr && error->empty()) error->assign(absl::StrCat(kCublasLibrary, ": no symbol ", name));
  return *fn != nullptr;
}

// Loaded once per process; never unloaded (handles live as long as their threads).
const CublasApi& Cublas() {
  static const CublasApi* api = [] {
    auto* a = new CublasApi();
    void* lib = dlopen(kCublasLibrary, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      a->error = e != nullptr ? e : absl::StrCat(kCublasLibrary, ": cannot be loaded");
      return a;
    }
    bool ok = Resolve(lib, "cublasCreate_v2", &a->create, &a->error);
    ok &= Resolve(lib, "cublasSetStream_v2", &a->set_stream, &a->error);
    ok &= Resolve(lib, "cublasSetWorkspace_v2", &a->set_workspace, &a->error);
    ok &= Resolve(lib, "cublasSetMathMode", &a->set_math_mode, &a->error);
    ok &= Resolve(lib, "cublasGemmStridedBatchedEx", &a->gemm, &a->error);
    ok &= Resolve(lib, "cublasGetStatusString", &a->status_string, &a->error);
    if (!ok) *a = CublasApi{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, a->error};
    return a;
  }();
  return *api;
}

std::string StatusText(const CublasApi& api, cublasStatus_t s) {
  return absl::StrCat(api.status_string(s), " (", static_cast<int>(s), ")");
}

// The calling thread's handle for `device` (the current device), created at
// its first GEMM there. Handles are kept for the thread's life and not
// destroyed at its exit, which may come after the CUDA driver has shut down
// at process exit.
absl::StatusOr<cublasHandle_t> ThreadHandle(absl::string_view op, const CublasApi& api, int device) {
  thread_local std::unordered_map<int, cublasHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasHandle_t h = nullptr;
  const cublasStatus_t s = api.create(&h);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return RuntimeErr(absl::StrCat(op, ": cannot create a cuBLAS handle on cuda:", device, ": ", StatusText(api, s)));
  }
  handles.emplace(device, h);
  return h;
}

// cuBLAS's workspace per call, from the kernels' stream-ordered scratch
// (32 MiB: what cuBLAS asks for on Hopper, as PyTorch gives it).
constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

absl::Status FloatGemm(absl::string_view op, const GemmCall& call, void* stream, int device) {
  const CublasApi& api = Cublas();
  if (api.gemm == nullptr) {
    return RuntimeErr(absl::StrCat(op, ": cuBLAS is not available on this daemon (", api.error, ")"));
  }
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  // alpha and beta in the compute type.
  float alpha_f = static_cast<float>(call.alpha), beta_f = static_cast<float>(call.beta);
  const void* alpha = &alpha_f;
  const void* beta = &beta_f;
  switch (call.dtype) {
    case ScalarType::kFloat32:
      type = CUDA_R_32F;
      if (call.allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      break;
    case ScalarType::kFloat16: type = CUDA_R_16F; break;
    case ScalarType::kBFloat16: type = CUDA_R_16BF; break;
    case ScalarType::kFloat64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      alpha = &call.alpha;
      beta = &call.beta;
      break;
    default: return InternalErr(absl::StrCat("internal: ", op, ": cuBLAS GEMM of ", DtypeName(call.dtype)));
  }
  TD_ASSIGN_OR_RETURN(cublasHandle_t h, ThreadHandle(op, api, device));
  TD_ASSIGN_OR_RETURN(std::shared_ptr<char> workspace, CudaLaunch::Allocate(op, kWorkspaceBytes, stream));
  cublasStatus_t s = api.set_stream(h, static_cast<cudaStream_t>(stream));
  if (s == CUBLAS_STATUS_SUCCESS) s = api.set_workspace(h, workspace.get(), static_cast<size_t>(kWorkspaceBytes));
  if (s == CUBLAS_STATUS_SUCCESS) s = api.set_math_mode(h, call.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  // cuBLAS is column-major: the row-major C = A @ B is the column-major
  // C^T = B^T @ A^T, and a row-major matrix read column-major is its
  // transpose, so B goes first and each operand's transpose flag carries over.
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = api.gemm(h, call.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, call.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                 static_cast<int>(call.n), static_cast<int>(call.m), static_cast<int>(call.k), alpha, call.b, type,
                 static_cast<int>(call.ldb), call.stride_b, call.a, type, static_cast<int>(call.lda), call.stride_a,
                 beta, call.c, type, static_cast<int>(call.ldc), call.stride_c, static_cast<int>(call.batch), compute,
                 CUBLAS_GEMM_DEFAULT);
  }
  if (s != CUBLAS_STATUS_SUCCESS) {
    return InternalErr(absl::StrCat("internal: ", op, ": cublasGemmStridedBatchedEx (", call.m, " x ", call.n, " x ",
                                    call.k, ", batch ", call.batch, "): ", StatusText(api, s)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaLaunch::Gemm(absl::string_view op, const GemmCall& call, void* stream, int device) {
  if (call.m == 0 || call.n == 0 || call.batch == 0) return absl::OkStatus();
  if (IsFloating(call.dtype)) return FloatGemm(op, call, stream, device);
  const int code = LaunchIntGemmCuda(call, stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(op, code, code > 0 ? ErrorString(code) : std::string());
}

}  // namespace cuda

absl::Status CudaBlasAvailable() {
  const cuda::CublasApi& api = cuda::Cublas();
  if (api.gemm != nullptr) return absl::OkStatus();
  return RuntimeErr(absl::StrCat("cuBLAS is not available (", api.error, "): matmul, mm, bmm, addmm, baddbmm, dot and "
                                 "linear of floating tensors fail on CUDA devices"));
}

}  // namespace tensord
