// The CUDA matmul kernels' host side (matmul_kernels.h) with the GEMM
// replayed on the host (HostLaunch::Gemm), beyond harness_matmul.cc's
// samples: outputs the dispatcher never allocates (column-major: the
// transposed product; neither stride 1: a temporary), operands passed to
// the GEMM in place rather than copied, batches merged into one
// strided-batched GEMM or into the rows of one GEMM, the TF32 switch, and the cuBLAS loader.
#include <string>
#include <utility>
#include <vector>

#include "../../../kernels/cuda/conv_kernels.h"
#include "../../../kernels/cuda/matmul_kernels.h"
#include "../../../kernels/cuda/nn_kernels.h"
#include "../kernel_test_util.h"
#include "gtest/gtest.h"
#include "host_launch.h"
#include "tensord/kernels/cuda/cuda_kernels.h"

namespace tensord::testing::cudatest {
namespace {

const KernelRegistry& MatmulRegistry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    absl::Status s = cuda::mm::RegisterMatmulKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::nn::RegisterNnKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::nn::RegisterConvKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (!s.ok()) ADD_FAILURE() << s;
    return reg;
  }();
  return *r;
}

// Runs `op`'s kernel for `device` (the CPU's, or the emulated CUDA one)
// into `out`, whose layout the test chooses.
absl::Status RunInto(DeviceType device, const std::string& op_name, std::vector<Value> positional,
                     std::vector<std::pair<std::string, Value>> kwargs, Tensor& out,
                     const MathMode& math = MathMode()) {
  const OpEntry* op = OpTable::Get().Find(op_name);
  if (op == nullptr) return absl::NotFoundError(op_name);
  absl::StatusOr<std::vector<Value>> args = BindArgs(op->schema, std::move(positional), std::move(kwargs));
  if (!args.ok()) return args.status();
  KernelContext ctx;
  ctx.op = op;
  ctx.args = *args;
  ctx.device = device == DeviceType::kCPU ? kCPU : Device{DeviceType::kCUDA, 0};
  ctx.input_base = [](const TensorMeta* m) -> char* {
    auto it = InputBases().find(m);
    return it == InputBases().end() ? nullptr : reinterpret_cast<char*>(it->second->data());
  };
  ctx.outputs = {TensorRef{out.base(), &out.meta}};
  ctx.math = math;
  const KernelRegistry& reg = device == DeviceType::kCPU ? Registry() : MatmulRegistry();
  KernelFn fn = reg.Find(device, op->id);
  if (fn == nullptr) return absl::NotFoundError("no kernel");
  return fn(ctx);
}

// A [rows, cols] float32 output laid out with `strides` (and offset 1),
// filled with 77.
Tensor Output(ScalarType dt, Shape sizes, Shape strides) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return MakeStrided(dt, std::move(sizes), std::move(strides), 1, std::vector<double>(static_cast<size_t>(n), 77.0));
}

TEST(EmulatedCudaMatmulTest, AnyOutputLayout) {
  std::mt19937 rng(3);
  const Tensor a = Random(ScalarType::kFloat32, {3, 4}, rng, -2, 2);
  const Tensor b = ReversedLayout(Random(ScalarType::kFloat32, {4, 5}, rng, -2, 2));
  const Tensor self = Random(ScalarType::kFloat32, {5}, rng, -2, 2);
  // Row-major, column-major (C^T = B^T A^T), spread (a temporary), padded rows.
  for (const Shape& strides : {Shape{5, 1}, Shape{1, 3}, Shape{10, 2}, Shape{8, 1}, Shape{1, 4}}) {
    for (bool addmm : {false, true}) {
      SCOPED_TRACE(absl::StrCat(ShapeToString(strides), addmm ? " addmm" : " mm"));
      Tensor want = Output(ScalarType::kFloat32, {3, 5}, strides);
      Tensor got = Output(ScalarType::kFloat32, {3, 5}, strides);
      const int64_t before = HostLaunch::gemms;
      if (addmm) {
        const std::vector<std::pair<std::string, Value>> kw = {{"beta", Value(Scalar::Float(0.5))},
                                                               {"alpha", Value(Scalar::Int(-2))}};
        ASSERT_TRUE(RunInto(DeviceType::kCPU, "addmm", {In(self), In(a), In(b)}, kw, want).ok());
        ASSERT_TRUE(RunInto(DeviceType::kCUDA, "addmm", {In(self), In(a), In(b)}, kw, got).ok());
      } else {
        ASSERT_TRUE(RunInto(DeviceType::kCPU, "mm", {In(a), In(b)}, {}, want).ok());
        ASSERT_TRUE(RunInto(DeviceType::kCUDA, "mm", {In(a), In(b)}, {}, got).ok());
      }
      EXPECT_EQ(HostLaunch::gemms, before + 1);
      const std::vector<double> x = Values(want), y = Values(got);
      for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5) << "element " << i;
      // Elements outside the view are left alone.
      const std::vector<uint64_t>& w = *want.storage;
      const std::vector<uint64_t>& g = *got.storage;
      EXPECT_EQ(std::memcmp(w.data(), g.data(), 4), 0);
    }
  }
}

