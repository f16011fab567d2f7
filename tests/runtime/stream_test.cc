// Streams and events on the two host backends: the CPU's work is done when
// issued; the test device's copies run later, in order, on a thread of
// their own, as a GPU's do. A session's copies between devices
// (CopyBetween) and its kernels wait for what they depend on, and the
// Dispatcher runs kernels on the session's stream.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/backends/test_device/test_device_backend.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/dispatcher.h"

namespace tensord::runtime {
namespace {

using backends::QueuedStream;

// An event the test marks done: holds back whatever waits for it.
class Gate final : public Event {
 public:
  bool Query() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
  }
  absl::Status Synchronize() const override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
    return absl::OkStatus();
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool open_ = false;
};

std::vector<char> Bytes(size_t n, char first) {
  std::vector<char> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(QueuedStreamTest, CopiesRunLaterInTheOrderIssued) {
  QueuedStream s(backends::kTestDevice);
  auto gate = std::make_shared<Gate>();
  const std::vector<char> src = Bytes(4096, 1);
  std::vector<char> dev(4096, 0), mid(4096, 0), back(4096, 0);
  ASSERT_TRUE(s.Wait(gate).ok());  // holds back everything issued after it
  ASSERT_TRUE(s.CopyFromHost(dev.data(), src.data(), src.size()).ok());
  ASSERT_TRUE(s.CopyWithin(mid.data(), dev.data(), dev.size()).ok());
  ASSERT_TRUE(s.CopyToHost(back.data(), mid.data(), mid.size()).ok());
  absl::StatusOr<std::shared_ptr<Event>> e = s.Record();
  ASSERT_TRUE(e.ok());
  // Issued, not done: the calls returned before any byte moved.
  EXPECT_FALSE((*e)->Query());
  EXPECT_EQ(s.issued(), 4u);
  EXPECT_EQ(s.done(), 0u);
  EXPECT_EQ(back, std::vector<char>(4096, 0));
  gate->Open();
  ASSERT_TRUE((*e)->Synchronize().ok());
  EXPECT_TRUE((*e)->Query());
  EXPECT_EQ(back, src);  // each copy saw the one before it
  EXPECT_EQ(s.done(), 4u);
}

TEST(QueuedStreamTest, WaitOrdersOneStreamAfterAnother) {
  QueuedStream producer(backends::kTestDevice), consumer(backends::kTestDevice);
  auto gate = std::make_shared<Gate>();
  const std::vector<char> src = Bytes(1000, 7);
  std::vector<char> dev(1000, 0), out(1000, 0);
  ASSERT_TRUE(producer.Wait(gate).ok());
  ASSERT_TRUE(producer.CopyFromHost(dev.data(), src.data(), src.size()).ok());
  absl::StatusOr<std::shared_ptr<Event>> written = producer.Record();
  ASSERT_TRUE(written.ok());
  ASSERT_TRUE(consumer.Wait(*written).ok());
  ASSERT_TRUE(consumer.CopyToHost(out.data(), dev.data(), dev.size()).ok());
  absl::StatusOr<std::shared_ptr<Event>> read = consumer.Record();
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE((*read)->Query());  // the consumer waits for the producer, which waits for the gate
  gate->Open();
  ASSERT_TRUE(consumer.Synchronize().ok());
  EXPECT_TRUE((*written)->Query());
  EXPECT_EQ(out, src);
}

TEST(QueuedStreamTest, EventsOutliveTheirStreamAndTheStreamFinishesItsWork) {
  const std::vector<char> src = Bytes(256, 3);
  std::vector<char> dst(256, 0);
  std::shared_ptr<Event> e;
  {
    QueuedStream s(backends::kTestDevice);
    ASSERT_TRUE(s.CopyToHost(dst.data(), src.data(), src.size()).ok());
    e = *s.Record();
  }  // destroyed with its copy possibly still queued: the destructor runs it
  EXPECT_TRUE(e->Query());
  EXPECT_TRUE(e->Synchronize().ok());
  EXPECT_EQ(dst, src);
}

// A kernel that reads what a copy issued just before it wrote.
std::atomic<int> seen_first_byte{-1};
const char* kernel_reads = nullptr;
absl::Status ReadFirstByte(KernelContext& ctx) {
  if (ctx.stream != nullptr) return InternalErr("the test device's kernels compute on the calling thread");
  seen_first_byte = kernel_reads[0];
  return absl::OkStatus();
}

TEST(QueuedStreamTest, LaunchRunsTheKernelAfterTheQueuedCopies) {
  QueuedStream s(backends::kTestDevice);
  auto gate = std::make_shared<Gate>();
  const std::vector<char> src(64, 42);
  std::vector<char> dev(64, 0);
  kernel_reads = dev.data();
  ASSERT_TRUE(s.Wait(gate).ok());
  ASSERT_TRUE(s.CopyFromHost(dev.data(), src.data(), src.size()).ok());
  // Opens the gate a little later, from another thread: Launch must wait for it.
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate->Open();
  });
  KernelContext ctx;
  EXPECT_TRUE(s.Launch(ReadFirstByte, ctx).ok());
  opener.join();
  EXPECT_EQ(seen_first_byte.load(), 42);
}

