// The CUDA kernels' host side with the device emulated on the host
// (host_launch.h), against the CPU kernels: every op registered for CUDA,
// every sample of harness.cc (every dtype, contiguous, permuted, spread,
// broadcast, 0-dim, empty, misaligned and stride-0 layouts, scalars,
// special values, in-place ops whose other operand overlaps self). The
// same errors, or the same values within the dtype's tolerance. Runs
// without a GPU; cuda_elementwise_test.cc runs the same samples on one.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "../../../kernels/cuda/conv_kernels.h"
#include "../../../kernels/cuda/advindex_kernels.h"
#include "../../../kernels/cuda/elementwise.cuh"
#include "../../../kernels/cuda/elementwise_kernels.h"
#include "../../../kernels/cuda/elementwise_ops.h"
#include "../../../kernels/cuda/index_kernels.h"
#include "../../../kernels/cuda/matmul_kernels.h"
#include "../../../kernels/cuda/random_kernels.h"
#include "../../../kernels/cuda/nn_kernels.h"
#include "../../../kernels/cuda/reduce_kernels.h"
#include "../../../kernels/cuda/shape_kernels.h"
#include "../../../kernels/cuda/topk_kernels.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "host_launch.h"

namespace tensord::testing::cudatest {
namespace {

const KernelRegistry& EmulatedRegistry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    absl::Status s = cuda::ew::RegisterElementwiseKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::ew::RegisterReduceKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::ew::RegisterIndexKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::ew::RegisterTopkKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::ew::RegisterShapeKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::ew::RegisterRandomKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::ew::RegisterAdvIndexKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::mm::RegisterMatmulKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::nn::RegisterNnKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (s.ok()) s = cuda::nn::RegisterConvKernels<HostLaunch>(*reg, DeviceType::kCUDA);
    if (!s.ok()) ADD_FAILURE() << "registering the emulated CUDA kernels: " << s;
    return reg;
  }();
  return *r;
}

// Runs every sample of `op` on the CPU and emulated; returns the samples run.
int CompareOp(const std::string& op) {
  HostMemory cpu(kCPU), emulated(Device{DeviceType::kCUDA, 0});
  const std::vector<Sample> samples = SamplesFor(op, /*seed=*/1);
  int failures = 0, computed = 0;
  std::map<std::string, int> errors;
  for (const Sample& s : samples) {
    const SampleResult want = RunSample(s, CpuRegistry(), DeviceType::kCPU, cpu);
    const SampleResult got = RunSample(s, EmulatedRegistry(), DeviceType::kCUDA, emulated);
    const std::string diff = CompareResults(s, want, got);
    if (!diff.empty() && ++failures <= 5) ADD_FAILURE() << diff;
    if (want.status.ok()) {
      ++computed;
    } else {
      ++errors[std::string(want.status.message())];
    }
  }
  if (failures > 5) ADD_FAILURE() << op << ": " << failures - 5 << " more samples differ";
  // Samples that only check both devices refuse the same way must not be all there is.
  EXPECT_GT(computed, 0) << op << ": every sample failed on the CPU, e.g. " << (errors.empty() ? "" : errors.begin()->first);
  if (getenv("TENSORD_CUDA_TEST_VERBOSE") != nullptr) {
    std::cout << op << ": " << samples.size() << " samples, " << computed << " computed\n";
    for (const auto& [m, n] : errors) std::cout << "  " << n << " x " << m << "\n";
  }
  return static_cast<int>(samples.size());
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

class EmulatedCudaKernelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EmulatedCudaKernelTest, MatchesTheCpuKernel) {
  const int n = CompareOp(GetParam());
  EXPECT_GT(n, 0) << "no samples for " << GetParam() << ": add them to SamplesFor (tests/kernels/cuda/harness.cc)";
}

INSTANTIATE_TEST_SUITE_P(AllCudaOps, EmulatedCudaKernelTest,
                         ::testing::ValuesIn(OpsWithKernels(EmulatedRegistry(), DeviceType::kCUDA)), TestName);

// The 64-bit strided path (taken on the GPU only for tensors past 2 GiB)
// gives the same results as the 32-bit one.
TEST(EmulatedCudaKernelTest, SixtyFourBitIndexingMatches) {
  cuda::HostEngine::force_64bit = true;
  for (const char* op : {"to.dtype", "add.Tensor", "where.self", "clamp.Tensor", "masked_fill.Scalar", "cat"}) {
    SCOPED_TRACE(op);
    CompareOp(op);
  }
  cuda::HostEngine::force_64bit = false;
}

