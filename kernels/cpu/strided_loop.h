// kernels/cpu/strided_loop.h — a small TensorIterator: walks N operands that
// share one iteration shape, each with its own byte strides (0 for broadcast
// dims), in the order that follows memory, calling an inner-loop function on
// runs of elements.
//
//   StridedLoop loop(out.meta->sizes);
//   TD_RETURN_IF_ERROR(loop.AddTensor(out));   // operand 0 (decides the order first)
//   TD_RETURN_IF_ERROR(loop.AddTensor(a));     // broadcast to the shape
//   loop.Build();
//   loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
//     for (int64_t i = 0; i < n; ++i) ... p[0] + i * s[0] ... p[1] + i * s[1];
//   });
//
// Build() sorts dims so the earliest operand with non-zero, distinct strides
// is walked innermost-first (like PyTorch's reorder_dimensions), drops size-1
// dims and coalesces dims that are contiguous for every operand, so a
// contiguous or permuted-dense tensor becomes a single run. Internal to
// kernels/.
#ifndef TENSORD_KERNELS_CPU_STRIDED_LOOP_H_
#define TENSORD_KERNELS_CPU_STRIDED_LOOP_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::cpu {

// Byte strides of `t` viewed at `shape` under NumPy broadcasting (trailing
// dims aligned; missing or size-1 dims that grow get stride 0). Internal
// error when `t`'s sizes do not broadcast to `shape`.
absl::StatusOr<Shape> BroadcastByteStrides(const TensorMeta& t, absl::Span<const int64_t> shape);

class StridedLoop {
 public:
  explicit StridedLoop(absl::Span<const int64_t> shape);

  // Adds an operand starting at `data` with one byte stride per dim of the
  // shape. Returns its index (operands are numbered in the order added).
  int Add(char* data, absl::Span<const int64_t> byte_strides);
  // Adds a tensor, broadcast to the shape.
  absl::Status AddTensor(const TensorRef& t);

  // Orders and coalesces dims. `reorder` false keeps the logical (row-major)
  // order, for kernels whose output depends on visiting order; with `reorder`
  // the visiting order is unspecified.
  void Build(bool reorder = true);

  int64_t numel() const { return numel_; }
  int num_operands() const { return nops_; }

  // Calls f(ptrs, strides, n) for runs of n elements: element i of operand k
  // is at ptrs[k] + i * strides[k]. Nothing is called when numel() is 0; a
  // 0-dim shape gives one run of 1.
  template <typename F>
  void Run(F&& f) const;

  // Like Run, but f returns false to stop early.
  template <typename F>
  void RunUntil(F&& f) const;

 private:
  int64_t stride(int dim, int op) const { return strides_[static_cast<size_t>(dim) * nops_ + op]; }

  absl::InlinedVector<int64_t, 8> shape_;
  absl::InlinedVector<int64_t, 32> strides_;  // [dim][operand]
  absl::InlinedVector<char*, 4> data_;
  int nops_ = 0;
  int64_t numel_ = 1;
};

template <typename F>
void StridedLoop::RunUntil(F&& f) const {
  if (numel_ == 0) return;
  absl::InlinedVector<char*, 4> ptrs(data_.begin(), data_.end());
  const int nd = static_cast<int>(shape_.size());
  absl::InlinedVector<int64_t, 4> inner(nops_, 0);
  if (nd == 0) {
    f(ptrs.data(), inner.data(), int64_t{1});
    return;
  }
  for (int k = 0; k < nops_; ++k) inner[k] = stride(0, k);
  const int64_t n0 = shape_[0];
  if (nd == 1) {
    f(ptrs.data(), inner.data(), n0);
    return;
  }
  absl::InlinedVector<int64_t, 8> idx(nd, 0);
  while (true) {
    if (!f(ptrs.data(), inner.data(), n0)) return;
    int d = 1;
    for (; d < nd; ++d) {
      ++idx[d];
      if (idx[d] < shape_[d]) {
        for (int k = 0; k < nops_; ++k) ptrs[k] += stride(d, k);
        break;
      }
      for (int k = 0; k < nops_; ++k) ptrs[k] -= stride(d, k) * (shape_[d] - 1);
      idx[d] = 0;
    }
    if (d == nd) return;
  }
}

template <typename F>
void StridedLoop::Run(F&& f) const {
  RunUntil([&](char* const* p, const int64_t* s, int64_t n) {
    f(p, s, n);
    return true;
  });
}

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_STRIDED_LOOP_H_
