// tensord/kernels/registry.h — how kernels are found. A kernel computes into
// outputs the dispatcher already allocated from the op's meta function; it
// never decides a shape (except ops flagged kDataDependent, which allocate
// their outputs through KernelContext::allocate_output).
//
//   KernelRegistry reg;  RegisterCpuKernels(reg);
//   KernelFn k = reg.Find(DeviceType::kCPU, op.id);   // nullptr: no kernel
#ifndef TENSORD_KERNELS_REGISTRY_H_
#define TENSORD_KERNELS_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/meta/math_mode.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"

namespace tensord {

// A tensor as a kernel sees it: storage base pointer plus metadata. Element
// (i0, i1, ...) lives at base + (storage_offset + sum(ik * strides[k])) * itemsize.
// The dispatcher has checked that every element addressed lies in the storage.
struct TensorRef {
  char* base = nullptr;
  const TensorMeta* meta = nullptr;

  char* data_at_offset() const { return base + meta->storage_offset * meta->itemsize(); }
  template <typename T>
  T* data() const { return reinterpret_cast<T*>(data_at_offset()); }
};

// Per-session random number generator (rand, randn, *_like). Seeded by the
// daemon per session; tensord.manual_seed reseeds it.
struct Generator {
  std::mt19937_64 engine{0x7e45'02d5'eed5'0001ull};
};

struct KernelContext {
  const OpEntry* op = nullptr;
  // Where the kernel runs: every input and output pointer is an address on
  // this device. `stream` is the device's stream the kernel issues its work
  // to (a cudaStream_t on CUDA), nullptr on the CPU, whose kernels compute
  // before they return.
  Device device = kCPU;
  void* stream = nullptr;
  // Device memory of the stream's DeviceErrorWord (tensord/kernels/
  // device_error.h), where a kernel whose work runs later records the first
  // bad index instead of failing; nullptr on the CPU, whose kernels return
  // the error at once.
  void* error_word = nullptr;
  // Bound arguments in schema order; tensor values point at input metas.
  absl::Span<const Value> args;
  // Storage base pointer of each tensor argument, looked up by its meta.
  // Returns nullptr for a meta the call does not carry (an internal bug).
  std::function<char*(const TensorMeta*)> input_base;
  // Outputs, allocated by the dispatcher (empty for kDataDependent ops until
  // allocate_output fills them).
  std::vector<TensorRef> outputs;
  // For kDataDependent ops: allocates a contiguous output of `meta` on `device` (whatever device
  // `meta` names) and appends it to `outputs`. ResourceExhausted when over the session's limit.
  std::function<absl::StatusOr<TensorRef>(const TensorMeta&)> allocate_output;
  Generator* generator = nullptr;
  // The session's numerics switches (tensord/meta/math_mode.h).
  MathMode math;

  TensorRef input(size_t arg_index) const {
    const TensorMeta* m = args[arg_index].tensor_ptr();
    return TensorRef{input_base(m), m};
  }
  TensorRef input(const TensorMeta* m) const { return TensorRef{input_base(m), m}; }
};

// A kernel returns OK only after writing every element of every output
// (the daemon does not zero a dense output's storage first; a debugging
// daemon started with TENSORD_UNINITIALIZED_FILL=255 fills it with 0xFF bytes
// instead, which the Python test suite uses to catch a kernel that skips
// elements). After an error the outputs are discarded, never shown.
using KernelFn = absl::Status (*)(KernelContext& ctx);

// Scratch memory of kernels (casts and contiguous copies of inputs, im2col
// buffers, accumulators). The daemon installs one allocator per kernel call
// that charges the session's memory account, so scratch counts against
// --session-memory-limit like outputs do; with none installed (kernel tests,
// tools) scratch comes from the heap.
class ScratchAllocator {
 public:
  virtual ~ScratchAllocator() = default;
  // `bytes` (>= 0) bytes, 64-byte aligned, freed (and uncharged) when the
  // returned pointer's last copy goes. ResourceExhausted (MemoryError) naming
  // the op when over the limit or out of memory.
  virtual absl::StatusOr<std::shared_ptr<char>> Allocate(int64_t bytes) = 0;
};

// While alive, `a` is the calling thread's scratch allocator (the previous
// one comes back on destruction). Not copyable.
class ScopedScratchAllocator {
 public:
  explicit ScopedScratchAllocator(ScratchAllocator* a);
  ~ScopedScratchAllocator();
  ScopedScratchAllocator(const ScopedScratchAllocator&) = delete;
  ScopedScratchAllocator& operator=(const ScopedScratchAllocator&) = delete;

 private:
  ScratchAllocator* prev_;
};

// The calling thread's scratch allocator, or nullptr (use the heap).
ScratchAllocator* CurrentScratchAllocator();

class KernelRegistry {
 public:
  KernelRegistry();
  // Registers `fn` for `full_name` on `device`. InternalErr if the name is not
  // in the op table or is registered twice.
  absl::Status Register(DeviceType device, absl::string_view full_name, KernelFn fn);
  KernelFn Find(DeviceType device, uint32_t op_id) const;

 private:
  std::vector<std::vector<KernelFn>> by_device_;  // [device][op id]
};

// Registers every CPU kernel (kernels/cpu/). Returns the first registration
// error (a build bug: a kernel for an op the table lacks).
absl::Status RegisterCpuKernels(KernelRegistry& registry);

}  // namespace tensord

#endif  // TENSORD_KERNELS_REGISTRY_H_
