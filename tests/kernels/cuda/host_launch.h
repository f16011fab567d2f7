// tests/kernels/cuda/host_launch.h — the device under the CUDA kernels'
// host side (kernels/cuda/elementwise_kernels.h) emulated on the host: each
// elementwise call runs the same functors and per-element code as the CUDA
// kernels (HostEngine), on host memory. With it, everything but the launch
// itself is checked against the CPU kernels on a machine without a GPU.
#ifndef TENSORD_TESTS_KERNELS_CUDA_HOST_LAUNCH_H_
#define TENSORD_TESTS_KERNELS_CUDA_HOST_LAUNCH_H_

#include <cstdint>
#include <memory>
#include <string>

#include "../../../kernels/cuda/advindex_call.h"
#include "../../../kernels/cuda/elementwise_call.h"
#include "../../../kernels/cuda/gemm_call.h"
#include "../../../kernels/cuda/index_call.h"
#include "../../../kernels/cuda/random_call.h"
#include "../../../kernels/cuda/nn_call.h"
#include "../../../kernels/cuda/reduce_call.h"
#include "../../../kernels/cuda/shape_call.h"
#include "../../../kernels/cuda/topk_call.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord::testing::cudatest {

// The families' host instances, split over two files to compile in parallel.
int HostLaunchCopyUnary(const cuda::ElementwiseCall& call);      // copy, unary, float math, predicate
int HostLaunchBinaryTernary(const cuda::ElementwiseCall& call);  // arith, division, compare, ternary

struct HostLaunch {
  static int Elementwise(const cuda::ElementwiseCall& call, void* stream);
  static int Reduce(const cuda::ReduceCall& call, void* stream);  // host_launch_reduce.cc
  static int Scan(const cuda::ScanCall& call, void* stream);      // host_launch_reduce.cc
  static int Index(const cuda::IndexCall& call, void* stream);    // host_launch_index.cc
  static int Topk(const cuda::TopkCall& call, void* stream);      // host_launch_index.cc
  static int Remap(const cuda::RemapCall& call, void* stream);        // host_launch_shape.cc
  static int Sequence(const cuda::SequenceCall& call, void* stream);  // host_launch_shape.cc
  static int Random(const cuda::RandomCall& call, void* stream);  // host_launch_random.cc
  static int Nn(const cuda::SoftmaxCall& call, void* stream);     // host_launch_nn.cc
  static int Nn(const cuda::AdamCall& call, void* stream);
  static int Nn(const cuda::PoolCall& call, void* stream);
  static int Nn(const cuda::ColCall& call, void* stream);
  // host_launch_advindex.cc: the kernels, std::inclusive_scan, std::stable_sort, memcpy.
  static int AdvIndex(const cuda::AdvIndexCall& call, void* stream);
  static absl::Status InclusiveSum(absl::string_view op, const int64_t* in, int64_t* out, int64_t n, void* stream);
  static absl::Status SortPairs(absl::string_view op, const int64_t* keys_in, int64_t* keys_out,
                                const int64_t* vals_in, int64_t* vals_out, int64_t n, void* stream);
  static absl::Status CopyToHost(absl::string_view op, void* dst, const void* src, int64_t bytes, void* stream);
  static std::string ErrorString(int code);
  static absl::StatusOr<std::shared_ptr<char>> Allocate(absl::string_view op, int64_t bytes, void* stream);
  static int Memset(char* p, int64_t bytes, void* stream);
  // The GEMM computed on the host after checking it against cuBLAS's
  // rules (host_launch_gemm.cc).
  static absl::Status Gemm(absl::string_view op, const cuda::GemmCall& call, void* stream, int device);
  // Launches so far (a test's check that a path was taken).
  static inline int64_t launches = 0;
  // GEMMs so far and the last one.
  static inline int64_t gemms = 0;
  static inline cuda::GemmCall last_gemm;
};

}  // namespace tensord::testing::cudatest

#endif  // TENSORD_TESTS_KERNELS_CUDA_HOST_LAUNCH_H_
