// tensord/backends/test_device/test_device_backend.h — a second device for
// the test suite: host memory that behaves as a device of its own,
// "privateuseone:0" (PyTorch's slot for an out-of-tree device). A daemon
// serves it only when started with --test-device.
//
// It exists so that everything a GPU changes is tested on every CI run
// without one: its storages come from an allocator of its own (charged to
// the session like any device's, counted apart from the CPU's), the daemon
// may not touch its bytes directly (host_addressable() is false, so
// uploads, fetches and moves between devices go through the Backend copies),
// tensors on it and on the CPU in one op are refused as PyTorch refuses
// them, and `.to(device)` moves data across. Its kernels are the CPU's, run
// on its host memory.
#ifndef TENSORD_BACKENDS_TEST_DEVICE_TEST_DEVICE_BACKEND_H_
#define TENSORD_BACKENDS_TEST_DEVICE_TEST_DEVICE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/kernels/registry.h"
#include "tensord/runtime/backend.h"

namespace tensord::backends {

// privateuseone:0.
inline constexpr Device kTestDevice{DeviceType::kPrivateUse1, 0};

class TestDeviceBackend final : public runtime::Backend {
 public:
  // InternalError only on a build bug (a CPU kernel the table lacks).
  static absl::StatusOr<std::unique_ptr<TestDeviceBackend>> Create();

  Device device() const override { return kTestDevice; }
  std::string description() const override { return "test device (host memory, the cpu kernels)"; }
  int64_t total_memory_bytes() const override { return allocator_impl_->physical_memory_bytes(); }
  const std::shared_ptr<runtime::DeviceAllocator>& allocator() const override { return allocator_; }
  bool host_addressable() const override { return false; }
  absl::Status CopyFromHost(char* device_dst, const char* host_src, size_t n) const override;
  absl::Status CopyToHost(char* host_dst, const char* device_src, size_t n) const override;
  absl::Status CopyWithin(char* device_dst, const char* device_src, size_t n) const override;
  absl::Status Synchronize() const override { return absl::OkStatus(); }
  void* stream() const override { return nullptr; }
  KernelFn FindKernel(uint32_t op_id) const override { return kernels_.Find(DeviceType::kCPU, op_id); }
  int64_t Trim() override { return allocator_impl_->Trim(); }

 private:
  TestDeviceBackend();

  std::shared_ptr<CpuAllocator> allocator_impl_;
  std::shared_ptr<runtime::DeviceAllocator> allocator_;  // the same object
  KernelRegistry kernels_;
};

}  // namespace tensord::backends

#endif  // TENSORD_BACKENDS_TEST_DEVICE_TEST_DEVICE_BACKEND_H_
