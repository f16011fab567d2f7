// Indexing: an index expression (x[1, :, None, mask]) as the op calls
// PyTorch's indexing makes of it.
#include "tensord/client/ops.h"

#include <algorithm>
#include <optional>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops_internal.h"
#include "tensord/meta/errors.h"

namespace tensord::client {

using internal::Args;

absl::StatusOr<Tensor> Index(const Tensor& self, absl::Span<const TensorIndex> indices, CallSite site) {
  if (!self.defined()) return TypeErr("index: the tensor is undefined");
  // Dims the index expression consumes (PyTorch's count_specified_dimensions).
  int64_t specified = 0;
  int ellipses = 0;
  for (const TensorIndex& idx : indices) {
    if (std::holds_alternative<int64_t>(idx) || std::holds_alternative<Slice>(idx)) {
      ++specified;
    } else if (const Tensor* t = std::get_if<Tensor>(&idx)) {
      if (!t->defined()) return TypeErr("index: an undefined Tensor was used as an index");
      specified += t->dtype() == ScalarType::kBool ? std::max<int64_t>(t->dim(), 1) : 1;
    } else if (std::holds_alternative<EllipsisIndex>(idx)) {
      if (++ellipses > 1) return IndexErr("an index can only have a single ellipsis ('...')");
    }
  }
  if (specified > self.dim()) {
    return IndexErr(absl::StrCat("too many indices for tensor of dimension ", self.dim()));
  }
  Tensor result = self;
  int64_t dim = 0;
  // Advanced indices by result dim (as PyTorch records them).
  std::vector<std::optional<Tensor>> advanced;
  auto record = [&](int64_t d, const Tensor& t) {
    if (static_cast<int64_t>(advanced.size()) <= d) advanced.resize(d + 1);
    advanced[d] = t;
  };
  bool has_mask = false;
  for (const TensorIndex& idx : indices) {
    if (const int64_t* i = std::get_if<int64_t>(&idx)) {
      TD_ASSIGN_OR_RETURN(result, Call1("select.int", Args(result, dim, *i), {}, CallMode::kAny, site));
    } else if (const Slice* sl = std::get_if<Slice>(&idx)) {
      const bool trivial = !sl->start && !sl->stop && (!sl->step || *sl->step == 1);
      if (!trivial) {
        Arg start = sl->start ? Arg(*sl->start) : Arg();
        Arg stop = sl->stop ? Arg(*sl->stop) : Arg();
        TD_ASSIGN_OR_RETURN(result, Call1("slice.Tensor", {result, dim, start, stop, sl->step.value_or(1)}, {},
                                          CallMode::kAny, site));
      }
      ++dim;
    } else if (std::holds_alternative<NoneIndex>(idx)) {
      TD_ASSIGN_OR_RETURN(result, Call1("unsqueeze", Args(result, dim), {}, CallMode::kAny, site));
      ++dim;
    } else if (std::holds_alternative<EllipsisIndex>(idx)) {
      dim += self.dim() - specified;
    } else if (const bool* b = std::get_if<bool>(&idx)) {
      TD_ASSIGN_OR_RETURN(result, Call1("unsqueeze", Args(result, dim), {}, CallMode::kAny, site));
      if (!*b) {
        TD_ASSIGN_OR_RETURN(result, Call1("narrow", {result, dim, 0, 0}, {}, CallMode::kAny, site));
      }
      ++dim;
    } else if (const Tensor* t = std::get_if<Tensor>(&idx)) {
      if (t->dtype() == ScalarType::kBool) {
        // A mask covers t.dim() dims, which must match the indexed sizes.
        const int64_t nd = std::max<int64_t>(t->dim(), 1);
        for (int64_t j = 0; j < t->dim(); ++j) {
          if (dim + j >= result.dim() || t->sizes()[j] != result.sizes()[dim + j]) {
            return IndexErr(absl::StrCat("The shape of the mask ", ShapeToString(t->sizes()), " at index ", j,
                                         " does not match the shape of the indexed tensor ",
                                         ShapeToString(result.sizes()), " at index ", dim + j));
          }
        }
        record(dim, *t);
        has_mask = true;
        dim += nd;
      } else {
        record(dim, *t);
        ++dim;
      }
    }
  }
  if (advanced.empty()) {
    if (result.impl() == self.impl()) {
      // x[...], x[:] or x[()] — PyTorch returns a view (an alias), not self;
      // a view of the same sizes is always valid, whatever the strides.
      TD_ASSIGN_OR_RETURN(result, Call1("view", {result, result.sizes()}, {}, CallMode::kAny, site));
    }
    return result;
  }
  if (has_mask) {
    int n_adv = 0;
    for (const auto& a : advanced) n_adv += a.has_value();
    // The common case x[mask] with a mask over every dim: masked_select.
    if (n_adv == 1 && advanced.size() == 1 && advanced[0]->dim() == result.dim() && result.dim() > 0) {
      return Call1("masked_select", {result, *advanced[0]}, {}, CallMode::kAny, site);
    }
    // General case: each mask becomes its nonzero() coordinates.
    std::vector<std::optional<Tensor>> expanded;
    for (size_t d = 0; d < advanced.size(); ++d) {
      if (!advanced[d].has_value() || advanced[d]->dtype() != ScalarType::kBool) {
        expanded.push_back(advanced[d]);
        continue;
      }
      const Tensor& mask = *advanced[d];
      TD_ASSIGN_OR_RETURN(Tensor nz, Call1("nonzero", {mask}, {}, CallMode::kAny, site));
      for (int64_t j = 0; j < std::max<int64_t>(mask.dim(), 1); ++j) {
        TD_ASSIGN_OR_RETURN(Tensor col, Call1("select.int", {nz, 1, j}, {}, CallMode::kAny, site));
        expanded.push_back(col);
      }
    }
    advanced = std::move(expanded);
  }
  return Call1("index.Tensor", {result, Arg::OptionalTensors{std::move(advanced)}}, {}, CallMode::kAny, site);
}

}  // namespace tensord::client
