// tensord/backends/test_device/test_device_backend.h — a second device for
// the test suite: host memory that behaves as a device of its own,
// "privateuseone:0" (PyTorch's slot for an out-of-tree device). A daemon
// serves it only when started with --test-device.
//
// It exists so that everything a GPU changes is tested on every CI run
// without one: its storages come from an allocator of its own, the
// runtime's CachingAllocator (charged to the session like any device's,
// counted apart from the CPU's), the daemon may not touch its bytes
// directly (host_addressable() is false, so uploads, fetches and moves
// between devices go through a Stream's copies),
// and its streams run their copies later, on a thread of their own, as a
// GPU's do (so a path that reads bytes before it synchronizes fails here),
// tensors on it and on the CPU in one op are refused as PyTorch refuses
// them, and `.to(device)` moves data across. Its kernels are the CPU's, run
// on its host memory. Its CachingAllocator (so every daemon test with
// --test-device runs it) zeroes blocks on the session's stream, as the CUDA
// backend's does.
#ifndef TENSORD_BACKENDS_TEST_DEVICE_TEST_DEVICE_BACKEND_H_
#define TENSORD_BACKENDS_TEST_DEVICE_TEST_DEVICE_BACKEND_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/kernels/registry.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/caching_allocator.h"

namespace tensord::backends {

// privateuseone:0.
inline constexpr Device kTestDevice{DeviceType::kPrivateUse1, 0};

// Test-only: a simulated device fault, for the tests of what the daemon does
// when a GPU fails (runtime::ReportDeviceFailure) without a GPU.
struct TestDeviceFault {
  // 0: never. N > 0: the N-th kernel launch on the device (counted over
  // every stream of the backend, from 1) fails as a GPU fault does: it
  // reports the device failed, and that launch and every later call of
  // every stream of the device (copies, launches, synchronize) return
  // InternalError naming the device and the fault. `tensord serve` reads
  // it from $TENSORD_TEST_DEVICE_FAULT_AT_LAUNCH, with --test-device only.
  int64_t at_launch = 0;
};

class TestDeviceBackend final : public HostMemoryBackend {
 public:
  // InternalError only on a build bug (a CPU kernel the table lacks).
  // `options`: the caching allocator's (tests make its pools small);
  // `fault`: a simulated fault (test-only).
  static absl::StatusOr<std::unique_ptr<TestDeviceBackend>> Create(runtime::CachingAllocatorOptions options = {},
                                                                   TestDeviceFault fault = {});

  std::string description() const override { return "test device (host memory, the cpu kernels)"; }
  bool host_addressable() const override { return false; }
  // A QueuedStream for `owner`: while it lives, the allocator keeps the
  // blocks `owner` frees for `owner` and zeroes `owner`'s blocks on it; when
  // it is destroyed (its work done), `owner` is detached.
  absl::StatusOr<std::unique_ptr<runtime::Stream>> CreateStream(uint64_t owner) const override;
  // CachingAllocator::EmptyCache.
  int64_t Trim() override;

  runtime::CachingAllocator& caching_allocator() const { return *caching_; }

  // The live streams by owner (shared with the memory source, which zeroes
  // on them and synchronizes them, and with the streams, which leave it).
  struct OwnerStreams;

  // The simulated fault's state, shared by the backend's streams.
  struct FaultState {
    explicit FaultState(TestDeviceFault f) : fault(f) {}
    const TestDeviceFault fault;
    std::atomic<int64_t> launches{0};
    std::atomic<bool> failed{false};
    // InternalError once the fault happened; OK before (and without one).
    absl::Status Check(const Device& device) const;
    // Counts a launch: the fault's error when this is the one that fails.
    absl::Status CountLaunch(const Device& device);
  };

 private:
  TestDeviceBackend(std::shared_ptr<runtime::CachingAllocator> allocator, std::shared_ptr<OwnerStreams> streams,
                    TestDeviceFault fault);

  std::shared_ptr<runtime::CachingAllocator> caching_;  // allocator(), as itself
  std::shared_ptr<OwnerStreams> streams_;
  const std::shared_ptr<FaultState> fault_;
};

// The test device's stream: copies are queued and run in order on a thread
// of the stream's own (started with the first), so they may finish after
// the call that issued them returned, as on a GPU; a kernel runs on the
// calling thread once the queued work is done (the CPU's kernels compute
// there, and their errors stay synchronous). Used by one thread at a time,
// except that Synchronize may be called from any thread (the allocator
// waits for every stream before it gives memory back); its Events may be
// waited for anywhere and outlive it.
class QueuedStream : public runtime::Stream {
 public:
  // `fault`: the backend's simulated fault (TestDeviceFault), or null.
  explicit QueuedStream(Device device, std::shared_ptr<TestDeviceBackend::FaultState> fault = nullptr);
  ~QueuedStream() override;  // runs what is queued, then stops the thread

  Device device() const override { return device_; }
  void* native_handle() const override { return nullptr; }
  absl::Status CopyFromHost(char* device_dst, const char* host_src, size_t n) override;
  absl::Status CopyToHost(char* host_dst, const char* device_src, size_t n) override;
  absl::Status CopyWithin(char* device_dst, const char* device_src, size_t n) override;
  // Sets `n` bytes at `device_dst` to `value`, in order (cudaMemsetAsync);
  // issued while a kernel runs (Launch), at once, since the kernel's own
  // work is done on the calling thread.
  absl::Status Memset(char* device_dst, int value, size_t n);
  absl::Status Launch(KernelFn kernel, KernelContext& ctx) override;
  absl::StatusOr<std::shared_ptr<runtime::Event>> Record() override;
  absl::Status Wait(const std::shared_ptr<runtime::Event>& event) override;
  absl::Status Synchronize() override;

  // Work issued so far, and work done (tests watch the order).
  uint64_t issued() const;
  uint64_t done() const;

  // What the stream and its Events share (Events outlive the stream).
  struct Progress {
    // A std::mutex rather than absl::Mutex: ThreadSanitizer sees through
    // pthread mutexes, not through Debian's uninstrumented abseil.
    mutable std::mutex mu;
    std::condition_variable cv;  // notified as `done` grows
    uint64_t done = 0;           // tasks finished, in order
  };

 private:
  // Queues `task` as the next in order; runs it at once when no thread
  // can be started (order is kept either way).
  void Enqueue(std::function<void()> task);
  void Loop();
  void SetInKernel(bool in);

  const Device device_;
  const std::shared_ptr<TestDeviceBackend::FaultState> fault_;
  const std::shared_ptr<Progress> progress_ = std::make_shared<Progress>();
  // Guarded by progress_->mu.
  std::deque<std::function<void()>> queue_;
  uint64_t issued_ = 0;
  bool stop_ = false;
  bool in_kernel_ = false;  // a kernel of Launch is running
  std::thread worker_;  // started by the first Enqueue
};

}  // namespace tensord::backends

#endif  // TENSORD_BACKENDS_TEST_DEVICE_TEST_DEVICE_BACKEND_H_
