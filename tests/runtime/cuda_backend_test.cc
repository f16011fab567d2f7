// The CUDA backend (server/backends/cuda/). Two kinds of tests:
//   - Cuda{ErrorWord,StickyError,Architectures}Test and CudaBackendTest run
//     everywhere the build has CUDA, GPU or not: what the backend decides
//     without a device (messages, fault classification, which GPUs this
//     build can serve, a backend made without touching its GPU, and what a
//     machine without a driver answers);
//   - CudaGpuTest needs a GPU and skips visibly without one ("no CUDA
//     device: ..."): allocation, copies larger than the staging buffers,
//     copies within the device, event order between two sessions' streams,
//     the error word's round trip, EmptyCache back to the baseline, out of
//     memory, and a real fault (in a child process) reported as the device
//     failing. scripts/gpu-check.sh runs them on a GPU machine.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "tensord/backends/cuda/cuda_backend.h"
#include "tensord/backends/cuda/discovery.h"
#include "tensord/kernels/device_error.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/memory.h"

// tests/runtime/cuda_fault_kernel.cu
int TensordTestLaunchIllegalWrite(void* stream);

namespace tensord::backends {
namespace {

using ::testing::HasSubstr;
using runtime::MemoryAccount;
using runtime::Storage;
using runtime::Stream;

uint32_t OpId(const char* full_name) {
  const OpEntry* op = OpTable::Get().Find(full_name);
  EXPECT_NE(op, nullptr) << full_name;
  return op == nullptr ? 0 : op->id;
}

// ---- without a GPU ---------------------------------------------------------------

TEST(CudaErrorWordTest, SaysWhatTheCpuKernelsSay) {
  EXPECT_TRUE(DeviceErrorToStatus(DeviceErrorWord{kNoDeviceError, 0, 0, 0, 0}).ok());
  const absl::Status index =
      DeviceErrorToStatus(DeviceErrorWord{kIndexOutOfBounds, OpId("index_select"), 7, 0, 5});
  EXPECT_EQ(KindOf(index), ErrorKind::kIndex);
  EXPECT_EQ(index.message(), "index_select(): index 7 is out of bounds for dimension 0 with size 5");
  const absl::Status negative = DeviceErrorToStatus(DeviceErrorWord{kIndexOutOfBounds, OpId("gather"), -9, 2, 4});
  EXPECT_EQ(KindOf(negative), ErrorKind::kRuntime);  // gather's, as the CPU kernel and PyTorch
  EXPECT_EQ(negative.message(), "index -9 is out of bounds for dimension 2 with size 4");
  const absl::Status target = DeviceErrorToStatus(DeviceErrorWord{kTargetOutOfBounds, OpId("gather"), 7, -1, 5});
  EXPECT_EQ(KindOf(target), ErrorKind::kIndex);
  EXPECT_EQ(target.message(), "Target 7 is out of bounds.");
  // A kernel's bugs: an unknown code, an op id past the table.
  const absl::Status unknown = DeviceErrorToStatus(DeviceErrorWord{99, 0xFFFFFFFFu, 1, 2, 3});
  EXPECT_EQ(KindOf(unknown), ErrorKind::kInternal);
  EXPECT_THAT(unknown.message(), HasSubstr("op 4294967295: its kernel recorded the unknown device error code 99"));
}

TEST(CudaStickyErrorTest, OnlyErrorsThatLeaveTheContextUnusable) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorECCUncorrectable,
                        cudaErrorHardwareStackError, cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
                        cudaErrorInvalidPc, cudaErrorAssert, cudaErrorLaunchTimeout, cudaErrorContained,
                        cudaErrorNvlinkUncorrectable}) {
    EXPECT_TRUE(IsStickyCudaError(e)) << cudaGetErrorName(e);
  }
  for (cudaError_t e : {cudaSuccess, cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorNotReady,
                        cudaErrorLaunchOutOfResources, cudaErrorInsufficientDriver, cudaErrorNoDevice,
                        cudaErrorNoKernelImageForDevice}) {
    EXPECT_FALSE(IsStickyCudaError(e)) << cudaGetErrorName(e);
  }
}

