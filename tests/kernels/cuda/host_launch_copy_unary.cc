// HostLaunch's copy, unary, float math and predicate families (host_launch.h).
#include "../../../kernels/cuda/elementwise.cuh"
#include "../../../kernels/cuda/elementwise_ops.h"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunchCopyUnary(const cuda::ElementwiseCall& call) {
  using cuda::EwFamily;
  using cuda::HostEngine;
  switch (call.family) {
    case EwFamily::kCopy: return cuda::DispatchCopy<HostEngine>(call, nullptr);
    case EwFamily::kUnary: return cuda::DispatchUnary<HostEngine>(call, nullptr);
    case EwFamily::kFloatMath: return cuda::DispatchFloatMath<HostEngine>(call, nullptr);
    case EwFamily::kPredicate: return cuda::DispatchPredicate<HostEngine>(call, nullptr);
    default: return cuda::kLaunchBadOp;
  }
}

}  // namespace tensord::testing::cudatest
