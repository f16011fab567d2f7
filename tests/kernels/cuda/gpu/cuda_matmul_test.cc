// The matmul family on a GPU beyond harness.cc's small samples (which
// cuda_elementwise_test.cc runs for every registered op): products large
// enough for cuBLAS's tiled kernels, float32 within float32's tolerance of
// the CPU with TF32 off (the default) and within TF32's with it on, and
// cuBLAS loaded from libcublas.so.13.
//
//   build/tests/cuda_kernels_tests --gtest_filter='CudaMatmul*'   # skips without a GPU
#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../harness.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensord/kernels/cuda/cuda_kernels.h"

namespace tensord::testing::cudatest {
namespace {

std::string NoDeviceReason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(e));
  }
  return n == 0 ? "cudaGetDeviceCount found 0 devices" : "";
}

#define SKIP_WITHOUT_GPU()                                       \
  do {                                                           \
    const std::string why = NoDeviceReason();                    \
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

// Device memory on device 0 and a stream of its own.
class GpuMemory final : public DeviceMemory {
 public:
  GpuMemory() { ok_ = cudaSetDevice(0) == cudaSuccess && cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess; }
  ~GpuMemory() override {
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    for (char* p : buffers_) (void)cudaFree(p);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  bool ok() const { return ok_; }
  char* Allocate(int64_t bytes) override {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, static_cast<size_t>(bytes == 0 ? 1 : bytes)), cudaSuccess);
    buffers_.push_back(static_cast<char*>(p));
    return static_cast<char*>(p);
  }
  void CopyToDevice(char* dst, const void* src, int64_t bytes) override {
    EXPECT_EQ(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }
  void CopyToHost(void* dst, const char* src, int64_t bytes) override {
    EXPECT_EQ(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }
  absl::Status Synchronize() override {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    return e == cudaSuccess ? absl::OkStatus() : absl::InternalError(cudaGetErrorString(e));
  }
  void* stream() override { return stream_; }
  Device device() const override { return Device{DeviceType::kCUDA, 0}; }

 private:
  bool ok_ = false;
  cudaStream_t stream_ = nullptr;
  std::vector<char*> buffers_;
};

const KernelRegistry& Registry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    const absl::Status s = RegisterCudaKernels(*reg);
    if (!s.ok()) ADD_FAILURE() << "RegisterCudaKernels: " << s;
    return reg;
  }();
  return *r;
}

Sample Product(const std::string& op, ScalarType dt, const Shape& a, const Shape& b, std::mt19937& rng) {
  Sample s;
  s.op = op;
  s.label = absl::StrCat(DtypeName(dt), " ", ShapeToString(a), " @ ", ShapeToString(b));
  s.positional = {SampleArg::T(s.Add(Random(dt, a, rng, -1, 1))), SampleArg::T(s.Add(Random(dt, b, rng, -1, 1)))};
  return s;
}

// The largest relative difference of the outputs (relative to the largest |CPU value|).
double MaxRelDiff(const SampleResult& want, const SampleResult& got) {
  const std::vector<double> x = Values(want.outputs.at(0)), y = Values(got.outputs.at(0));
  double scale = 1e-30, diff = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, std::fabs(x[i]));
    diff = std::max(diff, std::fabs(x[i] - y[i]));
  }
  return diff / scale;
}

TEST(CudaMatmulTest, CublasLoads) {
  SKIP_WITHOUT_GPU();
  EXPECT_TRUE(CudaBlasAvailable().ok()) << CudaBlasAvailable();
}

TEST(CudaMatmulTest, LargeProductsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  HostMemory cpu(kCPU);
  GpuMemory gpu;
  ASSERT_TRUE(gpu.ok());
  const std::vector<Sample> samples = {
      Product("mm", ScalarType::kFloat32, {256, 384}, {384, 200}, rng),
      Product("mm", ScalarType::kFloat64, {129, 257}, {257, 65}, rng),
      Product("bmm", ScalarType::kFloat16, {3, 64, 96}, {3, 96, 80}, rng),
      Product("bmm", ScalarType::kBFloat16, {2, 70, 33}, {2, 33, 90}, rng),
      Product("matmul", ScalarType::kFloat32, {4, 1, 64, 32}, {3, 32, 48}, rng),
      Product("matmul", ScalarType::kInt32, {2, 100, 70}, {70, 90}, rng),
  };
  for (const Sample& s : samples) {
    const SampleResult want = RunSample(s, CpuRegistry(), DeviceType::kCPU, cpu);
    const SampleResult got = RunSample(s, Registry(), DeviceType::kCUDA, gpu);
    ASSERT_TRUE(want.status.ok() && got.status.ok()) << s.label << ": " << want.status << " / " << got.status;
    // Sums of hundreds of products: a few ulps of the output's dtype.
    const ScalarType dt = want.outputs[0].meta.dtype;
    const double tol = dt == ScalarType::kFloat64   ? 1e-13
                       : dt == ScalarType::kFloat32 ? 1e-5
                       : dt == ScalarType::kFloat16 ? 2e-3
                       : dt == ScalarType::kBFloat16 ? 1.6e-2
                                                     : 0;
    EXPECT_LE(MaxRelDiff(want, got), tol) << s.op << " [" << s.label << "]";
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// TF32 keeps 10 bits of each operand's mantissa: off (the default), float32
// products match the CPU to float32's precision; on, only to about 1e-3.
TEST(CudaMatmulTest, Tf32OnlyWhenAllowed) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  HostMemory cpu(kCPU);
  GpuMemory gpu;
  ASSERT_TRUE(gpu.ok());
  const Sample s = Product("mm", ScalarType::kFloat32, {512, 512}, {512, 512}, rng);
  const SampleResult want = RunSample(s, CpuRegistry(), DeviceType::kCPU, cpu);
  const SampleResult strict = RunSample(s, Registry(), DeviceType::kCUDA, gpu);
  MathMode tf32;
  tf32.matmul_allow_tf32 = true;
  const SampleResult fast = RunSample(s, Registry(), DeviceType::kCUDA, gpu, tf32);
  ASSERT_TRUE(want.status.ok() && strict.status.ok() && fast.status.ok()) << strict.status << " / " << fast.status;
  EXPECT_LE(MaxRelDiff(want, strict), 1e-5);
  EXPECT_LE(MaxRelDiff(want, fast), 1e-2);
  std::cout << "float32 512^3 relative difference from the CPU: " << MaxRelDiff(want, strict) << " without TF32, "
            << MaxRelDiff(want, fast) << " with\n";
}

}  // namespace
}  // namespace tensord::testing::cudatest
