// The CUDA kernels on a GPU against the CPU kernels: every op registered
// by RegisterCudaKernels, on every sample of tests/kernels/cuda/harness.cc
// (inputs copied to device memory, a stream of its own, outputs copied
// back), plus launches large enough for many blocks and grid-stride loops,
// large reductions, and a strided tensor past 2 GiB (64-bit indexing).
// Needs no daemon:
//
//   build/tests/cuda_kernels_tests            # skips, saying why, without a GPU
//
// The host test (cuda_host_test.cc) checks the same samples without a GPU
// by emulating the device work; this one checks the launches themselves.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include "../harness.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensord/kernels/cuda/cuda_kernels.h"
#include "tensord/kernels/device_error_status.h"

namespace tensord::testing::cudatest {
namespace {

// "" when a CUDA device is usable, else why not.
std::string NoDeviceReason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(e), " (error ", static_cast<int>(e), ")");
  }
  if (n == 0) return "cudaGetDeviceCount found 0 devices";
  return "";
}

#define SKIP_WITHOUT_GPU()                                          \
  do {                                                              \
    const std::string why = NoDeviceReason();                       \
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;    \
  } while (0)

// Device memory on device 0 and one stream; everything freed at the end.
class CudaMemory final : public DeviceMemory {
 public:
  CudaMemory() {
    ok_ = cudaSetDevice(0) == cudaSuccess && cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess &&
          cudaMalloc(&word_, sizeof(DeviceErrorWord)) == cudaSuccess &&
          cudaMemset(word_, 0, sizeof(DeviceErrorWord)) == cudaSuccess;
  }
  ~CudaMemory() override {
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (word_ != nullptr) (void)cudaFree(word_);
    for (char* p : buffers_) (void)cudaFree(p);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  bool ok() const { return ok_; }
  char* Allocate(int64_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes == 0 ? 1 : bytes));
    EXPECT_EQ(e, cudaSuccess) << "cudaMalloc(" << bytes << "): " << cudaGetErrorString(e);
    buffers_.push_back(static_cast<char*>(p));
    return static_cast<char*>(p);
  }
  // Copies are ordered on the stream (a non-blocking stream does not wait
  // for the legacy default stream's cudaMemcpy) and complete on return.
  void CopyToDevice(char* dst, const void* src, int64_t bytes) override {
    cudaError_t e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
  }
  void CopyToHost(void* dst, const char* src, int64_t bytes) override {
    cudaError_t e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
  }
  // As the daemon's CUDA stream: the error word is read after the stream's
  // work and zeroed in stream order for the next kernel.
  absl::Status Synchronize() override {
    DeviceErrorWord word{};
    cudaError_t e = cudaMemcpyAsync(&word, word_, sizeof(word), cudaMemcpyDeviceToHost, stream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) return absl::InternalError(absl::StrCat("stream: ", cudaGetErrorString(e)));
    if (word.code == kNoDeviceError) return absl::OkStatus();
    e = cudaMemsetAsync(word_, 0, sizeof(DeviceErrorWord), stream_);
    if (e != cudaSuccess) return absl::InternalError(absl::StrCat("zeroing the error word: ", cudaGetErrorString(e)));
    return DeviceErrorToStatus(word);
  }
  void* stream() override { return stream_; }
  void* error_word() override { return word_; }
  Device device() const override { return Device{DeviceType::kCUDA, 0}; }

 private:
  bool ok_ = false;
  cudaStream_t stream_ = nullptr;
  void* word_ = nullptr;  // the stream's DeviceErrorWord
  std::vector<char*> buffers_;
};

const KernelRegistry& CudaRegistry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    const absl::Status s = RegisterCudaKernels(*reg);
    if (!s.ok()) ADD_FAILURE() << "RegisterCudaKernels: " << s;
    return reg;
  }();
  return *r;
}

void CompareSamples(const std::vector<Sample>& samples) {
  HostMemory cpu(kCPU);
  CudaMemory gpu;
  ASSERT_TRUE(gpu.ok()) << "cannot create a stream on device 0";
  int failures = 0;
  for (const Sample& s : samples) {
    const SampleResult want = RunSample(s, CpuRegistry(), DeviceType::kCPU, cpu);
    const SampleResult got = RunSample(s, CudaRegistry(), DeviceType::kCUDA, gpu);
    const std::string diff = CompareResults(s, want, got);
    if (!diff.empty() && ++failures <= 5) ADD_FAILURE() << diff;
  }
  if (failures > 5) ADD_FAILURE() << failures - 5 << " more samples differ";
  // Nothing a kernel did may have left an error behind.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

class CudaKernelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaKernelTest, MatchesTheCpuKernel) {
  SKIP_WITHOUT_GPU();
  const std::vector<Sample> samples = SamplesFor(GetParam(), /*seed=*/2);
  ASSERT_FALSE(samples.empty()) << "no samples for " << GetParam();
  CompareSamples(samples);
}

INSTANTIATE_TEST_SUITE_P(AllCudaOps, CudaKernelTest, ::testing::ValuesIn(OpsWithKernels(CudaRegistry(), DeviceType::kCUDA)),
                         TestName);

