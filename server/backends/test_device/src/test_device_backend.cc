// The test device: host memory behind explicit copies, the CPU's kernels.
#include "tensord/backends/test_device/test_device_backend.h"

#include "tensord/meta/errors.h"

namespace tensord::backends {

namespace {

CpuAllocatorOptions TestDeviceAllocatorOptions() {
  CpuAllocatorOptions o;
  o.cache_limit_bytes = 0;  // every free gives memory back: a leak shows in bytes_in_use at once
  return o;
}

}  // namespace

TestDeviceBackend::TestDeviceBackend() : HostMemoryBackend(TestDeviceAllocatorOptions(), kTestDevice) {}

absl::StatusOr<std::unique_ptr<TestDeviceBackend>> TestDeviceBackend::Create() {
  std::unique_ptr<TestDeviceBackend> b(new TestDeviceBackend());
  TD_RETURN_IF_ERROR(b->RegisterKernels());
  return b;
}

}  // namespace tensord::backends
