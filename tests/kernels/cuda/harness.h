// tests/kernels/cuda/harness.h — runs one op's sample inputs on a device
// through its kernel registry, the way the daemon's dispatcher does (bind
// the arguments, run the meta function, allocate or alias the outputs,
// call the kernel, synchronise), and compares the results with the CPU
// kernels'. Shared by the host test (the CUDA kernels' host side with the
// device work emulated on the host: cuda_host_test.cc) and the GPU test
// (cuda_elementwise_test.cc), so both check the same samples.
//
//   HostMemory cpu_memory(kCPU);
//   for (const Sample& s : SamplesFor("add.Tensor", /*seed=*/1)) {
//     SampleResult want = RunSample(s, CpuRegistry(), DeviceType::kCPU, cpu_memory);
//     SampleResult got = RunSample(s, cuda_registry, DeviceType::kCUDA, gpu_memory);
//     EXPECT_EQ(CompareResults(s, want, got), "");
//   }
//
// To cover a new CUDA kernel, give its op samples in SamplesFor (harness.cc);
// the tests fail for a registered op without samples.
#ifndef TENSORD_TESTS_KERNELS_CUDA_HARNESS_H_
#define TENSORD_TESTS_KERNELS_CUDA_HARNESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../kernel_test_util.h"
#include "absl/status/status.h"
#include "tensord/kernels/device_error.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/device.h"
#include "tensord/meta/value.h"

namespace tensord::testing::cudatest {

// The memory and stream of the device under test.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // `bytes` bytes, 256-byte aligned, owned by this object until it goes.
  virtual char* Allocate(int64_t bytes) = 0;
  virtual void CopyToDevice(char* dst, const void* src, int64_t bytes) = 0;
  virtual void CopyToHost(void* dst, const char* src, int64_t bytes) = 0;
  // Waits for the stream; the error of work that failed on it, or the
  // error a kernel recorded in the error word (DeviceErrorToStatus, as the
  // CUDA stream raises it), after which the word is zeroed.
  virtual absl::Status Synchronize() = 0;
  virtual void* stream() = 0;
  // The stream's DeviceErrorWord (tensord/kernels/device_error.h), in this
  // memory: what the kernels get as ctx.error_word. Null for a memory
  // without one, whose kernels that check indices then refuse to launch.
  virtual void* error_word() { return nullptr; }
  virtual Device device() const = 0;
};

// Host memory standing in for a device's (labelled `device`).
class HostMemory final : public DeviceMemory {
 public:
  explicit HostMemory(Device device) : device_(device) {}
  char* Allocate(int64_t bytes) override;
  void CopyToDevice(char* dst, const void* src, int64_t bytes) override;
  void CopyToHost(void* dst, const char* src, int64_t bytes) override;
  // The emulated launches ran at once: only the error word is left to read.
  absl::Status Synchronize() override;
  void* stream() override { return nullptr; }
  void* error_word() override { return &word_; }
  Device device() const override { return device_; }

 private:
  Device device_;
  DeviceErrorWord word_{};
  std::vector<std::shared_ptr<char>> buffers_;
};

// One argument of a sample: a tensor (an index into Sample::tensors), a
// list of them (-1 for None, as in index.Tensor's Tensor?[]), a plain value, or the device the sample runs on (for
// factories' device= and to.device).
struct SampleArg {
  enum class Kind { kTensor, kTensorList, kValue, kDevice };
  Kind kind = Kind::kValue;
  std::vector<int> tensors;
  Value value;

  static SampleArg T(int i) { return SampleArg{Kind::kTensor, {i}, Value()}; }
  static SampleArg List(std::vector<int> is) { return SampleArg{Kind::kTensorList, std::move(is), Value()}; }
  static SampleArg V(Value v) { return SampleArg{Kind::kValue, {}, std::move(v)}; }
  static SampleArg Dev() { return SampleArg{Kind::kDevice, {}, Value()}; }
};

// One call of an op. Tensors may share storage (views of one another): a
// run gives them one device buffer.
struct Sample {
  std::string op;
  std::string label;  // what the sample varies (dtypes, layouts), for messages
  std::vector<Tensor> tensors;
  std::vector<SampleArg> positional;
  std::vector<std::pair<std::string, SampleArg>> kwargs;
  // The outputs must have the CPU's bytes, element for element (ops that
  // only move elements, or compute exactly as the CPU kernel does), not
  // just values within the dtype's tolerance.
  bool exact = false;
  // For ops whose values depend on the device (the random ops: each device
  // has its own generator): when set, CompareResults checks each device's
  // outputs with it ("" when they pass, else why not) instead of comparing
  // their values with each other.
  std::function<std::string(const std::vector<Tensor>& outputs)> check_values;

