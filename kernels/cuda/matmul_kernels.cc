// The non-template helpers of matmul_kernels.h.
#include "matmul_kernels.h"

#include <algorithm>

namespace tensord::cuda::mm {

bool GemmLayout(const Mat& m, bool* trans, int64_t* ld) {
  return cpu::GemmMatrixLayout(m.rows, m.cols, m.s_row, m.s_col, trans, ld);
}

absl::StatusOr<Plan> MakePlan(const char* name, const TensorMeta& a, const TensorMeta& b, const TensorMeta& out) {
  if (a.dim() < 1 || b.dim() < 1) {
    return RuntimeErr(
        absl::StrCat(name, ": both arguments need at least 1 dimension, got ", a.dim(), "D and ", b.dim(), "D"));
  }
  Plan p;
  const int64_t da = a.dim(), db = b.dim();
  p.a = da == 1 ? Mat{1, a.sizes[0], 0, a.strides[0]}
                : Mat{a.sizes[da - 2], a.sizes[da - 1], a.strides[da - 2], a.strides[da - 1]};
  p.b = db == 1 ? Mat{b.sizes[0], 1, b.strides[0], 0}
                : Mat{b.sizes[db - 2], b.sizes[db - 1], b.strides[db - 2], b.strides[db - 1]};
  if (p.a.cols != p.b.rows) {
    return RuntimeErr(absl::StrCat(name, ": size mismatch, self is ", ShapeToString(a.sizes), ", other is ",
                                   ShapeToString(b.sizes), " (", p.a.cols, " != ", p.b.rows, ")"));
  }
  const int64_t ba = std::max<int64_t>(da - 2, 0), bb = std::max<int64_t>(db - 2, 0);
  const int64_t nb = std::max(ba, bb);
  p.batch.assign(nb, 1);
  p.a_bs.assign(nb, 0);
  p.b_bs.assign(nb, 0);
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t ia = i - (nb - ba), ib = i - (nb - bb);
    const int64_t sa = ia >= 0 ? a.sizes[ia] : 1, sb = ib >= 0 ? b.sizes[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      return RuntimeErr(absl::StrCat(name, ": The size of tensor a (", sa, ") must match the size of tensor b (", sb,
                                     ") at non-singleton dimension ", i));
    }
    p.batch[i] = sa == 1 ? sb : sa;
    if (ia >= 0 && sa != 1) p.a_bs[i] = a.strides[ia];
    if (ib >= 0 && sb != 1) p.b_bs[i] = b.strides[ib];
  }
  Shape expect = p.batch;
  if (da > 1) expect.push_back(p.a.rows);
  if (db > 1) expect.push_back(p.b.cols);
  TD_RETURN_IF_ERROR(cpu::ExpectOutputSizes(name, TensorRef{nullptr, &out}, expect));
  p.c_bs.assign(out.strides.begin(), out.strides.begin() + nb);
  const int64_t oc = out.dim();
  if (da > 1 && db > 1) {
    p.c = Mat{p.a.rows, p.b.cols, out.strides[oc - 2], out.strides[oc - 1]};
  } else if (da > 1) {
    p.c = Mat{p.a.rows, 1, out.strides[oc - 1], 0};
  } else if (db > 1) {
    p.c = Mat{1, p.b.cols, 0, out.strides[oc - 1]};
  } else {
    p.c = Mat{1, 1, 0, 0};
  }
  for (const int64_t v : {p.a.rows, p.a.cols, p.b.cols}) {
    if (v > INT_MAX) {
      return RuntimeErr(
          absl::StrCat(name, ": matrix dimension ", v, " exceeds what BLAS takes (", INT_MAX, ")"));
    }
  }
  return p;
}

BatchSplit SplitBatch(const Plan& p) {
  // Dims of size > 1, innermost last; a dim merges into the one inside it
  // when every operand steps over the inner one exactly.
  BatchSplit s;
  for (size_t d = 0; d < p.batch.size(); ++d) {
    if (p.batch[d] == 1) continue;
    if (!s.outer.empty()) {
      const int64_t n = p.batch[d];
      if (p.a_bs[d] * n == s.outer_a.back() && p.b_bs[d] * n == s.outer_b.back() &&
          p.c_bs[d] * n == s.outer_c.back()) {
        s.outer.back() *= p.batch[d];
        s.outer_a.back() = p.a_bs[d];
        s.outer_b.back() = p.b_bs[d];
        s.outer_c.back() = p.c_bs[d];
        continue;
      }
    }
    s.outer.push_back(p.batch[d]);
    s.outer_a.push_back(p.a_bs[d]);
    s.outer_b.push_back(p.b_bs[d]);
    s.outer_c.push_back(p.c_bs[d]);
  }
  if (!s.outer.empty()) {
    s.count = s.outer.back();
    s.stride_a = s.outer_a.back();
    s.stride_b = s.outer_b.back();
    s.stride_c = s.outer_c.back();
    s.outer.pop_back();
    s.outer_a.pop_back();
    s.outer_b.pop_back();
    s.outer_c.pop_back();
  }
  return s;
}

namespace {

// Collapses dims (sizes, strides) into one when they nest uniformly.
bool Collapse(const Shape& sizes, const Shape& strides, int64_t* size, int64_t* stride) {
  int64_t sz = 1, st = 0;
  bool have = false;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (!have) {
      st = strides[d];
      have = true;
    } else if (strides[d] != st * sz) {
      return false;
    }
    sz *= sizes[d];
  }
  *size = sz;
  *stride = have ? st : 0;
  return true;
}

}  // namespace

void FoldBatchIntoRows(Plan* p) {
  if (p->batch.empty() || !std::all_of(p->b_bs.begin(), p->b_bs.end(), [](int64_t s) { return s == 0; })) return;
  Shape rows = p->batch, a_st = p->a_bs, c_st = p->c_bs;
  rows.push_back(p->a.rows);
  a_st.push_back(p->a.s_row);
  c_st.push_back(p->c.s_row);
  int64_t ra, sa, rc, sc;
  if (!Collapse(rows, a_st, &ra, &sa) || !Collapse(rows, c_st, &rc, &sc) || ra > INT_MAX) return;
  Mat a = p->a, c = p->c;
  a.rows = ra;
  a.s_row = sa;
  c.rows = rc;
  c.s_row = sc;
  bool trans_a, trans_c;
  int64_t ld;
  if (a.cols > 0 && !GemmLayout(a, &trans_a, &ld)) return;
  if (!GemmLayout(c, &trans_c, &ld) || trans_c) return;
  p->a = a;
  p->c = c;
  p->batch.clear();
  p->a_bs.clear();
  p->b_bs.clear();
  p->c_bs.clear();
}

void GemmScalars(ScalarType t, const Scalar& alpha, const Scalar& beta, GemmCall* call) {
  (void)cpu::Dispatch<kSetInts | kSetFloats>(t, "matmul", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      call->alpha_int = static_cast<int64_t>(cpu::ScalarTo<T>(alpha));
      call->beta_int = static_cast<int64_t>(cpu::ScalarTo<T>(beta));
    } else {
      call->alpha = static_cast<double>(cpu::ScalarTo<T>(alpha));
      call->beta = static_cast<double>(cpu::ScalarTo<T>(beta));
    }
    return absl::OkStatus();
  });
}

}  // namespace tensord::cuda::mm