TEST(CudaArchitecturesTest, MachineCodeForItsMajorVersionOrPtxForAnOlderOne) {
  const char* ours = "80-real,90-real,90-virtual";
  for (auto [major, minor] : std::vector<std::pair<int, int>>{{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}}) {
    EXPECT_TRUE(CheckCudaArchitectures(ours, major, minor).ok()) << major << "." << minor;
  }
  const absl::Status old = CheckCudaArchitectures(ours, 7, 5);
  EXPECT_TRUE(absl::IsFailedPrecondition(old));
  EXPECT_EQ(old.message(),
            "compute capability 7.5 runs none of this build's CUDA code (built for 80-real,90-real,90-virtual); "
            "rebuild with CMAKE_CUDA_ARCHITECTURES including 75");
  EXPECT_FALSE(CheckCudaArchitectures("90", 8, 0).ok());       // sm_90 and compute_90: nothing for 8.0
  EXPECT_TRUE(CheckCudaArchitectures("90", 10, 0).ok());       // compute_90 PTX, compiled by the driver
  EXPECT_FALSE(CheckCudaArchitectures("90-real", 10, 0).ok());  // machine code only runs on 9.x
  EXPECT_FALSE(CheckCudaArchitectures("86-real", 8, 0).ok());
  EXPECT_TRUE(CheckCudaArchitectures("86-real;75", 8, 9).ok());  // ';' as CMake writes lists
  EXPECT_TRUE(CheckCudaArchitectures("90a-real", 9, 0).ok());
  EXPECT_FALSE(CheckCudaArchitectures("90a-real", 10, 0).ok());
  EXPECT_TRUE(CheckCudaArchitectures("native", 7, 0).ok());  // unknown here: the driver decides
  EXPECT_FALSE(BuiltCudaArchitectures().empty());
  EXPECT_TRUE(CheckCudaArchitectures(BuiltCudaArchitectures(), 9, 0).ok()) << BuiltCudaArchitectures();
}

CudaDeviceInfo FakeGpu(int major, int minor) {
  CudaDeviceInfo info;
  info.index = 0;
  info.name = "NVIDIA Test GPU";
  info.total_memory_bytes = int64_t{80} << 30;
  info.major = major;
  info.minor = minor;
  return info;
}

TEST(CudaBackendTest, ABuildWithoutCodeForTheGpuRefusesIt) {
  absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(FakeGpu(7, 5));
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(b.status()));
  EXPECT_THAT(b.status().message(), HasSubstr("cuda:0 (NVIDIA Test GPU): compute capability 7.5 runs none"));
}

TEST(CudaBackendTest, ItDescribesItsGpuWithoutTouchingIt) {
  // No CUDA call happens until a stream or an allocation needs one: this
  // runs without a GPU or a driver.
  absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(FakeGpu(9, 0));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->device(), (Device{DeviceType::kCUDA, 0}));
  EXPECT_EQ((*b)->description(), "NVIDIA Test GPU");  // torch.cuda.get_device_name's answer
  EXPECT_EQ((*b)->capability(), (std::pair<int, int>{9, 0}));
  EXPECT_EQ((*b)->total_memory_bytes(), int64_t{80} << 30);
  EXPECT_EQ((*b)->free_memory_bytes(), int64_t{80} << 30);  // no context made to ask the GPU
  EXPECT_FALSE((*b)->host_addressable());
  EXPECT_EQ((*b)->allocator()->device(), (Device{DeviceType::kCUDA, 0}));
  EXPECT_EQ((*b)->Trim(), 0);  // nothing mapped: nothing to give back
}

