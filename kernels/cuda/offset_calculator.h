// kernels/cuda/offset_calculator.h — where element i of an elementwise
// launch lives in each operand, for host and device code alike (plain C++;
// nvcc and the host compiler read it, and the host tests run it):
//
//   ElementwiseGeometry g;   // dims innermost first, byte strides per operand
//   if (!BuildGeometry(shape.size(), shape.data(), 2, strides, &g)) ... too many dims
//   if (Fits32BitIndexing(g)) {
//     OffsetCalculator<2, uint32_t> calc(g);       // passed to a kernel by value
//     auto off = calc.get(i);                      // off[k]: byte offset of element i in operand k
//   }
//
// BuildGeometry orders and merges dims like the CPU's StridedLoop (PyTorch's
// TensorIterator): operand 0's smallest strides go innermost, size-1 dims
// are dropped, and neighbouring dims that are contiguous for every operand
// become one, so a dense tensor in any permutation is one dim. At most
// kMaxDims (25, as PyTorch's OffsetCalculator) dims may remain. The linear
// index walks the remaining dims innermost first; the order in which
// elements are visited is therefore unspecified, which elementwise ops,
// whose elements are independent, do not notice.
//
// Division by a dim's size dominates the calculator's cost: 32-bit indices
// divide by multiplying with a precomputed magic number (IntDivider<uint32_t>,
// as PyTorch's), 64-bit ones divide plainly. Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_OFFSET_CALCULATOR_H_
#define TENSORD_KERNELS_CUDA_OFFSET_CALCULATOR_H_

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "macros.h"

namespace tensord::cuda {

inline constexpr int kMaxDims = 25;
// The output and up to three inputs (where, clamp, addcmul, lerp).
inline constexpr int kMaxOperands = 4;

// The iteration space of one launch after BuildGeometry: `ndim` dims,
// innermost first, and each operand's stride in bytes along each dim (0
// where an operand is broadcast). ndim 0 is a single element.
struct ElementwiseGeometry {
  int ndim = 0;
  int num_operands = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims][kMaxOperands] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
};

// Fills `out` for `num_operands` (1..kMaxOperands) operands over `shape`
// (`ndim` sizes, outermost first, each >= 0) where byte_strides[k][d] is
// operand k's byte stride along shape's dim d. Returns false, leaving `out`
// unspecified, when more than kMaxDims dims remain after merging, or when
// num_operands is out of range. An empty shape (numel 0) gives ndim 1 with
// size 0; a 0-dim shape gives ndim 0 (one element).
inline bool BuildGeometry(int ndim, const int64_t* shape, int num_operands,
                          const int64_t* const* byte_strides, ElementwiseGeometry* out) {
  if (num_operands < 1 || num_operands > kMaxOperands || ndim < 0) return false;
  out->num_operands = num_operands;
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) numel *= shape[d];
  if (numel == 0) {
    out->ndim = 1;
    out->sizes[0] = 0;
    for (int k = 0; k < kMaxOperands; ++k) out->strides[0][k] = 0;
    return true;
  }
  auto stride = [&](int d, int k) { return byte_strides[k][d]; };
  // perm[0] is the innermost dim; start from the logical order (last dim innermost).
  std::vector<int> perm(static_cast<size_t>(ndim));
  for (int i = 0; i < ndim; ++i) perm[static_cast<size_t>(i)] = ndim - 1 - i;
  // > 0 when dim a should be walked inside dim b: the first operand with
  // non-zero strides on both decides (StridedLoop::Build's rule).
  auto inner_than = [&](int a, int b) {
    for (int k = 0; k < num_operands; ++k) {
      const int64_t sa = stride(a, k), sb = stride(b, k);
      if (sa == 0 || sb == 0) continue;
      if (sa < sb) return 1;
      if (sa > sb) return -1;
    }
    return 0;
  };
  // Insertion sort, as PyTorch's reorder_dimensions: stable for ties.
  for (int i = 1; i < ndim; ++i) {
    for (int j = i; j > 0; --j) {
      if (inner_than(perm[static_cast<size_t>(j)], perm[static_cast<size_t>(j - 1)]) > 0) {
        std::swap(perm[static_cast<size_t>(j)], perm[static_cast<size_t>(j - 1)]);
      } else {
        break;
      }
    }
  }
  // Drop size-1 dims and merge a dim into the previous (inner) one when it
  // continues it for every operand.
  int nd = 0;
  for (int i = 0; i < ndim; ++i) {
    const int d = perm[static_cast<size_t>(i)];
    if (shape[d] == 1) continue;
    if (nd > 0) {
      bool mergeable = true;
      for (int k = 0; k < num_operands; ++k) {
        if (stride(d, k) != out->strides[nd - 1][k] * out->sizes[nd - 1]) {
          mergeable = false;
          break;
        }
      }
      if (mergeable) {
        out->sizes[nd - 1] *= shape[d];
        continue;
      }
    }
    if (nd == kMaxDims) return false;
    out->sizes[nd] = shape[d];
    for (int k = 0; k < kMaxOperands; ++k) out->strides[nd][k] = k < num_operands ? stride(d, k) : 0;
    ++nd;
  }
  out->ndim = nd;
  return true;
}

