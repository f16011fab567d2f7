// kernels/cpu/kernel_util.h — what every CPU kernel file shares: checked
// access to a call's inputs and outputs, temporary tensors, views built from
// metadata, copy-with-conversion, and the registration entry points of each
// kernel file. Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_KERNEL_UTIL_H_
#define TENSORD_KERNELS_CPU_KERNEL_UTIL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtypes.h"
#include "strided_loop.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::cpu {

// ---- call access --------------------------------------------------------------

// Checks the context the dispatcher built: an op, one value per schema
// argument, and `num_outputs` outputs (pass -1 for kDataDependent ops).
absl::Status CheckContext(const KernelContext& ctx, int num_outputs);

// Tensor argument `i` with its storage. An internal error when the argument is
// not a tensor or its storage is unknown.
absl::StatusOr<TensorRef> InputTensor(const KernelContext& ctx, size_t i);
// Same for a tensor that is not directly an argument (an element of a list).
absl::StatusOr<TensorRef> InputTensorOf(const KernelContext& ctx, const TensorMeta* m);

// Optional Scalar argument: nullopt for None.
std::optional<Scalar> OptionalScalar(const KernelContext& ctx, size_t i);

// An int[] argument, which may also come as one int (an int[N] given as an
// int, as PyTorch's schemas allow): the list, or {that int}.
Shape IntList(const Value& v);

// Internal error unless `out` has exactly `sizes`.
absl::Status ExpectOutputSizes(absl::string_view op, const TensorRef& out, absl::Span<const int64_t> sizes);

// ---- temporaries --------------------------------------------------------------

// `bytes` (>= 0) bytes of kernel scratch, 64-byte aligned when the calling
// thread's ScratchAllocator gives it (the daemon charges the session's memory
// account), else from the heap. MemoryError (ResourceExhausted) naming `op`
// when over the session's limit or out of memory. Every kernel buffer whose
// size follows the input (sort slots, rows, packing) comes from here.
absl::StatusOr<std::shared_ptr<char>> AllocateScratch(absl::string_view op, int64_t bytes);
// Scratch for `count` elements of `elem_bytes` each; the product is checked
// (a count taken from an expanded input can be astronomically large), a
// product beyond int64 refused with a message naming `op` and both numbers.
absl::StatusOr<std::shared_ptr<char>> AllocateScratchArray(absl::string_view op, int64_t count, int64_t elem_bytes);

// A contiguous tensor owned by the kernel (casts of inputs, accumulators).
// Heap-held so TensorRefs into it stay valid when the owner moves.
class TempTensor {
 public:
  // Contiguous storage (contents unspecified), from the calling thread's
  // ScratchAllocator when one is installed (the daemon charges the session),
  // else the heap. OutOfMemoryErr / the allocator's error when it cannot be had.
  static absl::StatusOr<std::unique_ptr<TempTensor>> Make(Shape sizes, ScalarType dtype);
  TensorRef ref() { return TensorRef{buf_.get(), &meta_}; }
  const TensorMeta& meta() const { return meta_; }
  char* data() { return buf_.get(); }

 private:
  TensorMeta meta_;
  std::shared_ptr<char> buf_;  // from the thread's ScratchAllocator, else the heap
};

// `t` as dtype `dtype`: `t` itself when it already is, else a converted
// contiguous copy held in `holder`.
absl::StatusOr<TensorRef> AsDtype(const TensorRef& t, ScalarType dtype,
                                  std::unique_ptr<TempTensor>& holder);

// `t` with row-major contiguous strides: itself when contiguous, else a copy.
absl::StatusOr<TensorRef> AsContiguous(const TensorRef& t, std::unique_ptr<TempTensor>& holder);

// ---- views --------------------------------------------------------------------

// Metadata of a view: same dtype/device as `base`, the given geometry.
TensorMeta ViewMeta(const TensorMeta& base, Shape sizes, Shape strides, int64_t storage_offset);

// ---- copies -------------------------------------------------------------------

// dst[...] = convert(src[...]) with `src` broadcast to dst's shape; any
// strides on either side, any pair of dtypes (PyTorch's cast semantics).
absl::Status CopyConvert(const TensorRef& dst, const TensorRef& src);

// Copies `src` into `dst` element by element in row-major (logical) order
// when their shapes differ but their numels match (reshape's copy).
absl::Status CopyReshape(const TensorRef& dst, const TensorRef& src);

// Fills every element of `dst` with `value`.
absl::Status Fill(const TensorRef& dst, const Scalar& value);

