// tensord/runtime/backend.h — what the runtime knows of a device: one Backend
// per device the daemon serves (the CPU's in backends/cpu/, later one per
// GPU), found by the Device a tensor's meta names. The dispatcher, the
// sessions, the autograd engine and the data plane reach a device only
// through this interface; only a backend's folder and its kernels touch a
// device API.
//
//   Backends devices;  devices.Add(*CpuBackend::Create(options));
//   Backend* b = devices.Find(meta.device);          // nullptr: not served here
//   account->Allocate(b->allocator(), nbytes, "add");
//   KernelFn k = b->FindKernel(op.id);                // nullptr: no kernel on it
#ifndef TENSORD_RUNTIME_BACKEND_H_
#define TENSORD_RUNTIME_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/device.h"
#include "tensord/runtime/memory.h"

namespace tensord::runtime {

// One device. Thread-safe: every session's thread calls it.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // What the handshake and `tensord devices` say of it ("16 cores", a GPU's
  // name and compute capability).
  virtual std::string description() const = 0;
  // Memory the device has, in bytes (physical memory for the CPU).
  virtual int64_t total_memory_bytes() const = 0;
  // Its memory: what MemoryAccount::Allocate takes.
  virtual const std::shared_ptr<DeviceAllocator>& allocator() const = 0;
  // Whether the daemon can read and write its storages' bytes directly
  // (the CPU): the data plane then copies with memcpy and may adopt a
  // client's shared memory; otherwise it goes through the copies below.
  virtual bool host_addressable() const = 0;

  // Copies of `n` bytes, in the order of the device's stream: to it from
  // host memory, from it to host memory, and within it. The host side may
  // be read or written until Synchronize returns. InternalError naming the
  // device when the device fails.
  virtual absl::Status CopyFromHost(char* device_dst, const char* host_src, size_t n) const = 0;
  virtual absl::Status CopyToHost(char* host_dst, const char* device_src, size_t n) const = 0;
  virtual absl::Status CopyWithin(char* device_dst, const char* device_src, size_t n) const = 0;
  // Waits for everything issued to the device so far (a no-op on the CPU,
  // whose kernels return when done).
  virtual absl::Status Synchronize() const = 0;
  // The stream kernels on this device are issued to (KernelContext::stream);
  // nullptr on the CPU.
  virtual void* stream() const = 0;

  // The kernel of op `op_id` on this device; nullptr when it has none.
  virtual KernelFn FindKernel(uint32_t op_id) const = 0;
  // Gives back what the allocator keeps cached for reuse (a session closed,
  // the daemon went idle); returns the bytes given back.
  virtual int64_t Trim() = 0;
};

// The devices a daemon serves, in the order the handshake lists them (the
// CPU first). Filled before the first session opens, then read-only.
class Backends {
 public:
  void Add(std::unique_ptr<Backend> backend) { backends_.push_back(std::move(backend)); }
  // The backend serving `device`, or nullptr (a device this daemon lacks).
  Backend* Find(const Device& device) const {
    for (const auto& b : backends_) {
      if (b->device() == device) return b.get();
    }
    return nullptr;
  }
  Backend* cpu() const { return Find(kCPU); }
  size_t size() const { return backends_.size(); }
  Backend& operator[](size_t i) const { return *backends_[i]; }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

// Copies `n` bytes from `src` on `from` to `dst` on `to`: directly when
// either side's memory is the daemon's own (Backend::host_addressable),
// else through a host buffer allocated on `host` and charged to `account`
// (ResourceExhausted over its limit). InternalError naming `op` and both
// devices when a device's copy fails.
absl::Status CopyBetween(const Backend& from, const char* src, const Backend& to, char* dst, size_t n,
                         MemoryAccount& account, const Backend& host, absl::string_view op);

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_BACKEND_H_
