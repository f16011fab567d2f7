// The test device: host memory behind explicit copies, the CPU's kernels.
#include "tensord/backends/test_device/test_device_backend.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"

namespace tensord::backends {

namespace {

CpuAllocatorOptions TestDeviceAllocatorOptions() {
  CpuAllocatorOptions o;
  o.cache_limit_bytes = 0;  // every free gives memory back: a leak shows in bytes_in_use at once
  return o;
}

}  // namespace

TestDeviceBackend::TestDeviceBackend()
    : allocator_impl_(std::make_shared<CpuAllocator>(TestDeviceAllocatorOptions(), kTestDevice)),
      allocator_(allocator_impl_) {}

absl::StatusOr<std::unique_ptr<TestDeviceBackend>> TestDeviceBackend::Create() {
  std::unique_ptr<TestDeviceBackend> b(new TestDeviceBackend());
  if (absl::Status s = RegisterCpuKernels(b->kernels_); !s.ok()) {
    return InternalErr(absl::StrCat("registering the test device's kernels failed: ", s.message()));
  }
  return b;
}

absl::Status TestDeviceBackend::CopyFromHost(char* device_dst, const char* host_src, size_t n) const {
  if (n > 0) std::memcpy(device_dst, host_src, n);
  return absl::OkStatus();
}

absl::Status TestDeviceBackend::CopyToHost(char* host_dst, const char* device_src, size_t n) const {
  if (n > 0) std::memcpy(host_dst, device_src, n);
  return absl::OkStatus();
}

absl::Status TestDeviceBackend::CopyWithin(char* device_dst, const char* device_src, size_t n) const {
  if (n > 0) std::memmove(device_dst, device_src, n);
  return absl::OkStatus();
}

}  // namespace tensord::backends