// The GPU test's large launches (grid-stride loops, large reductions),
// emulated: they run what the GPU test runs, so that a mistake in them shows
// here first.
TEST(EmulatedCudaKernelTest, LargeSamplesMatch) {
  HostMemory cpu(kCPU), emulated(Device{DeviceType::kCUDA, 0});
  for (const Sample& s : LargeSamples()) {
    const SampleResult want = RunSample(s, CpuRegistry(), DeviceType::kCPU, cpu);
    ASSERT_TRUE(want.status.ok()) << s.op << " [" << s.label << "]: " << want.status;
    const SampleResult got = RunSample(s, EmulatedRegistry(), DeviceType::kCUDA, emulated);
    EXPECT_EQ(CompareResults(s, want, got), "");
  }
}

TEST(EmulatedCudaKernelTest, EverySampledOpIsRegistered) {
  // SamplesFor knows ops the CUDA registry does not have only by mistake
  // (a typo in a name would leave its samples unused).
  const std::vector<std::string> ops = OpsWithKernels(EmulatedRegistry(), DeviceType::kCUDA);
  for (const OpEntry& e : OpTable::Get().entries()) {
    if (SamplesFor(e.full_name(), 1).empty()) continue;
    EXPECT_NE(std::find(ops.begin(), ops.end(), e.full_name()), ops.end())
        << e.full_name() << " has samples but no CUDA kernel";
  }
}

// Copies between equal dtypes keep every bit, as the CPU's do: NaN payloads
// and signs of float16, bfloat16 and float8, in any layout.
TEST(EmulatedCudaKernelTest, CopiesKeepBits) {
  for (ScalarType dt : {ScalarType::kFloat16, ScalarType::kBFloat16, ScalarType::kFloat8_e4m3fn,
                        ScalarType::kFloat8_e5m2, ScalarType::kFloat32}) {
    Tensor t = FromValues(dt, {8}, {0, 0, 0, 0, 0, 0, 0, 0});
    const uint64_t nan_bits[] = {0x7E01, 0xFE03, 0x7C01, 0xFFFF, 0x7F, 0xFF, 0x7FC00001, 0xFFC00003};
    for (int64_t i = 0; i < 8; ++i) {
      std::memcpy(t.base() + i * t.meta.itemsize(), &nan_bits[i], static_cast<size_t>(t.meta.itemsize()));
    }
    for (const Tensor& in : {t, ReversedLayout(t)}) {
      Sample s;
      s.op = "clone";
      s.label = std::string(DtypeName(dt));
      s.positional = {SampleArg::T(s.Add(in))};
      HostMemory cpu(kCPU), emulated(Device{DeviceType::kCUDA, 0});
      const SampleResult want = RunSample(s, CpuRegistry(), DeviceType::kCPU, cpu);
      const SampleResult got = RunSample(s, EmulatedRegistry(), DeviceType::kCUDA, emulated);
      ASSERT_TRUE(want.status.ok() && got.status.ok()) << want.status << " / " << got.status;
      const int64_t bytes = 8 * t.meta.itemsize();
      EXPECT_EQ(std::memcmp(want.outputs[0].base(), got.outputs[0].base(), static_cast<size_t>(bytes)), 0)
          << DtypeName(dt);
    }
  }
}

// ---- the engine itself -----------------------------------------------------------------

// An iterator over n contiguous elements of `out` and `in` (both float).
cuda::ElementwiseIter ContiguousIter(float* out, const float* in, int64_t n) {
  cuda::ElementwiseIter it;
  it.num_operands = 2;
  it.operands[0] = {reinterpret_cast<char*>(out), ScalarType::kFloat32, false, 0};
  it.operands[1] = {reinterpret_cast<char*>(const_cast<float*>(in)), ScalarType::kFloat32, false, 0};
  const int64_t sizes[] = {n};
  const int64_t s0[] = {4}, s1[] = {4};
  const int64_t* strides[] = {s0, s1};
  EXPECT_TRUE(cuda::BuildGeometry(1, sizes, 2, strides, &it.geometry));
  return it;
}

TEST(CudaEngineTest, VectorizedOnlyWhenContiguousAlignedAndOfTheSlotsDtypes) {
  alignas(64) float in[40] = {};
  alignas(64) float out[40] = {};
  EXPECT_TRUE((cuda::Vectorizable<float, float>(ContiguousIter(out, in, 37))));
  EXPECT_FALSE((cuda::Vectorizable<float, float>(ContiguousIter(out + 1, in, 36))));  // misaligned output
  EXPECT_FALSE((cuda::Vectorizable<float, float>(ContiguousIter(out, in + 2, 36))));  // misaligned input
  cuda::ElementwiseIter it = ContiguousIter(out, in, 37);
  it.operands[1].dtype = ScalarType::kInt32;  // needs a conversion per element
  EXPECT_FALSE((cuda::Vectorizable<float, float>(it)));
  it = ContiguousIter(out, in, 37);
  it.operands[1].is_constant = true;  // constants do not stop it
  EXPECT_TRUE((cuda::Vectorizable<float, float>(it)));
  it.geometry.strides[0][1] = 0;
  EXPECT_TRUE((cuda::Vectorizable<float, float>(it)));
  it = ContiguousIter(out, in, 37);
  it.geometry.strides[0][1] = 8;  // every other element
  EXPECT_FALSE((cuda::Vectorizable<float, float>(it)));
}