TEST(HostStreamTest, WorkIsDoneWhenIssuedAndWaitHoldsTheCaller) {
  backends::HostStream s(kCPU);
  EXPECT_EQ(s.native_handle(), nullptr);
  const std::vector<char> src = Bytes(128, 9);
  std::vector<char> dst(128, 0);
  ASSERT_TRUE(s.CopyToHost(dst.data(), src.data(), src.size()).ok());
  EXPECT_EQ(dst, src);  // no Synchronize needed
  EXPECT_TRUE((*s.Record())->Query());
  // Waiting for another stream's pending event holds the CPU stream's
  // caller: its next work runs on that thread.
  auto gate = std::make_shared<Gate>();
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    EXPECT_TRUE(s.Wait(gate).ok());
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(returned.load());
  gate->Open();
  waiter.join();
  EXPECT_TRUE(returned.load());
}

class SessionStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cpu = backends::CpuBackend::Create({});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = cpu->get();
    devices_.Add(*std::move(cpu));
    auto test = backends::TestDeviceBackend::Create();
    ASSERT_TRUE(test.ok()) << test.status();
    test_ = test->get();
    devices_.Add(*std::move(test));
    account_ = MemoryAccount::Create(int64_t{1} << 30);
  }

  Backends devices_;
  Backend* cpu_ = nullptr;
  Backend* test_ = nullptr;
  std::shared_ptr<MemoryAccount> account_;
};

TEST_F(SessionStreamsTest, OneStreamPerDeviceMadeOnFirstUse) {
  SessionStreams streams(&devices_, account_->id());
  absl::StatusOr<Stream*> a = streams.For(*test_);
  absl::StatusOr<Stream*> b = streams.For(*test_);
  absl::StatusOr<Stream*> c = streams.For(*cpu_);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ((*a)->device(), backends::kTestDevice);
  EXPECT_EQ((*c)->device(), kCPU);
  // Another session has streams of its own.
  auto other_account = MemoryAccount::Create(0);
  SessionStreams other(&devices_, other_account->id());
  EXPECT_NE(*other.For(*test_), *a);
}

TEST_F(SessionStreamsTest, CopyBetweenReturnsWithTheBytesInPlace) {
  SessionStreams streams(&devices_, account_->id());
  const std::vector<char> src = Bytes(1 << 20, 5);
  auto on_test = account_->Allocate(test_->allocator(), src.size(), "to", false);
  auto on_test2 = account_->Allocate(test_->allocator(), src.size(), "to", false);
  ASSERT_TRUE(on_test.ok() && on_test2.ok());
  std::vector<char> back(src.size(), 0);
  // cpu -> test device -> test device (through a host buffer: neither side
  // is host-addressable) -> cpu, with no Synchronize between.
  ASSERT_TRUE(CopyBetween(streams, *cpu_, src.data(), *test_, (*on_test)->data(), src.size(), *account_, "to").ok());
  ASSERT_TRUE(CopyBetween(streams, *test_, (*on_test)->data(), *test_, (*on_test2)->data(), src.size(), *account_,
                          "to")
                  .ok());
  ASSERT_TRUE(CopyBetween(streams, *test_, (*on_test2)->data(), *cpu_, back.data(), src.size(), *account_, "to").ok());
  EXPECT_EQ(back, src);
  // The host buffer is given back once the copy is done.
  EXPECT_EQ(account_->bytes_in_use(), 2 * static_cast<int64_t>(src.size()));
}

TEST_F(SessionStreamsTest, CopyBetweenChargesItsHostBufferAndFailsOverTheLimit) {
  auto small = MemoryAccount::Create(3000);
  SessionStreams streams(&devices_, small->id());
  auto a = small->Allocate(test_->allocator(), 1000, "to", false);
  auto b = small->Allocate(test_->allocator(), 1000, "to", false);
  ASSERT_TRUE(a.ok() && b.ok());
  // 2000 bytes held; a 1000-byte host buffer fits, a 2000-byte copy's does not.
  EXPECT_TRUE(CopyBetween(streams, *test_, (*a)->data(), *test_, (*b)->data(), 1000, *small, "to").ok());
  auto c = small->Allocate(test_->allocator(), 500, "to", false);
  ASSERT_TRUE(c.ok());
  absl::Status s = CopyBetween(streams, *test_, (*a)->data(), *test_, (*b)->data(), 1000, *small, "to");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("to"), std::string::npos) << s;
}

TEST_F(SessionStreamsTest, TheDispatcherRunsKernelsOnTheSessionsStream) {
  Dispatcher d(&devices_, account_);
  // ones on the test device, moved to the CPU: the move is a copy on the
  // session's test-device stream, which the CPU's kernel must wait for.
  absl::StatusOr<std::vector<Tensor>> ones =
      d.RunOp("ones", {Shape{1000}, ScalarType::kFloat32, backends::kTestDevice}, false);
  ASSERT_TRUE(ones.ok()) << ones.status();
  absl::StatusOr<std::vector<Tensor>> sum = d.RunOp("sum", {(*ones)[0]}, false);
  ASSERT_TRUE(sum.ok()) << sum.status();
  absl::StatusOr<std::vector<Tensor>> on_cpu = d.RunOp("to.device", {(*sum)[0], kCPU}, false);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_EQ((*on_cpu)[0].storage->device(), kCPU);
  EXPECT_EQ(*reinterpret_cast<const float*>((*on_cpu)[0].storage->data()), 1000.0f);
  absl::StatusOr<Stream*> stream = d.streams().For(*test_);
  ASSERT_TRUE(stream.ok());
  auto* queued = dynamic_cast<QueuedStream*>(*stream);
  ASSERT_NE(queued, nullptr);
  EXPECT_GE(queued->issued(), 1u);  // the move's copy went through it
  EXPECT_EQ(queued->done(), queued->issued());
}

}  // namespace
}  // namespace tensord::runtime
