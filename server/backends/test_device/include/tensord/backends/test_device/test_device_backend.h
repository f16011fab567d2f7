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

class TestDeviceBackend final : public HostMemoryBackend {
 public:
  // InternalError only on a build bug (a CPU kernel the table lacks).
  static absl::StatusOr<std::unique_ptr<TestDeviceBackend>> Create();

  std::string description() const override { return "test device (host memory, the cpu kernels)"; }
  bool host_addressable() const override { return false; }

 private:
  TestDeviceBackend();
};

}  // namespace tensord::backends

#endif  // TENSORD_BACKENDS_TEST_DEVICE_TEST_DEVICE_BACKEND_H_