// C++ type -> ScalarType.
template <typename T>
constexpr ScalarType ScalarTypeOf() {
  if constexpr (std::is_same_v<T, bool>) return ScalarType::kBool;
  else if constexpr (std::is_same_v<T, uint8_t>) return ScalarType::kUInt8;
  else if constexpr (std::is_same_v<T, int8_t>) return ScalarType::kInt8;
  else if constexpr (std::is_same_v<T, int16_t>) return ScalarType::kInt16;
  else if constexpr (std::is_same_v<T, int32_t>) return ScalarType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return ScalarType::kInt64;
  else if constexpr (std::is_same_v<T, Half>) return ScalarType::kFloat16;
  else if constexpr (std::is_same_v<T, BFloat16>) return ScalarType::kBFloat16;
  else if constexpr (std::is_same_v<T, float>) return ScalarType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return ScalarType::kFloat64;
  else if constexpr (std::is_same_v<T, Float8E4M3FN>) return ScalarType::kFloat8_e4m3fn;
  else return ScalarType::kFloat8_e5m2;
}

// Reads element i of an integer index tensor's run (int64 or int32 storage).
inline int64_t LoadIndex(const char* p, ScalarType t) {
  if (t == ScalarType::kInt32) return *reinterpret_cast<const int32_t*>(p);
  return *reinterpret_cast<const int64_t*>(p);
}

// ---- in-place ops ----------------------------------------------------------------

// Runs the in-place op of `ctx` (add_.Tensor, clamp_, ...: self is argument 0
// and outputs[0] is self's own storage and meta, as the daemon passes them)
// through `base`, the kernel of its out-of-place op (same arguments). `base`
// writes straight into outputs[0] when the out-of-place result has self's
// dtype and no input shares memory with self in a different layout;
// otherwise it computes into a contiguous temporary of the out-of-place
// op's dtype, which is then converted into self (PyTorch's cast of an
// in-place result to self's dtype). Errors: those of `base`, OutOfMemory
// for the temporary, Internal when the op has no out-of-place twin.
absl::Status RunInPlace(KernelContext& ctx, KernelFn base);

// How RunInPlace (and the CUDA kernels' RunInPlace) runs the in-place op of
// `ctx`: the out-of-place twin's result meta, and whether the twin may
// write straight into self (`direct`: same dtype and sizes, and no input in
// self's storage in another layout). Internal when the op has no twin.
struct InPlacePlan {
  TensorMeta result;
  bool direct = false;
};
absl::StatusOr<InPlacePlan> PlanInPlace(const KernelContext& ctx);

// How a row-major GEMM (BLAS on the CPU, cuBLAS through its row-major
// terms on CUDA) reads a rows x cols matrix with strides (s_row, s_col) in
// place: `*transposed` (element (i, j) at j * ld + i) or not (at i * ld + j)
// and the leading dimension `*ld`. False when it cannot (neither stride is
// 1, or the leading dimension is too small or exceeds an int): the caller
// then copies the matrix to a contiguous buffer.
bool GemmMatrixLayout(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col, bool* transposed, int64_t* ld);

// RunInPlace as a KernelFn: InPlace<Mul> is mul_'s kernel.
template <KernelFn kBase>
absl::Status InPlace(KernelContext& ctx) {
  return RunInPlace(ctx, kBase);
}

// ---- registration, one per kernel file -------------------------------------

absl::Status RegisterFactoryKernels(KernelRegistry& r);
absl::Status RegisterUnaryKernels(KernelRegistry& r);
absl::Status RegisterBinaryKernels(KernelRegistry& r);
absl::Status RegisterReduceKernels(KernelRegistry& r);
absl::Status RegisterMatmulKernels(KernelRegistry& r);
absl::Status RegisterCopyKernels(KernelRegistry& r);
absl::Status RegisterIndexKernels(KernelRegistry& r);
absl::Status RegisterNnKernels(KernelRegistry& r);
absl::Status RegisterScatterKernels(KernelRegistry& r);
absl::Status RegisterScanKernels(KernelRegistry& r);    // scan.cc: cumsum, cumprod
absl::Status RegisterShapeKernels(KernelRegistry& r);   // shape.cc: flip, roll, repeat, tril, triu, pad, scatter
absl::Status RegisterConvKernels(KernelRegistry& r);
absl::Status RegisterOptimKernels(KernelRegistry& r);   // optim.cc: _fused_adam_    // conv.cc: convolution, pooling

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_KERNEL_UTIL_H_