TEST(EmulatedCudaMatmulTest, TransposedOperandsAreNotCopied) {
  std::mt19937 rng(4);
  const Tensor at = Restride(Random(ScalarType::kFloat32, {6, 4}, rng), {1, 6});  // column-major
  const Tensor b = Random(ScalarType::kFloat32, {4, 3}, rng);
  Tensor out = Output(ScalarType::kFloat32, {6, 3}, {3, 1});
  const int64_t launches = HostLaunch::launches;
  ASSERT_TRUE(RunInto(DeviceType::kCUDA, "mm", {In(at), In(b)}, {}, out).ok());
  EXPECT_EQ(HostLaunch::launches, launches) << "an operand was copied";
  EXPECT_TRUE(HostLaunch::last_gemm.trans_a);
  EXPECT_FALSE(HostLaunch::last_gemm.trans_b);
  EXPECT_EQ(HostLaunch::last_gemm.lda, 6);
  // Spread rows have no unit stride: a contiguous copy.
  const Tensor spread = Spread(Random(ScalarType::kFloat32, {6, 4}, rng));
  ASSERT_TRUE(RunInto(DeviceType::kCUDA, "mm", {In(spread), In(b)}, {}, out).ok());
  EXPECT_EQ(HostLaunch::launches, launches + 1);
}

TEST(EmulatedCudaMatmulTest, BatchesMergeIntoOneStridedBatchedGemm) {
  std::mt19937 rng(5);
  const Tensor a = Random(ScalarType::kFloat32, {2, 3, 4, 5}, rng);
  const Tensor b = Random(ScalarType::kFloat32, {5, 2}, rng);
  Tensor out = Output(ScalarType::kFloat32, {2, 3, 4, 2}, {24, 8, 2, 1});
  const int64_t before = HostLaunch::gemms;
  ASSERT_TRUE(RunInto(DeviceType::kCUDA, "matmul", {In(a), In(b)}, {}, out).ok());
  // b is the same for every batch: the batch folds into the rows of a and out.
  EXPECT_EQ(HostLaunch::gemms, before + 1);
  EXPECT_EQ(HostLaunch::last_gemm.batch, 1);
  EXPECT_EQ(HostLaunch::last_gemm.m, 24);
  // b varies, a is broadcast (stride 0): one strided-batched GEMM.
  const Tensor bb = Random(ScalarType::kFloat32, {2, 3, 5, 2}, rng);
  const Tensor ab = Restride(Random(ScalarType::kFloat32, {2, 3, 4, 5}, rng), {0, 0, 5, 1});
  const int64_t before1 = HostLaunch::gemms;
  ASSERT_TRUE(RunInto(DeviceType::kCUDA, "matmul", {In(ab), In(bb)}, {}, out).ok());
  EXPECT_EQ(HostLaunch::gemms, before1 + 1);
  EXPECT_EQ(HostLaunch::last_gemm.batch, 6);
  EXPECT_EQ(HostLaunch::last_gemm.stride_a, 0);
  // A batch dim that does not nest (b's dim 0 broadcast against a's) runs
  // one strided-batched GEMM per outer index.
  const Tensor a2 = Random(ScalarType::kFloat32, {2, 1, 4, 5}, rng);
  const Tensor b2 = Random(ScalarType::kFloat32, {3, 5, 2}, rng);
  const int64_t before2 = HostLaunch::gemms;
  ASSERT_TRUE(RunInto(DeviceType::kCUDA, "matmul", {In(a2), In(b2)}, {}, out).ok());
  EXPECT_EQ(HostLaunch::gemms, before2 + 2);
  EXPECT_EQ(HostLaunch::last_gemm.batch, 3);
}