TEST(CudaBackendTest, WithoutADriverStreamsAndMemoryFailWithoutReportingAFault) {
  const CudaDiscovery d = DiscoverCudaDevices();
  if (!d.devices.empty()) GTEST_SKIP() << "a GPU is present (CudaGpuTest covers it)";
  std::vector<std::string> failures;
  runtime::SetDeviceFailureHandler([&](const Device& dev, const std::string& why) {
    failures.push_back(dev.ToString() + ": " + why);
  });
  absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(FakeGpu(9, 0));
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::unique_ptr<Stream>> s = (*b)->CreateStream(/*owner=*/1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(KindOf(s.status()), ErrorKind::kInternal);
  EXPECT_THAT(s.status().message(), HasSubstr("cuda:0: cudaSetDevice: "));
  auto account = MemoryAccount::Create(0);
  absl::StatusOr<std::shared_ptr<Storage>> st = account->Allocate((*b)->allocator(), 4096, "zeros");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(account->bytes_in_use(), 0);
  // Not a fault: the daemon must not restart over a missing driver.
  EXPECT_TRUE(failures.empty()) << failures[0];
  EXPECT_FALSE(runtime::DeviceFailed());
  runtime::SetDeviceFailureHandler(nullptr);
}

// ---- on a GPU --------------------------------------------------------------------

constexpr size_t kChunk = size_t{1} << 20;  // the staging buffers' size in these tests

std::vector<char> Pattern(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<char>(x >> 24);
  }
  return v;
}

class CudaGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaDiscovery d = DiscoverCudaDevices();
    if (d.devices.empty()) GTEST_SKIP() << "no CUDA device: " << d.why_none;
    info_ = d.devices[0];
    CudaBackendOptions o;
    o.staging_chunk_bytes = kChunk;
    absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(info_, o);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
    runtime::SetDeviceFailureHandler([this](const Device& dev, const std::string& why) {
      failures_.push_back(dev.ToString() + ": " + why);
    });
  }
  void TearDown() override {
    // No test but the fault's (in its own process) may fail the device.
    EXPECT_TRUE(failures_.empty()) << failures_[0];
    runtime::SetDeviceFailureHandler(nullptr);
  }

  std::unique_ptr<Stream> NewStream(uint64_t owner) {
    absl::StatusOr<std::unique_ptr<Stream>> s = backend_->CreateStream(owner);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  std::shared_ptr<Storage> Alloc(const std::shared_ptr<MemoryAccount>& account, size_t n, bool zero = false) {
    absl::StatusOr<std::shared_ptr<Storage>> s =
        account->Allocate(backend_->allocator(), static_cast<int64_t>(n), "cuda_test", zero);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  // Free bytes of the GPU, as the driver says.
  int64_t FreeBytes() {
    EXPECT_EQ(cudaSetDevice(info_.index), cudaSuccess);
    size_t free_bytes = 0, total_bytes = 0;
    EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    return static_cast<int64_t>(free_bytes);
  }

  CudaDeviceInfo info_;
  std::unique_ptr<CudaBackend> backend_;
  std::vector<std::string> failures_;
};

TEST_F(CudaGpuTest, TheBackendDescribesTheGpu) {
  EXPECT_EQ(backend_->device(), (Device{DeviceType::kCUDA, info_.index}));
  EXPECT_EQ(backend_->description(), info_.name);
  EXPECT_EQ(backend_->capability(), (std::pair<int, int>{info_.major, info_.minor}));
  EXPECT_GT(backend_->total_memory_bytes(), int64_t{1} << 30);
  // Once memory is mapped (the context exists), free memory is the driver's.
  absl::StatusOr<std::shared_ptr<runtime::Storage>> s =
      runtime::MemoryAccount::Create(0)->Allocate(backend_->allocator(), 1 << 20, "test");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(backend_->free_memory_bytes(), 0);
  EXPECT_LT(backend_->free_memory_bytes(), backend_->total_memory_bytes());
}

TEST_F(CudaGpuTest, CopiesUpAndDownInChunksLargerThanTheStagingBuffers) {
  auto account = MemoryAccount::Create(0);
  std::unique_ptr<Stream> s = NewStream(account->id());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->device(), backend_->device());
  EXPECT_NE(s->native_handle(), nullptr);
  for (size_t n : {size_t{1}, size_t{4095}, kChunk, kChunk + 1, 5 * kChunk + 123, 2 * kChunk}) {
    SCOPED_TRACE(n);
    const std::vector<char> want = Pattern(n, static_cast<uint32_t>(n));
    std::vector<char> src = want;
    std::shared_ptr<Storage> dev = Alloc(account, n);
    ASSERT_NE(dev, nullptr);
    ASSERT_TRUE(s->CopyFromHost(dev->data(), src.data(), n).ok());
    // The host bytes are the caller's again once CopyFromHost returns.
    std::fill(src.begin(), src.end(), 0);
    std::vector<char> got(n, 1);
    ASSERT_TRUE(s->CopyToHost(got.data(), dev->data(), n).ok());
    ASSERT_TRUE(s->Synchronize().ok());
    EXPECT_TRUE(got == want);
  }
}

