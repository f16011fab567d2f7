// The non-template helpers of matmul_kernels.h.
#include "matmul_kernels.h"

#include <algorithm>

namespace tensord::cuda::mm {

bool GemmLayout(const Mat& m, bool* trans, int64_t* ld) {
  return cpu::GemmMatrixLayout(m.rows, m.cols, m.s_row, m.s_col, trans, ld);
}

absl::StatusOr<MatmulPlan> MakePlan(const char* name, const TensorMeta& a, const TensorMeta& b,
                                    const TensorMeta& out) {
  TD_ASSIGN_OR_RETURN(MatmulPlan p, cpu::MakeMatmulPlan(name, a, b, out));
  TD_RETURN_IF_ERROR(cpu::CheckGemmDims(name, p));
  return p;
}

BatchSplit SplitBatch(const MatmulPlan& p) {
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

void FoldBatchIntoRows(MatmulPlan* p) {
  if (p->batch.empty() || !std::all_of(p->b_bs.begin(), p->b_bs.end(), [](int64_t s) { return s == 0; })) return;
  Shape rows = p->batch, a_st = p->a_bs, c_st = p->c_bs;
  rows.push_back(p->a.rows);
  a_st.push_back(p->a.s_row);
  c_st.push_back(p->c.s_row);
  int64_t ra, sa, rc, sc;
  if (!cpu::CollapseDims(rows, a_st, &ra, &sa) || !cpu::CollapseDims(rows, c_st, &rc, &sc) || ra > INT_MAX) return;
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