// The session's MathMode decides, per call: off by default, and never for
// another dtype than float32.
TEST(EmulatedCudaMatmulTest, Tf32OnlyForFloat32WhenAllowed) {
  std::mt19937 rng(6);
  EXPECT_FALSE(MathMode().matmul_allow_tf32);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat16}) {
    const Tensor a = Random(dt, {3, 4}, rng), b = Random(dt, {4, 2}, rng);
    Tensor out = Output(dt, {3, 2}, {2, 1});
    ASSERT_TRUE(RunInto(DeviceType::kCUDA, "mm", {In(a), In(b)}, {}, out).ok());
    EXPECT_FALSE(HostLaunch::last_gemm.allow_tf32);
    MathMode tf32;
    tf32.matmul_allow_tf32 = true;
    ASSERT_TRUE(RunInto(DeviceType::kCUDA, "mm", {In(a), In(b)}, {}, out, tf32).ok());
    EXPECT_EQ(HostLaunch::last_gemm.allow_tf32, dt == ScalarType::kFloat32);
  }
}

// Convolutions follow the session's other switch, on by default as
// PyTorch's cuDNN convolutions, and only for float32.
TEST(EmulatedCudaMatmulTest, ConvolutionTf32FollowsItsOwnSwitch) {
  std::mt19937 rng(7);
  EXPECT_TRUE(MathMode().conv_allow_tf32);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64}) {
    const Tensor x = Random(dt, {1, 2, 5, 5}, rng), w = Random(dt, {3, 2, 3, 3}, rng);
    Tensor out = MakeStrided(dt, {1, 3, 3, 3}, {27, 9, 3, 1}, 0, std::vector<double>(27, 0.0));
    const std::vector<Value> args = {In(x), In(w), Value(), Value(std::vector<int64_t>{1, 1}),
                                     Value(std::vector<int64_t>{0, 0}), Value(std::vector<int64_t>{1, 1}),
                                     Value(int64_t{1})};
    const int64_t gemms = HostLaunch::gemms;
    ASSERT_TRUE(RunInto(DeviceType::kCUDA, "conv2d", args, {}, out).ok());
    ASSERT_GT(HostLaunch::gemms, gemms);
    EXPECT_EQ(HostLaunch::last_gemm.allow_tf32, dt == ScalarType::kFloat32);
    MathMode exact;
    exact.conv_allow_tf32 = false;
    ASSERT_TRUE(RunInto(DeviceType::kCUDA, "conv2d", args, {}, out, exact).ok());
    EXPECT_FALSE(HostLaunch::last_gemm.allow_tf32);
    // The matmul switch alone does not reach convolutions.
    MathMode matmul_only = exact;
    matmul_only.matmul_allow_tf32 = true;
    ASSERT_TRUE(RunInto(DeviceType::kCUDA, "conv2d", args, {}, out, matmul_only).ok());
    EXPECT_FALSE(HostLaunch::last_gemm.allow_tf32);
  }
}

// libcublas.so.13 is loaded at the first use; where it is missing the
// reason names it (the CUDA toolkit of this build provides it).
TEST(CudaBlasTest, LoadsOrNamesTheLibrary) {
  const absl::Status s = CudaBlasAvailable();
  if (!s.ok()) {
    EXPECT_NE(std::string(s.message()).find("libcublas.so.13"), std::string::npos) << s;
    EXPECT_NE(std::string(s.message()).find("cuBLAS is not available"), std::string::npos) << s;
  }
  std::cout << "cuBLAS: " << (s.ok() ? "loaded" : std::string(s.message())) << "\n";
}

}  // namespace
}  // namespace tensord::testing::cudatest