TEST_F(CudaGpuTest, NewMemoryIsZeroWhenAskedWithOrWithoutTheOwnersStream) {
  auto early = MemoryAccount::Create(0);  // allocates before it has a stream
  std::shared_ptr<Storage> before = Alloc(early, 3 * kChunk, /*zero=*/true);
  auto account = MemoryAccount::Create(0);
  std::unique_ptr<Stream> s = NewStream(account->id());
  ASSERT_NE(s, nullptr);
  // Dirty a block, free it, and take it again zeroed: the cached block comes
  // back through the owner's stream.
  std::shared_ptr<Storage> dirty = Alloc(account, 3 * kChunk);
  const std::vector<char> junk = Pattern(3 * kChunk, 7);
  ASSERT_TRUE(s->CopyFromHost(dirty->data(), junk.data(), junk.size()).ok());
  dirty.reset();
  std::shared_ptr<Storage> after = Alloc(account, 3 * kChunk, /*zero=*/true);
  ASSERT_NE(before, nullptr);
  ASSERT_NE(after, nullptr);
  for (const auto& st : {before, after}) {
    std::vector<char> got(3 * kChunk, 1);
    ASSERT_TRUE(s->CopyToHost(got.data(), st->data(), got.size()).ok());
    ASSERT_TRUE(s->Synchronize().ok());
    EXPECT_EQ(std::count(got.begin(), got.end(), 0), static_cast<long>(got.size()));
  }
}

TEST_F(CudaGpuTest, CopiesWithinTheDeviceOverlappingOrNot) {
  auto account = MemoryAccount::Create(0);
  std::unique_ptr<Stream> s = NewStream(account->id());
  ASSERT_NE(s, nullptr);
  const size_t n = 4 * kChunk;
  std::shared_ptr<Storage> buf = Alloc(account, 3 * n);
  ASSERT_NE(buf, nullptr);
  // (destination offset, source offset, bytes): apart, overlapping by much
  // or by little, in both directions.
  const size_t cases[][3] = {{2 * n, 0, n}, {n / 2, 0, n}, {0, n / 2, n}, {8, 0, n}, {0, 8, n}, {1, 0, 1000}};
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << c[0] << " <- " << c[1] << " x " << c[2]);
    std::vector<char> want = Pattern(3 * n, static_cast<uint32_t>(c[0] + c[1]));
    ASSERT_TRUE(s->CopyFromHost(buf->data(), want.data(), want.size()).ok());
    ASSERT_TRUE(s->CopyWithin(buf->data() + c[0], buf->data() + c[1], c[2]).ok());
    std::memmove(want.data() + c[0], want.data() + c[1], c[2]);
    std::vector<char> got(3 * n);
    ASSERT_TRUE(s->CopyToHost(got.data(), buf->data(), got.size()).ok());
    ASSERT_TRUE(s->Synchronize().ok());
    EXPECT_TRUE(got == want);
  }
}

