// StridedLoop: dim ordering and coalescing (see strided_loop.h).
#include "strided_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"

namespace tensord::cpu {

absl::StatusOr<Shape> BroadcastByteStrides(const TensorMeta& t, absl::Span<const int64_t> shape) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t td = t.dim();
  if (td > nd || static_cast<int64_t>(t.strides.size()) != td) {
    return InternalErr(absl::StrCat("internal: cannot broadcast ", ShapeToString(t.sizes), " to ",
                                    ShapeToString(shape)));
  }
  const int64_t item = t.itemsize();
  Shape out(nd, 0);
  for (int64_t i = 0; i < td; ++i) {
    const int64_t od = nd - td + i;
    if (t.sizes[i] == shape[od]) {
      out[od] = shape[od] == 1 ? 0 : t.strides[i] * item;
    } else if (t.sizes[i] == 1) {
      out[od] = 0;
    } else {
      return InternalErr(absl::StrCat("internal: cannot broadcast ", ShapeToString(t.sizes), " to ",
                                      ShapeToString(shape)));
    }
  }
  return out;
}

StridedLoop::StridedLoop(absl::Span<const int64_t> shape) : shape_(shape.begin(), shape.end()) {
  for (int64_t s : shape_) numel_ *= s;
}

int StridedLoop::Add(char* data, absl::Span<const int64_t> byte_strides) {
  // strides_ is [dim][operand]: re-lay it out with one more operand.
  const size_t nd = shape_.size();
  absl::InlinedVector<int64_t, 32> next(nd * (nops_ + 1));
  for (size_t d = 0; d < nd; ++d) {
    for (int k = 0; k < nops_; ++k) next[d * (nops_ + 1) + k] = strides_[d * nops_ + k];
    next[d * (nops_ + 1) + nops_] = d < byte_strides.size() ? byte_strides[d] : 0;
  }
  strides_ = std::move(next);
  data_.push_back(data);
  return nops_++;
}

absl::Status StridedLoop::AddTensor(const TensorRef& t) {
  TD_ASSIGN_OR_RETURN(Shape s, BroadcastByteStrides(*t.meta, shape_));
  Add(t.data_at_offset(), s);
  return absl::OkStatus();
}

void StridedLoop::Build(bool reorder) {
  const int nd = static_cast<int>(shape_.size());
  if (numel_ == 0) return;
  // perm[0] is the innermost dim. Start from the logical order (last dim innermost).
  std::vector<int> perm(nd);
  for (int i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  if (reorder && nd > 1) {
    // Returns true when dim `a` should be walked inside dim `b`.
    auto inner_than = [&](int a, int b) -> int {
      for (int k = 0; k < nops_; ++k) {
        const int64_t sa = stride(a, k), sb = stride(b, k);
        if (sa == 0 || sb == 0) continue;
        if (sa < sb) return 1;
        if (sa > sb) return -1;
      }
      return 0;
    };
    // Insertion sort (as PyTorch): stable for ambiguous pairs.
    for (int i = 1; i < nd; ++i) {
      for (int j = i; j > 0; --j) {
        const int c = inner_than(perm[j], perm[j - 1]);
        if (c > 0) {
          std::swap(perm[j], perm[j - 1]);
        } else {
          break;
        }
      }
    }
  }
  // Drop size-1 dims and coalesce.
  absl::InlinedVector<int64_t, 8> shape;
  absl::InlinedVector<int64_t, 32> strides;
  for (int i = 0; i < nd; ++i) {
    const int d = perm[i];
    if (shape_[d] == 1) continue;
    if (!shape.empty()) {
      const size_t last = shape.size() - 1;
      bool mergeable = true;
      for (int k = 0; k < nops_; ++k) {
        if (stride(d, k) != strides[last * nops_ + k] * shape[last]) {
          mergeable = false;
          break;
        }
      }
      if (mergeable) {
        shape[last] *= shape_[d];
        continue;
      }
    }
    shape.push_back(shape_[d]);
    for (int k = 0; k < nops_; ++k) strides.push_back(stride(d, k));
  }
  shape_ = std::move(shape);
  strides_ = std::move(strides);
}

}  // namespace tensord::cpu
