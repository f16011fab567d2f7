// The test device: host memory behind explicit copies, the CPU's kernels,
// and streams whose copies run later, on a thread of their own.
#include "tensord/backends/test_device/test_device_backend.h"

#include <cstring>
#include <system_error>
#include <utility>

#include "tensord/meta/errors.h"

namespace tensord::backends {

namespace {

CpuAllocatorOptions TestDeviceAllocatorOptions() {
  CpuAllocatorOptions o;
  o.cache_limit_bytes = 0;  // every free gives memory back: a leak shows in bytes_in_use at once
  return o;
}

// A point in a QueuedStream's order: done once `target` tasks are.
class QueuedEvent final : public runtime::Event {
 public:
  QueuedEvent(std::shared_ptr<QueuedStream::Progress> progress, uint64_t target)
      : progress_(std::move(progress)), target_(target) {}
  bool Query() const override {
    std::lock_guard<std::mutex> lock(progress_->mu);
    return progress_->done >= target_;
  }
  absl::Status Synchronize() const override {
    std::unique_lock<std::mutex> lock(progress_->mu);
    progress_->cv.wait(lock, [&] { return progress_->done >= target_; });
    return absl::OkStatus();
  }

 private:
  const std::shared_ptr<QueuedStream::Progress> progress_;
  const uint64_t target_;
};

}  // namespace

TestDeviceBackend::TestDeviceBackend() : HostMemoryBackend(TestDeviceAllocatorOptions(), kTestDevice) {}

absl::StatusOr<std::unique_ptr<TestDeviceBackend>> TestDeviceBackend::Create() {
  std::unique_ptr<TestDeviceBackend> b(new TestDeviceBackend());
  TD_RETURN_IF_ERROR(b->RegisterKernels());
  return b;
}

absl::StatusOr<std::unique_ptr<runtime::Stream>> TestDeviceBackend::CreateStream() const {
  return std::make_unique<QueuedStream>(device());
}

QueuedStream::QueuedStream(Device device) : device_(device) {}

QueuedStream::~QueuedStream() {
  {
    std::lock_guard<std::mutex> lock(progress_->mu);
    stop_ = true;
  }
  progress_->cv.notify_all();
  if (worker_.joinable()) worker_.join();  // the loop empties the queue first
}

void QueuedStream::Enqueue(std::function<void()> task) {
  std::unique_lock<std::mutex> lock(progress_->mu);
  ++issued_;
  if (!worker_.joinable()) {
    try {
      worker_ = std::thread([this] { Loop(); });
    } catch (const std::system_error&) {
      // No thread: run in order here, after what is queued (nothing is:
      // without a thread nothing was ever queued).
      lock.unlock();
      task();
      lock.lock();
      ++progress_->done;
      progress_->cv.notify_all();
      return;
    }
  }
  queue_.push_back(std::move(task));
  progress_->cv.notify_all();
}

void QueuedStream::Loop() {
  std::unique_lock<std::mutex> lock(progress_->mu);
  for (;;) {
    progress_->cv.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    lock.lock();
    ++progress_->done;
    progress_->cv.notify_all();
  }
}

absl::Status QueuedStream::CopyFromHost(char* device_dst, const char* host_src, size_t n) {
  if (n > 0) Enqueue([=] { std::memcpy(device_dst, host_src, n); });
  return absl::OkStatus();
}

absl::Status QueuedStream::CopyToHost(char* host_dst, const char* device_src, size_t n) {
  if (n > 0) Enqueue([=] { std::memcpy(host_dst, device_src, n); });
  return absl::OkStatus();
}

absl::Status QueuedStream::CopyWithin(char* device_dst, const char* device_src, size_t n) {
  if (n > 0) Enqueue([=] { std::memmove(device_dst, device_src, n); });
  return absl::OkStatus();
}

absl::Status QueuedStream::Launch(KernelFn kernel, KernelContext& ctx) {
  TD_RETURN_IF_ERROR(Synchronize());
  ctx.stream = nullptr;
  return kernel(ctx);
}

absl::StatusOr<std::shared_ptr<runtime::Event>> QueuedStream::Record() {
  std::lock_guard<std::mutex> lock(progress_->mu);
  return std::make_shared<QueuedEvent>(progress_, issued_);
}

absl::Status QueuedStream::Wait(const std::shared_ptr<runtime::Event>& event) {
  if (event->Query()) return absl::OkStatus();
  Enqueue([event] { (void)event->Synchronize(); });
  return absl::OkStatus();
}

absl::Status QueuedStream::Synchronize() {
  TD_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Event> now, Record());
  return now->Synchronize();
}

uint64_t QueuedStream::issued() const {
  std::lock_guard<std::mutex> lock(progress_->mu);
  return issued_;
}

uint64_t QueuedStream::done() const {
  std::lock_guard<std::mutex> lock(progress_->mu);
  return progress_->done;
}

}  // namespace tensord::backends