TEST_F(CudaGpuTest, AnEventOrdersOneSessionsStreamAfterAnothers) {
  auto a_account = MemoryAccount::Create(0);
  auto b_account = MemoryAccount::Create(0);
  std::unique_ptr<Stream> a = NewStream(a_account->id());
  std::unique_ptr<Stream> b = NewStream(b_account->id());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->native_handle(), b->native_handle());
  const size_t n = size_t{64} << 20;  // long enough on a that b would overtake it unordered
  const std::vector<char> want = Pattern(n, 3);
  std::shared_ptr<Storage> on_a = Alloc(a_account, n);
  std::shared_ptr<Storage> on_b = Alloc(b_account, n, /*zero=*/true);
  ASSERT_TRUE(b->Synchronize().ok());
  ASSERT_TRUE(a->CopyFromHost(on_a->data(), want.data(), n).ok());
  absl::StatusOr<std::shared_ptr<runtime::Event>> done = a->Record();
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(b->Wait(*done).ok());
  ASSERT_TRUE(b->CopyWithin(on_b->data(), on_a->data(), n).ok());
  std::vector<char> got(n);
  ASSERT_TRUE(b->CopyToHost(got.data(), on_b->data(), n).ok());
  ASSERT_TRUE(b->Synchronize().ok());
  EXPECT_TRUE(got == want);
  EXPECT_TRUE((*done)->Query());
  EXPECT_TRUE((*done)->Synchronize().ok());
  // An event outlives its stream.
  a.reset();
  EXPECT_TRUE((*done)->Query());
}

// A "kernel" (host code, as every KernelFn is: it would launch device work
// on ctx.stream) that notes what the launch gave it.
void* g_seen_stream = nullptr;
void* g_seen_word = nullptr;
absl::Status NoteContext(KernelContext& ctx) {
  g_seen_stream = ctx.stream;
  g_seen_word = ctx.error_word;
  return absl::OkStatus();
}
absl::Status RefuseArguments(KernelContext&) { return RuntimeErr("cuda_test: a kernel's argument error"); }

TEST_F(CudaGpuTest, ALaunchGetsTheStreamAndItsErrorWord) {
  std::unique_ptr<Stream> s = NewStream(/*owner=*/101);
  ASSERT_NE(s, nullptr);
  auto* cs = dynamic_cast<CudaStream*>(s.get());
  ASSERT_NE(cs, nullptr);
  KernelContext ctx;
  ASSERT_TRUE(s->Launch(NoteContext, ctx).ok());
  EXPECT_EQ(g_seen_stream, s->native_handle());
  EXPECT_EQ(g_seen_word, cs->error_word());
  EXPECT_NE(cs->error_word(), nullptr);
  const absl::Status refused = s->Launch(RefuseArguments, ctx);
  EXPECT_EQ(refused.message(), "cuda_test: a kernel's argument error");
}

