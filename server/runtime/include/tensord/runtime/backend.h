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
//   SessionStreams streams(&devices, account->id());  // one per session
//   Stream* s = *streams.For(*b);  s->Launch(k, ctx);  s->Synchronize();
#ifndef TENSORD_RUNTIME_BACKEND_H_
#define TENSORD_RUNTIME_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/device.h"
#include "tensord/runtime/memory.h"

namespace tensord::runtime {

// A point in a Stream's order (Stream::Record): done once everything issued
// to the stream before it is done. Thread-safe.
class Event {
 public:
  virtual ~Event() = default;
  // Whether it is done, without waiting.
  virtual bool Query() const = 0;
  // Waits until it is done. InternalError naming the device when the device
  // failed meanwhile.
  virtual absl::Status Synchronize() const = 0;
};

// An ordered queue of work on one device, as a CUDA stream is: copies and
// kernels issued to it run in the order issued, possibly after the call that
// issued them returned. Each session has its own stream on each device it
// uses (SessionStreams), so sessions do not wait for each other's work.
// Used by one thread at a time (its session's); its Events may be waited
// for anywhere.
class Stream {
 public:
  virtual ~Stream() = default;  // waits for the work issued to it

  virtual Device device() const = 0;
  // What the device's kernels issue their work to (KernelContext::stream:
  // a cudaStream_t on CUDA); nullptr on a device whose kernels compute on
  // the calling thread.
  virtual void* native_handle() const = 0;

  // Copies of `n` bytes, issued in order: to the device from host memory,
  // from the device to host memory, and within the device (the ranges may
  // overlap). The host bytes must stay valid and unchanged until the copy
  // is done (Synchronize, or an Event recorded after it). InternalError
  // naming the device when the device fails.
  virtual absl::Status CopyFromHost(char* device_dst, const char* host_src, size_t n) = 0;
  virtual absl::Status CopyToHost(char* host_dst, const char* device_src, size_t n) = 0;
  virtual absl::Status CopyWithin(char* device_dst, const char* device_src, size_t n) = 0;
  // Runs `kernel` after the work issued before it: with ctx.stream set to
  // native_handle(), the kernel issues its work here and returns (or, on a
  // device whose kernels compute on the calling thread, computes once the
  // earlier work is done and returns when it is). Returns the kernel's
  // status: its argument errors are synchronous everywhere.
  virtual absl::Status Launch(KernelFn kernel, KernelContext& ctx) = 0;
  // An Event at this point of the order.
  virtual absl::StatusOr<std::shared_ptr<Event>> Record() = 0;
  // Work issued here after this call starts only once `event` (of any
  // stream, on any device) is done. The caller waits only where this
  // stream's work runs on the calling thread.
  virtual absl::Status Wait(const std::shared_ptr<Event>& event) = 0;
  // Waits until everything issued so far is done.
  virtual absl::Status Synchronize() = 0;
};

// One device. Thread-safe: every session's thread calls it.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // What the handshake and `tensord devices` say of it: "16 cores" for the
  // CPU, a GPU's name as its driver gives it ("NVIDIA H100 80GB HBM3"),
  // which clients return as torch.cuda.get_device_name (the capability is
  // capability()'s, not part of it).
  virtual std::string description() const = 0;
  // Memory the device has, in bytes (physical memory for the CPU).
  virtual int64_t total_memory_bytes() const = 0;
  // Memory free on the device now, in bytes, as the device sees it: other
  // processes' use counts (the machine's available memory for the CPU; a
  // GPU's free memory as its driver reports it). Asked when a session
  // opens and by `tensord devices`, not on a request path. This default,
  // for a device only this daemon uses, is what its allocator does not hold.
  virtual int64_t free_memory_bytes() const {
    const int64_t held = allocator()->reserved_bytes();
    return held < total_memory_bytes() ? total_memory_bytes() - held : 0;
  }
  // The device's compute capability, {major, minor} ({9, 0} for an H100),
  // as PyTorch's get_device_capability gives it; {0, 0} for a device whose
  // kind has none (the CPU).
  virtual std::pair<int, int> capability() const { return {0, 0}; }
  // Its memory: what MemoryAccount::Allocate takes.
  virtual const std::shared_ptr<DeviceAllocator>& allocator() const = 0;
  // Whether the daemon can read and write its storages' bytes directly
  // (the CPU): the data plane then copies with memcpy and may adopt a
  // client's shared memory; otherwise it goes through a Stream's copies.
  virtual bool host_addressable() const = 0;
  // A new stream on this device for the session whose MemoryAccount::id()
  // is `owner` (0: no session's), one per session and device (SessionStreams
  // makes them). While it lives, the device's allocator may keep the blocks
  // `owner` frees for `owner` alone, and zeroes the blocks it hands `owner`
  // on this stream; allocations for `owner` should come after it is made.
  // InternalError naming the device when the device cannot make one.
  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream(uint64_t owner) const = 0;

