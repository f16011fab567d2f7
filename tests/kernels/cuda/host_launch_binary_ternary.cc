// HostLaunch's arith, division, compare and ternary families, and the
// rest of HostLaunch (host_launch.h).
#include <cstdlib>
#include <cstring>

#include "../../../kernels/cuda/elementwise.cuh"
#include "../../../kernels/cuda/elementwise_ops.h"
#include "absl/strings/str_cat.h"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunchBinaryTernary(const cuda::ElementwiseCall& call) {
  using cuda::EwFamily;
  using cuda::HostEngine;
  switch (call.family) {
    case EwFamily::kArith: return cuda::DispatchArith<HostEngine>(call, nullptr);
    case EwFamily::kDivision: return cuda::DispatchDivision<HostEngine>(call, nullptr);
    case EwFamily::kCompare: return cuda::DispatchCompare<HostEngine>(call, nullptr);
    case EwFamily::kTernary: return cuda::DispatchTernary<HostEngine>(call, nullptr);
    default: return cuda::kLaunchBadOp;
  }
}

int HostLaunch::Elementwise(const cuda::ElementwiseCall& call, void* /*stream*/) {
  ++launches;
  switch (call.family) {
    case cuda::EwFamily::kCopy:
    case cuda::EwFamily::kUnary:
    case cuda::EwFamily::kFloatMath:
    case cuda::EwFamily::kPredicate: return HostLaunchCopyUnary(call);
    default: return HostLaunchBinaryTernary(call);
  }
}

std::string HostLaunch::ErrorString(int code) { return absl::StrCat("emulated launch error ", code); }

absl::StatusOr<std::shared_ptr<char>> HostLaunch::Allocate(absl::string_view /*op*/, int64_t bytes, void* /*stream*/) {
  const size_t n = (static_cast<size_t>(bytes) + 255) / 256 * 256 + 256;
  return std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(256, n)), [](char* p) { std::free(p); });
}

int HostLaunch::Memset(char* p, int64_t bytes, void* /*stream*/) {
  std::memset(p, 0, static_cast<size_t>(bytes));
  return 0;
}

}  // namespace tensord::testing::cudatest