// A bad index on the GPU: the kernel's call returns OK, the stream's next
// synchronize raises the CPU kernel's error (the same kind and text), and
// the next kernel on the same stream works (the word was zeroed).
TEST(CudaIndexErrorTest, BadIndexRaisesAtTheNextSyncAndTheStreamGoesOn) {
  SKIP_WITHOUT_GPU();
  HostMemory cpu(kCPU);
  CudaMemory gpu;
  ASSERT_TRUE(gpu.ok()) << "cannot create a stream on device 0";
  for (const char* op : {"gather", "index_select", "scatter_add", "scatter.src"}) {
    SCOPED_TRACE(op);
    std::vector<Sample> bad, good;
    for (Sample& s : SamplesFor(op, /*seed=*/3)) {
      (s.label.rfind("bad index", 0) == 0 ? bad : good).push_back(std::move(s));
    }
    ASSERT_FALSE(bad.empty());
    ASSERT_FALSE(good.empty());
    for (const Sample& b : bad) {
      const SampleResult want = RunSample(b, CpuRegistry(), DeviceType::kCPU, cpu);
      ASSERT_FALSE(want.status.ok()) << b.label;
      const SampleResult got = RunSample(b, CudaRegistry(), DeviceType::kCUDA, gpu);
      EXPECT_EQ(got.status, want.status) << b.label;
      const SampleResult next_want = RunSample(good[0], CpuRegistry(), DeviceType::kCPU, cpu);
      const SampleResult next = RunSample(good[0], CudaRegistry(), DeviceType::kCUDA, gpu);
      EXPECT_TRUE(next.status.ok()) << "after " << b.label << ": " << next.status;
      EXPECT_EQ(CompareResults(good[0], next_want, next), "");
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Launches past kMaxBlocks (grid-stride loops) on both paths, and large
// reductions (LargeSamples, harness.cc).
TEST(CudaKernelLargeTest, GridStrideLoopsAndLargeReductions) {
  SKIP_WITHOUT_GPU();
  CompareSamples(LargeSamples());
}

// A strided view whose elements span more than 2^31 bytes takes the 64-bit
// path: fill every other byte of 2^31 + 64 bytes, then clone that view.
TEST(CudaKernelLargeTest, SixtyFourBitIndexing) {
  SKIP_WITHOUT_GPU();
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  const int64_t n = (int64_t{1} << 30) + 32;  // elements of the view
  const int64_t span = 2 * n;                  // bytes it spans
  if (free_bytes < static_cast<size_t>(span + n + (int64_t{1} << 30))) {
    GTEST_SKIP() << "needs " << (span + n) / (1 << 20) << " MiB of free device memory, " << free_bytes / (1 << 20)
                 << " MiB free";
  }
  CudaMemory gpu;
  ASSERT_TRUE(gpu.ok());
  char* storage = gpu.Allocate(span);
  ASSERT_EQ(cudaMemsetAsync(storage, 0x5A, static_cast<size_t>(span), static_cast<cudaStream_t>(gpu.stream())),
            cudaSuccess);
  TensorMeta view;
  view.sizes = {n};
  view.strides = {2};
  view.storage_offset = 1;
  view.dtype = ScalarType::kInt8;
  view.device = gpu.device();
  const OpEntry* fill = OpTable::Get().Find("fill_.Scalar");
  const OpEntry* clone = OpTable::Get().Find("clone");
  ASSERT_NE(fill, nullptr);
  ASSERT_NE(clone, nullptr);
  auto base_of = [storage](const TensorMeta*) { return storage; };
  {
    std::vector<Value> args = {Value(&view), Value(Scalar::Int(-7))};
    KernelContext ctx;
    ctx.op = fill;
    ctx.args = args;
    ctx.device = gpu.device();
    ctx.stream = gpu.stream();
    ctx.input_base = base_of;
    ctx.outputs = {TensorRef{storage, &view}};
    ASSERT_TRUE(CudaRegistry().Find(DeviceType::kCUDA, fill->id)(ctx).ok());
  }
  TensorMeta out = TensorMeta::Contiguous({n}, ScalarType::kInt8, gpu.device());
  char* out_storage = gpu.Allocate(n);
  {
    std::vector<Value> args = {Value(&view)};
    KernelContext ctx;
    ctx.op = clone;
    ctx.args = args;
    ctx.device = gpu.device();
    ctx.stream = gpu.stream();
    ctx.input_base = base_of;
    ctx.outputs = {TensorRef{out_storage, &out}};
    ASSERT_TRUE(CudaRegistry().Find(DeviceType::kCUDA, clone->id)(ctx).ok());
  }
  ASSERT_TRUE(gpu.Synchronize().ok());
  std::vector<int8_t> host(static_cast<size_t>(span));
  gpu.CopyToHost(host.data(), storage, span);
  int64_t wrong = 0, first_wrong = -1;
  for (int64_t i = 0; i < span; ++i) {
    if (host[static_cast<size_t>(i)] != (i % 2 == 1 ? -7 : 0x5A) && wrong++ == 0) first_wrong = i;
  }
  EXPECT_EQ(wrong, 0) << "fill_: " << wrong << " bytes wrong, the first at byte " << first_wrong;
  std::vector<int8_t> copied(static_cast<size_t>(n));
  gpu.CopyToHost(copied.data(), out_storage, n);
  wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (copied[static_cast<size_t>(i)] != -7 && wrong++ == 0) first_wrong = i;
  }
  EXPECT_EQ(wrong, 0) << "clone: " << wrong << " elements wrong, the first at " << first_wrong;
}

}  // namespace
}  // namespace tensord::testing::cudatest