TEST(CudaEngineTest, ChecksOperandCountAndOutputDtype) {
  alignas(64) float in[8] = {}, out[8] = {};
  const cuda::ElementwiseIter it = ContiguousIter(out, in, 8);
  EXPECT_EQ((cuda::CheckOperands<float, float>(it)), cuda::kLaunchOk);
  EXPECT_EQ((cuda::CheckOperands<float, float, float>(it)), cuda::kLaunchBadOperands);
  EXPECT_EQ((cuda::CheckOperands<double, float>(it)), cuda::kLaunchBadOperands);
  cuda::ElementwiseCall call;
  call.family = cuda::EwFamily::kFloatMath;
  call.op = 999;
  call.dtype = ScalarType::kFloat32;
  call.iter = it;
  EXPECT_EQ(HostLaunch::Elementwise(call, nullptr), cuda::kLaunchBadOp);
  call.op = static_cast<int>(cuda::FloatMathOp::kExp);
  call.dtype = ScalarType::kInt32;  // exp has no integer instance
  EXPECT_EQ(HostLaunch::Elementwise(call, nullptr), cuda::kLaunchBadDtype);
}

TEST(CudaEngineTest, VectorizedAndStridedPathsAgreeOnEveryTailLength) {
  alignas(64) float in[64], out_v[64], out_s[65];
  for (int i = 0; i < 64; ++i) in[i] = static_cast<float>(i) * 0.5f - 7.0f;
  const cuda::UnaryFn<float, cuda::UnaryOp::kSquare> square;
  for (int n = 0; n <= 19; ++n) {
    for (bool wide : {false, true}) {
      for (float& v : out_v) v = -1;
      for (float& v : out_s) v = -1;
      const cuda::ElementwiseIter v = ContiguousIter(out_v, in, n);
      ASSERT_TRUE(n <= 1 || (cuda::Vectorizable<float, float>(v)));  // one element: no dim left
      ASSERT_EQ((cuda::HostEngine::Run<float, float>(square, v, nullptr)), cuda::kLaunchOk);
      // A misaligned output takes the strided path.
      const cuda::ElementwiseIter s = ContiguousIter(out_s + 1, in, n);
      ASSERT_FALSE((cuda::Vectorizable<float, float>(s)));
      cuda::HostEngine::force_64bit = wide;
      ASSERT_EQ((cuda::HostEngine::Run<float, float>(square, s, nullptr)), cuda::kLaunchOk);
      cuda::HostEngine::force_64bit = false;
      for (int i = 0; i < 64; ++i) {
        const float want = i < n ? in[i] * in[i] : -1.0f;
        ASSERT_EQ(out_v[i], want) << "n " << n << " element " << i;
        ASSERT_EQ(out_s[i + 1], want) << "n " << n << " element " << i << (wide ? " (64-bit)" : "");
      }
      ASSERT_EQ(out_s[0], -1.0f);
    }
  }
}

// A fill is a copy from a constant: no input memory is read.
TEST(CudaEngineTest, ConstantOperandsNeedNoMemory) {
  alignas(64) int16_t out[11];
  for (int16_t& v : out) v = 0;
  cuda::ElementwiseIter it;
  it.num_operands = 2;
  it.operands[0] = {reinterpret_cast<char*>(out), ScalarType::kInt16, false, 0};
  it.operands[1].is_constant = true;
  it.operands[1].value = static_cast<uint16_t>(int16_t{-3});
  const int64_t sizes[] = {11};
  const int64_t s0[] = {2}, s1[] = {0};
  const int64_t* strides[] = {s0, s1};
  ASSERT_TRUE(cuda::BuildGeometry(1, sizes, 2, strides, &it.geometry));
  ASSERT_EQ((cuda::HostEngine::Run<int16_t, int16_t>(cuda::CopyFn<int16_t>{}, it, nullptr)), cuda::kLaunchOk);
  for (int16_t v : out) EXPECT_EQ(v, -3);
}

}  // namespace
}  // namespace tensord::testing::cudatest