TEST_F(CudaGpuTest, TheErrorWordComesBackAtSynchronizeAsTheCpuWouldSayIt) {
  std::unique_ptr<Stream> s = NewStream(/*owner=*/102);
  ASSERT_NE(s, nullptr);
  auto* cs = dynamic_cast<CudaStream*>(s.get());
  ASSERT_NE(cs, nullptr);
  EXPECT_TRUE(s->Synchronize().ok());  // zero from the start
  const DeviceErrorWord index{kIndexOutOfBounds, OpId("index_select"), 7, 0, 5};
  ASSERT_EQ(cudaSetDevice(info_.index), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(cs->error_word(), &index, sizeof(index), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const absl::Status st = s->Synchronize();
  EXPECT_EQ(KindOf(st), ErrorKind::kIndex);
  EXPECT_EQ(st.message(), "index_select(): index 7 is out of bounds for dimension 0 with size 5");
  EXPECT_TRUE(s->Synchronize().ok());  // read once, then zeroed
  const DeviceErrorWord target{kTargetOutOfBounds, OpId("gather"), 12, -1, 10};
  ASSERT_EQ(cudaMemcpy(cs->error_word(), &target, sizeof(target), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(s->Synchronize().message(), "Target 12 is out of bounds.");
  EXPECT_TRUE(s->Synchronize().ok());
}

TEST_F(CudaGpuTest, EmptyCacheGivesTheMemoryBackToTheDevice) {
  auto account = MemoryAccount::Create(0);
  std::unique_ptr<Stream> s = NewStream(account->id());
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Synchronize().ok());
  const int64_t baseline = FreeBytes();
  const size_t n = size_t{256} << 20;
  std::shared_ptr<Storage> big = Alloc(account, n);
  ASSERT_NE(big, nullptr);
  EXPECT_LE(FreeBytes(), baseline - static_cast<int64_t>(n));
  EXPECT_GE(backend_->allocator()->reserved_bytes(), static_cast<int64_t>(n));
  big.reset();
  // Cached, not given back yet: the next allocation of the session reuses it.
  EXPECT_LE(FreeBytes(), baseline - static_cast<int64_t>(n));
  EXPECT_GE(backend_->Trim(), static_cast<int64_t>(n));
  // Back to the baseline, within the driver's own rounding.
  EXPECT_GE(FreeBytes(), baseline - (int64_t{4} << 20));
}

TEST_F(CudaGpuTest, OutOfMemoryIsAnErrorNotAFault) {
  auto account = MemoryAccount::Create(0);
  std::unique_ptr<Stream> s = NewStream(account->id());
  ASSERT_NE(s, nullptr);
  // The whole device, less a little: more than the driver can give once
  // its context took its share.
  const int64_t too_much = backend_->total_memory_bytes() - (int64_t{1} << 20);
  absl::StatusOr<std::shared_ptr<Storage>> st = account->Allocate(backend_->allocator(), too_much, "empty");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(KindOf(st.status()), ErrorKind::kOutOfMemory);
  EXPECT_THAT(st.status().message(), HasSubstr("out of memory"));
  EXPECT_FALSE(runtime::DeviceFailed());
  // The device goes on.
  std::shared_ptr<Storage> small = Alloc(account, kChunk, /*zero=*/true);
  ASSERT_NE(small, nullptr);
  EXPECT_TRUE(s->Synchronize().ok());
}

TEST_F(CudaGpuTest, OneStreamPerSessionAndItsResourcesGoBackToThePool) {
  std::unique_ptr<Stream> s = NewStream(/*owner=*/103);
  ASSERT_NE(s, nullptr);
  absl::StatusOr<std::unique_ptr<Stream>> again = backend_->CreateStream(103);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr("already has a stream on this device"));
  const size_t pooled = backend_->pooled_streams();
  s.reset();
  EXPECT_EQ(backend_->pooled_streams(), pooled + 1);
  std::unique_ptr<Stream> next = NewStream(/*owner=*/103);  // the owner is free again, and reuses them
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(backend_->pooled_streams(), pooled);
}

absl::Status LaunchIllegalWrite(KernelContext& ctx) {
  const int e = TensordTestLaunchIllegalWrite(ctx.stream);
  return e == 0 ? absl::OkStatus() : InternalErr(absl::StrCat("launch error ", e));
}

// A kernel that writes through a bad address: the context is lost for the
// process (so the test runs in a child process of its own), every later
// call fails, and the backend reports the device failed, once.
TEST_F(CudaGpuTest, AFaultIsReportedAsTheDeviceFailing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork of one that holds a context
  EXPECT_EXIT(
      {
        std::vector<std::string> reported;
        runtime::SetDeviceFailureHandler([&](const Device& dev, const std::string& why) {
          reported.push_back(dev.ToString() + " " + why);
        });
        absl::StatusOr<std::unique_ptr<Stream>> s = backend_->CreateStream(/*owner=*/104);
        if (!s.ok()) {
          std::fprintf(stderr, "stream: %s\n", std::string(s.status().message()).c_str());
          std::_Exit(2);
        }
        KernelContext ctx;
        const absl::Status launched = (*s)->Launch(LaunchIllegalWrite, ctx);
        const absl::Status synced = (*s)->Synchronize();
        const absl::Status after = (*s)->Synchronize();
        std::fprintf(stderr, "launch: %s\nsync: %s\nafter: %s\nreports: %zu\nreported: %s\n",
                     launched.ToString().c_str(), synced.ToString().c_str(), after.ToString().c_str(),
                     reported.size(), reported.empty() ? "" : reported[0].c_str());
        // _Exit: destructors would call into the lost context.
        std::_Exit(!synced.ok() && !after.ok() && reported.size() == 1 && runtime::DeviceFailed() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "reported: cuda:[0-9]+ ");
  // The parent's context is untouched.
  EXPECT_FALSE(runtime::DeviceFailed());
}

}  // namespace
}  // namespace tensord::backends