// Like BuildGeometry, but keeps the logical order: the linear index walks
// `shape` in row-major order (the last dim innermost), so that it is the
// element's row-major index (what argmax returns). Size-1 dims are dropped
// and a dim merges into the next one only when that keeps the order.
inline bool BuildLogicalGeometry(int ndim, const int64_t* shape, int num_operands,
                                 const int64_t* const* byte_strides, ElementwiseGeometry* out) {
  if (num_operands < 1 || num_operands > kMaxOperands || ndim < 0) return false;
  out->num_operands = num_operands;
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) numel *= shape[d];
  if (numel == 0) {
    out->ndim = 1;
    out->sizes[0] = 0;
    for (int k = 0; k < kMaxOperands; ++k) out->strides[0][k] = 0;
    return true;
  }
  int nd = 0;
  for (int d = ndim - 1; d >= 0; --d) {  // innermost first
    if (shape[d] == 1) continue;
    if (nd > 0) {
      bool mergeable = true;
      for (int k = 0; k < num_operands; ++k) {
        if (byte_strides[k][d] != out->strides[nd - 1][k] * out->sizes[nd - 1]) {
          mergeable = false;
          break;
        }
      }
      if (mergeable) {
        out->sizes[nd - 1] *= shape[d];
        continue;
      }
    }
    if (nd == kMaxDims) return false;
    out->sizes[nd] = shape[d];
    for (int k = 0; k < kMaxOperands; ++k) out->strides[nd][k] = k < num_operands ? byte_strides[k][d] : 0;
    ++nd;
  }
  out->ndim = nd;
  return true;
}

// True when the launch may use 32-bit indices: numel and every operand's
// largest byte offset (the sum of (size - 1) * |stride|, which bounds every
// partial sum the calculator forms) fit in int32.
inline bool Fits32BitIndexing(const ElementwiseGeometry& g) {
  constexpr int64_t kMax = INT32_MAX;
  int64_t numel = 1;
  for (int d = 0; d < g.ndim; ++d) {
    numel *= g.sizes[d];
    if (numel > kMax) return false;
  }
  for (int k = 0; k < g.num_operands; ++k) {
    int64_t extent = 0;
    for (int d = 0; d < g.ndim; ++d) {
      if (g.sizes[d] == 0) return true;  // nothing is addressed
      const int64_t s = g.strides[d][k] < 0 ? -g.strides[d][k] : g.strides[d][k];
      // (size - 1) * s > kMax - extent, without overflowing.
      if (s != 0 && g.sizes[d] - 1 > (kMax - extent) / s) return false;
      extent += (g.sizes[d] - 1) * s;
    }
  }
  return true;
}

template <typename T>
struct DivMod {
  T div;
  T mod;
};

// Division by a fixed divisor (a dim's size, >= 1). The generic form divides;
// the uint32_t form multiplies by a magic number instead (Granlund and
// Montgomery, as PyTorch's IntDivider), exact for every n < 2^31 and
// divisor in [1, INT32_MAX] — what Fits32BitIndexing guarantees.
template <typename T>
struct IntDivider {
  IntDivider() = default;
  explicit IntDivider(T d) : divisor(d) {}
  TD_HOST_DEVICE TD_INLINE T div(T n) const { return n / divisor; }
  TD_HOST_DEVICE TD_INLINE T mod(T n) const { return n % divisor; }
  TD_HOST_DEVICE TD_INLINE DivMod<T> divmod(T n) const { return {n / divisor, n % divisor}; }
  T divisor = 1;
};

