// The test device: host memory behind explicit copies, the CPU's kernels,
// and streams whose copies run later, on a thread of their own.
#include "tensord/backends/test_device/test_device_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"

namespace tensord::backends {

struct TestDeviceBackend::OwnerStreams {
  std::mutex mu;  // guards by_owner
  // Each owner's live streams, the newest last (a session has one; tests
  // may make more).
  std::unordered_map<uint64_t, std::vector<QueuedStream*>> by_owner;
};

namespace {

// The test device's memory for the CachingAllocator: anonymous host
// mappings, zeroed on the owner's stream.
class HostMemorySource final : public runtime::DeviceMemorySource {
 public:
  explicit HostMemorySource(std::shared_ptr<TestDeviceBackend::OwnerStreams> streams)
      : streams_(std::move(streams)) {}

  Device device() const override { return kTestDevice; }
  int64_t total_bytes() const override { return HostMemoryBackend::PhysicalMemoryBytes(); }

  absl::StatusOr<char*> Map(size_t nbytes) override {
    void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) return static_cast<char*>(p);
    const int e = errno;
    if (e == ENOMEM) return OutOfMemoryErr("mmap: out of memory");
    return InternalErr(absl::StrCat("mmap of ", nbytes, " bytes failed: ", std::strerror(e)));
  }

  void Unmap(char* base, size_t nbytes) override { munmap(base, nbytes); }

  absl::Status Zero(char* p, size_t n, uint64_t owner) override {
    {
      std::lock_guard<std::mutex> lock(streams_->mu);
      if (auto it = streams_->by_owner.find(owner); it != streams_->by_owner.end() && !it->second.empty()) {
        return it->second.back()->Memset(p, 0, n);
      }
    }
    // No stream of the owner's: no queued work of anyone uses the block.
    std::memset(p, 0, n);
    return absl::OkStatus();
  }

  absl::Status Synchronize() override {
    std::lock_guard<std::mutex> lock(streams_->mu);
    absl::Status first;
    for (auto& [owner, streams] : streams_->by_owner) {
      for (QueuedStream* s : streams) first.Update(s->Synchronize());
    }
    return first;
  }

 private:
  const std::shared_ptr<TestDeviceBackend::OwnerStreams> streams_;
};

// A session's stream: registered for its owner while it lives, so that the
// allocator zeroes the owner's blocks on it; its owner is detached once its
// work is done.
class SessionQueuedStream final : public QueuedStream {
 public:
  SessionQueuedStream(uint64_t owner, std::shared_ptr<TestDeviceBackend::OwnerStreams> streams,
                      std::shared_ptr<runtime::CachingAllocator> allocator,
                      std::shared_ptr<TestDeviceBackend::FaultState> fault)
      : QueuedStream(kTestDevice, std::move(fault)),
        owner_(owner),
        streams_(std::move(streams)),
        allocator_(std::move(allocator)) {}

  ~SessionQueuedStream() override {
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(streams_->mu);
      auto it = streams_->by_owner.find(owner_);
      if (it != streams_->by_owner.end()) {
        auto& v = it->second;
        v.erase(std::remove(v.begin(), v.end(), this), v.end());
        if (v.empty()) {
          streams_->by_owner.erase(it);
          last = true;
        }
      }
    }
    // What the owner freed may be in use by work queued here until this
    // returns; then anyone may have it.
    (void)Synchronize();
    if (last) allocator_->DetachOwner(owner_);
  }

 private:
  const uint64_t owner_;
  const std::shared_ptr<TestDeviceBackend::OwnerStreams> streams_;
  const std::shared_ptr<runtime::CachingAllocator> allocator_;
};

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

TestDeviceBackend::TestDeviceBackend(std::shared_ptr<runtime::CachingAllocator> allocator,
                                     std::shared_ptr<OwnerStreams> streams, TestDeviceFault fault)
    : HostMemoryBackend(allocator),
      caching_(std::move(allocator)),
      streams_(std::move(streams)),
      fault_(fault.at_launch > 0 ? std::make_shared<FaultState>(fault) : nullptr) {}

absl::StatusOr<std::unique_ptr<TestDeviceBackend>> TestDeviceBackend::Create(runtime::CachingAllocatorOptions options,
                                                                             TestDeviceFault fault) {
  auto streams = std::make_shared<OwnerStreams>();
  auto allocator = std::make_shared<runtime::CachingAllocator>(std::make_unique<HostMemorySource>(streams), options);
  std::unique_ptr<TestDeviceBackend> b(new TestDeviceBackend(std::move(allocator), std::move(streams), fault));
  TD_RETURN_IF_ERROR(b->RegisterKernels());
  return b;
}