  // The kernel of op `op_id` on this device; nullptr when it has none.
  virtual KernelFn FindKernel(uint32_t op_id) const = 0;
  // Gives back what the allocator keeps cached for reuse (a session closed,
  // the daemon went idle: PyTorch's empty_cache); returns the bytes given
  // back.
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
  // The devices served, in order: "cpu, privateuseone:0" (for messages).
  std::string Names() const {
    std::string names;
    for (const auto& b : backends_) names += (names.empty() ? "" : ", ") + b->device().ToString();
    return names;
  }
  Backend& operator[](size_t i) const { return *backends_[i]; }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

// One session's streams: one per device, made the first time the session
// uses the device, synchronized and destroyed with the session. Not
// thread-safe (its session's thread).
class SessionStreams {
 public:
  // `devices` must outlive it; `owner` is the session's MemoryAccount::id()
  // (what each stream is made for: Backend::CreateStream).
  SessionStreams(const Backends* devices, uint64_t owner) : devices_(devices), owner_(owner) {}
  ~SessionStreams();  // waits for every stream's work
  SessionStreams(const SessionStreams&) = delete;
  SessionStreams& operator=(const SessionStreams&) = delete;

  const Backends& devices() const { return *devices_; }
  uint64_t owner() const { return owner_; }
  // The session's stream on `backend`'s device (made on first use; the
  // backend's error when it cannot make one).
  absl::StatusOr<Stream*> For(const Backend& backend);
  // Waits for the work of every stream made so far; the first error.
  absl::Status SynchronizeAll();

 private:
  const Backends* const devices_;
  const uint64_t owner_;
  std::vector<std::pair<const Backend*, std::unique_ptr<Stream>>> streams_;  // a few devices: a list
};

// A device that failed for the rest of the process: a GPU fault (CUDA's
// "sticky" errors: an illegal memory access, an uncorrectable ECC error, a
// kernel that trapped) leaves the process's context on that device unusable,
// for every session, until the process restarts. A backend that detects
// one calls ReportDeviceFailure; the daemon's handler then fails every
// session, reports NOT_SERVING and exits so that its supervisor restarts it.
//
//   SetDeviceFailureHandler([](const Device& d, const std::string& why) { ... });
//   ReportDeviceFailure(Device{DeviceType::kCUDA, 0}, "an illegal memory access was encountered");
//   DeviceFailure();  // InternalError "cuda:0 failed (an illegal memory access was encountered)"
//
// Called with the device and what failed, as a phrase ("an illegal memory
// access was encountered"). Only the first report counts (later ones,
// usually the same fault seen by other streams, are logged at debug level):
// it is remembered (DeviceFailure) and handed to the handler once, on the
// reporting thread, with no lock of the runtime held. Thread-safe; never
// blocks beyond the handler.
void ReportDeviceFailure(const Device& device, std::string why);
// What the handler gets: the device and `why` as reported.
using DeviceFailureHandler = std::function<void(const Device& device, const std::string& why)>;
// Installs the process's handler (the daemon's; nullptr: none) and forgets
// any earlier failure, so that a process that runs one daemon after
// another (the tests) starts each clean. Must return promptly, without
// waiting for any stream's work: it runs inside the call that saw the fault.
void SetDeviceFailureHandler(DeviceFailureHandler handler);
// Whether a device failed since the handler was installed (one atomic load:
// cheap enough for every request).
bool DeviceFailed();
// InternalError "cuda:0 failed (why)" for the first failure reported; OK
// when none was.
absl::Status DeviceFailure();

// Copies `n` bytes from `src` on `from` to `dst` on `to`, on the session's
// streams, and returns when the bytes are in place (as PyTorch's
// non_blocking=False `.to()`): with memcpy when both sides are the daemon's
// own memory (Backend::host_addressable), else through the streams' copies,
// via a host buffer charged to `account` between two devices that are not
// (ResourceExhausted over its limit). InternalError naming `op` and both
// devices when a device's copy fails.
absl::Status CopyBetween(SessionStreams& streams, const Backend& from, const char* src, const Backend& to, char* dst,
                         size_t n, MemoryAccount& account, absl::string_view op);

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_BACKEND_H_