  int Add(Tensor t) {
    tensors.push_back(std::move(t));
    return static_cast<int>(tensors.size()) - 1;
  }
};

struct SampleResult {
  absl::Status status;
  bool no_kernel = false;        // the registry has none for the op on that device
  std::vector<Tensor> outputs;   // copied back to the host (metas say cpu)
};

// Runs `s` with the kernel `registry` has for `kernel_device`, on `memory`,
// under the session numerics switches `math`.
SampleResult RunSample(const Sample& s, const KernelRegistry& registry, DeviceType kernel_device,
                       DeviceMemory& memory, const MathMode& math = MathMode());

// "" when `got` matches `want` (the same status code and message, or the
// same output metadata and values within the output dtype's tolerance, the
// same bytes for an exact sample); a description of the first difference
// otherwise.
std::string CompareResults(const Sample& s, const SampleResult& want, const SampleResult& got);

// ---- building samples (shared by the harness_*.cc files) -----------------------------

// Every dtype, in ScalarType order.
inline constexpr ScalarType kAllDtypes[] = {
    ScalarType::kBool,    ScalarType::kUInt8,    ScalarType::kInt8,         ScalarType::kInt16,
    ScalarType::kInt32,   ScalarType::kInt64,    ScalarType::kFloat16,      ScalarType::kBFloat16,
    ScalarType::kFloat32, ScalarType::kFloat64,  ScalarType::kFloat8_e4m3fn, ScalarType::kFloat8_e5m2,
};

// A dtype's name (DtypeName), for sample labels.
inline std::string Name(ScalarType t) { return std::string(DtypeName(t)); }

// A sample of `op` labelled `label`; its arguments and checks still to add.
inline Sample NewSample(const std::string& op, std::string label) {
  Sample s;
  s.op = op;
  s.label = std::move(label);
  return s;
}

// `t` in layout `layout` of kAllLayouts: 0 contiguous, 1 permuted (dim 0
// innermost, offset 1), 2 spread (offset 3).
inline Tensor LaidOut(const Tensor& t, int layout) { return WithLayout(t, kAllLayouts[layout]); }

// Samples of `op` (a full name) over dtypes and layouts; empty for an op
// the harness does not know. Deterministic for a seed.
std::vector<Sample> SamplesFor(const std::string& op, uint32_t seed);

// The matmul family's samples (harness_matmul.cc; part of SamplesFor).
std::vector<Sample> MatmulSamples(const std::string& op, uint32_t seed);

// The indexing ops' samples (harness_index.cc), part of SamplesFor.
std::vector<Sample> IndexSamplesFor(const std::string& op, uint32_t seed);

// The reductions' inputs of dtype `dt` (harness.cc), each with a label:
// every single-operand layout, special values, ties, and reductions long
// enough that every thread of a block folds several elements.
std::vector<std::pair<std::string, Tensor>> ReductionSampleInputs(ScalarType dt, std::mt19937& rng);

// Every dtype the samples cover.
std::vector<ScalarType> SampleDtypes();

// Samples of nansum, prod, all/any, var/std, norm, logsumexp, cumsum and
// cumprod (harness_reduce.cc), part of SamplesFor.
std::vector<Sample> MoreReductionSamplesFor(const std::string& op, uint32_t seed);

// The shape ops' samples (harness_shape.cc), part of SamplesFor.
std::vector<Sample> ShapeSamplesFor(const std::string& op, uint32_t seed);
// The random ops' samples (harness_random.cc), part of SamplesFor.
std::vector<Sample> RandomSamplesFor(const std::string& op, uint32_t seed);
// The nn ops' samples (harness_nn.cc), part of SamplesFor.
std::vector<Sample> NnSamplesFor(const std::string& op, uint32_t seed);
// Advanced indexing and the mask ops' samples (harness_advindex.cc), part
// of SamplesFor.
std::vector<Sample> AdvIndexSamplesFor(const std::string& op, uint32_t seed);
// topk's samples (harness_topk.cc), part of SamplesFor.
std::vector<Sample> TopkSamplesFor(const std::string& op, uint32_t seed);

// Launches large enough for grid-stride loops on both elementwise paths
// (2^25 elements and more) and reductions that fold many elements per
// thread or have more outputs than a grid has blocks.
std::vector<Sample> LargeSamples();

// Every op with a kernel for `device` in `registry`, by full name.
std::vector<std::string> OpsWithKernels(const KernelRegistry& registry, DeviceType device);

// The CPU kernels' registry.
const KernelRegistry& CpuRegistry();

}  // namespace tensord::testing::cudatest

#endif  // TENSORD_TESTS_KERNELS_CUDA_HARNESS_H_