absl::StatusOr<std::unique_ptr<runtime::Stream>> TestDeviceBackend::CreateStream(uint64_t owner) const {
  TD_RETURN_IF_ERROR(fault_ != nullptr ? fault_->Check(device()) : absl::OkStatus());
  if (owner == 0) return std::make_unique<QueuedStream>(device(), fault_);  // no session's: nothing to order
  auto s = std::make_unique<SessionQueuedStream>(owner, streams_, caching_, fault_);
  {
    std::lock_guard<std::mutex> lock(streams_->mu);
    streams_->by_owner[owner].push_back(s.get());
  }
  caching_->AttachOwner(owner);
  return s;
}

int64_t TestDeviceBackend::Trim() { return caching_->EmptyCache(); }

namespace {

std::string SimulatedFault(int64_t at_launch) {
  return absl::StrCat("a simulated fault at kernel launch ", at_launch, " (TENSORD_TEST_DEVICE_FAULT_AT_LAUNCH)");
}

}  // namespace

absl::Status TestDeviceBackend::FaultState::Check(const Device& device) const {
  if (!failed.load(std::memory_order_acquire)) return absl::OkStatus();
  return InternalErr(absl::StrCat(device.ToString(), ": ", SimulatedFault(fault.at_launch)));
}

absl::Status TestDeviceBackend::FaultState::CountLaunch(const Device& device) {
  TD_RETURN_IF_ERROR(Check(device));
  if (launches.fetch_add(1, std::memory_order_relaxed) + 1 != fault.at_launch) return absl::OkStatus();
  failed.store(true, std::memory_order_release);
  runtime::ReportDeviceFailure(device, SimulatedFault(fault.at_launch));
  return Check(device);
}

QueuedStream::QueuedStream(Device device, std::shared_ptr<TestDeviceBackend::FaultState> fault)
    : device_(device), fault_(std::move(fault)) {}

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
  TD_RETURN_IF_ERROR(fault_ != nullptr ? fault_->Check(device_) : absl::OkStatus());
  if (n > 0) Enqueue([=] { std::memcpy(device_dst, host_src, n); });
  return absl::OkStatus();
}

absl::Status QueuedStream::CopyToHost(char* host_dst, const char* device_src, size_t n) {
  TD_RETURN_IF_ERROR(fault_ != nullptr ? fault_->Check(device_) : absl::OkStatus());
  if (n > 0) Enqueue([=] { std::memcpy(host_dst, device_src, n); });
  return absl::OkStatus();
}

absl::Status QueuedStream::CopyWithin(char* device_dst, const char* device_src, size_t n) {
  TD_RETURN_IF_ERROR(fault_ != nullptr ? fault_->Check(device_) : absl::OkStatus());
  if (n > 0) Enqueue([=] { std::memmove(device_dst, device_src, n); });
  return absl::OkStatus();
}

absl::Status QueuedStream::Memset(char* device_dst, int value, size_t n) {
  if (n == 0) return absl::OkStatus();
  bool now;
  {
    std::lock_guard<std::mutex> lock(progress_->mu);
    now = in_kernel_;
  }
  if (now) {
    // Issued by the running kernel (an output it allocates, its scratch):
    // the kernel computes on this thread after the queued work, and writes
    // the block next, so the memset is due now, not after the kernel.
    std::memset(device_dst, value, n);
    return absl::OkStatus();
  }
  Enqueue([=] { std::memset(device_dst, value, n); });
  return absl::OkStatus();
}

absl::Status QueuedStream::Launch(KernelFn kernel, KernelContext& ctx) {
  TD_RETURN_IF_ERROR(Synchronize());
  TD_RETURN_IF_ERROR(fault_ != nullptr ? fault_->CountLaunch(device_) : absl::OkStatus());
  ctx.stream = nullptr;
  SetInKernel(true);
  absl::Status s;
  try {
    s = kernel(ctx);
  } catch (...) {
    SetInKernel(false);
    throw;  // the dispatcher reports it
  }
  SetInKernel(false);
  return s;
}

void QueuedStream::SetInKernel(bool in) {
  std::lock_guard<std::mutex> lock(progress_->mu);
  in_kernel_ = in;
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
  TD_RETURN_IF_ERROR(now->Synchronize());
  return fault_ != nullptr ? fault_->Check(device_) : absl::OkStatus();
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