template <>
struct IntDivider<uint32_t> {
  IntDivider() = default;
  explicit IntDivider(uint32_t d) : divisor(d) {
    for (shift = 0; shift < 32; ++shift) {
      if ((uint64_t{1} << shift) >= divisor) break;
    }
    const uint64_t one = 1;
    const uint64_t magic = ((one << 32) * ((one << shift) - divisor)) / divisor + 1;
    m1 = static_cast<uint32_t>(magic);
  }
  TD_HOST_DEVICE TD_INLINE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, m1);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * m1) >> 32);
#endif
    return (t + n) >> shift;
  }
  TD_HOST_DEVICE TD_INLINE uint32_t mod(uint32_t n) const { return n - div(n) * divisor; }
  TD_HOST_DEVICE TD_INLINE DivMod<uint32_t> divmod(uint32_t n) const {
    const uint32_t q = div(n);
    return {q, n - q * divisor};
  }
  uint32_t divisor = 1;
  uint32_t m1 = 1;
  uint32_t shift = 0;
};

// A fixed-size array that device code can return by value.
template <typename T, int N>
struct Array {
  T data[N > 0 ? N : 1];
  TD_HOST_DEVICE TD_INLINE T& operator[](int i) { return data[i]; }
  TD_HOST_DEVICE TD_INLINE const T& operator[](int i) const { return data[i]; }
};

// Byte offsets of element `linear` in each of N operands. index_t is
// uint32_t (only when Fits32BitIndexing) or uint64_t; offsets are signed
// (int32_t / int64_t) so that negative strides work too. Built on the host
// from a geometry and passed to a kernel by value (at most 25 dims: about
// 700 bytes of kernel parameters with 32-bit indices, 1 KB with 64-bit).
template <int N, typename index_t>
struct OffsetCalculator {
  static_assert(std::is_same_v<index_t, uint32_t> || std::is_same_v<index_t, uint64_t>,
                "index_t is uint32_t or uint64_t");
  static_assert(N >= 1 && N <= kMaxOperands, "1 to kMaxOperands operands");
  using offset_t = std::conditional_t<std::is_same_v<index_t, uint32_t>, int32_t, int64_t>;

  OffsetCalculator() = default;
  // `g` has N operands and, for uint32_t, passed Fits32BitIndexing.
  // Constructing one for an empty geometry is fine; indexing it is not.
  explicit OffsetCalculator(const ElementwiseGeometry& g) : ndim(g.ndim) {
    for (int d = 0; d < kMaxDims; ++d) {
      const bool used = d < g.ndim;
      // A size of 0 (an empty launch, which never indexes) divides by 1.
      sizes[d] = IntDivider<index_t>(used && g.sizes[d] > 0 ? static_cast<index_t>(g.sizes[d]) : index_t{1});
      for (int k = 0; k < N; ++k) strides[d][k] = used ? static_cast<offset_t>(g.strides[d][k]) : 0;
    }
  }

  TD_HOST_DEVICE TD_INLINE Array<offset_t, N> get(index_t linear) const {
    Array<offset_t, N> offsets;
    for (int k = 0; k < N; ++k) offsets[k] = 0;
    if constexpr (std::is_same_v<index_t, uint32_t>) {
      // Unrolled: a magic-number division is a few instructions.
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int d = 0; d < kMaxDims; ++d) {
        if (d == ndim) break;
        Step(d, linear, offsets);
      }
    } else {
      // Not unrolled: a 64-bit division is a long instruction sequence, and
      // 25 copies of it would bloat every kernel (these launches are rare).
#if defined(__CUDA_ARCH__)
#pragma unroll 1
#endif
      for (int d = 0; d < ndim; ++d) Step(d, linear, offsets);
    }
    return offsets;
  }

  int ndim = 0;
  IntDivider<index_t> sizes[kMaxDims];
  offset_t strides[kMaxDims][N > 0 ? N : 1] = {};

 private:
  // Peels dim d off `linear` and adds its offsets.
  TD_HOST_DEVICE TD_INLINE void Step(int d, index_t& linear, Array<offset_t, N>& offsets) const {
    const DivMod<index_t> qr = sizes[d].divmod(linear);
    linear = qr.div;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 0; k < N; ++k) offsets[k] += static_cast<offset_t>(qr.mod) * strides[d][k];
  }
};

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_OFFSET_CALCULATOR_H_
