// matmul / mm / bmm on CPU. Every rank combination of matmul maps to a batch
// of GEMMs: a 1-D left operand is a [1, k] row, a 1-D right operand a [k, 1]
// column, batch dims broadcast (stride 0). float32/float64 go to OpenBLAS
// (transposed operands are passed as transposed, not copied, whenever one of
// their strides is 1); float16/bfloat16 compute through float32; integers use
// a plain loop (wrapping, as PyTorch).
//
// addmm / baddbmm / linear run the product into their output and then apply
// the epilogue out = beta * self + alpha * out (self broadcast and converted
// to the output's dtype; beta == 0 ignores self, NaN included, as PyTorch);
// dot is the 1-D x 1-D product; outer a broadcast multiply.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#include "kernel_util.h"
#include "matmul_args.h"

namespace tensord::cpu {
namespace {

// How BLAS (row-major) can read a matrix in place: trans and ld. False when
// it cannot (then the matrix is copied to a contiguous buffer).
bool BlasLayout(const Mat& m, CBLAS_TRANSPOSE* trans, int64_t* ld) {
  bool transposed = false;
  if (!GemmMatrixLayout(m.rows, m.cols, m.s_row, m.s_col, &transposed, ld)) return false;
  *trans = transposed ? CblasTrans : CblasNoTrans;
  return true;
}

template <typename T>
void BlasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
              const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(lda), b,
                static_cast<blasint>(ldb), 0.0f, c, static_cast<blasint>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), 1.0, a, static_cast<blasint>(lda), b,
                static_cast<blasint>(ldb), 0.0, c, static_cast<blasint>(ldc));
  }
}

// Copies a strided matrix into a dense row-major buffer.
template <typename T>
void PackRowMajor(const T* src, const Mat& m, T* dst) {
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) dst[i * m.cols + j] = src[i * m.s_row + j * m.s_col];
  }
}

// Packing buffers, grown without exceptions, from the thread's
// ScratchAllocator when one is installed (the daemon charges the session's
// memory account), else the heap. `status` says why a Reserve failed.
template <typename T>
struct Scratch {
  std::shared_ptr<char> owner;
  T* buf = nullptr;
  size_t cap = 0;
  absl::Status status;
  bool Reserve(size_t n) {
    if (n <= cap) return true;
    owner.reset();
    buf = nullptr;
    cap = 0;
    if (n > static_cast<size_t>(std::numeric_limits<int64_t>::max())) {
      status = RuntimeErr(absl::StrCat("matmul: scratch of ", n, " elements overflows int64"));
      return false;
    }
    absl::StatusOr<std::shared_ptr<char>> p = AllocateScratchArray("matmul", static_cast<int64_t>(n), sizeof(T));
    if (!p.ok()) {
      status = p.status();
      return false;
    }
    owner = *std::move(p);
    buf = reinterpret_cast<T*>(owner.get());
    cap = n;
    return true;
  }
};

// One GEMM C = A @ B on strided matrices, float or double. False when a
// packing buffer cannot be allocated.
template <typename T>
bool GemmFloat(const T* a, Mat am, const T* b, Mat bm, T* c, Mat cm, Scratch<T>& scratch) {
  const int64_t m = cm.rows, n = cm.cols, k = am.cols;
  if (m == 0 || n == 0) return true;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * cm.s_row + j * cm.s_col] = T(0);
    return true;
  }
  // C must be row-major for BLAS; a column-major C is computed as
  // C^T = B^T A^T; anything else goes through a dense buffer.
  CBLAS_TRANSPOSE tc;
  int64_t ldc;
  if (BlasLayout(cm, &tc, &ldc) && tc == CblasTrans) {
    std::swap(a, b);
    const Mat at{am.cols, am.rows, am.s_col, am.s_row};
    const Mat bt{bm.cols, bm.rows, bm.s_col, bm.s_row};
    am = bt;
    bm = at;
    cm = Mat{cm.cols, cm.rows, cm.s_col, cm.s_row};
    return GemmFloat<T>(a, am, b, bm, c, cm, scratch);
  }
  const bool c_direct = BlasLayout(cm, &tc, &ldc) && tc == CblasNoTrans;
  const int64_t mm = cm.rows, nn = cm.cols;
  CBLAS_TRANSPOSE ta, tb;
  int64_t lda, ldb;
  // Elements of packing buffer: each operand's count fits int64 (validated
  // metadata), but expanded operands can make their sum wrap even size_t.
  size_t need = 0;
  const bool a_direct = BlasLayout(am, &ta, &lda);
  const bool b_direct = BlasLayout(bm, &tb, &ldb);
  bool wraps = false;
  if (!a_direct) wraps |= __builtin_add_overflow(need, static_cast<size_t>(am.rows * am.cols), &need);
  if (!b_direct) wraps |= __builtin_add_overflow(need, static_cast<size_t>(bm.rows * bm.cols), &need);
  if (!c_direct) wraps |= __builtin_add_overflow(need, static_cast<size_t>(mm * nn), &need);
  if (wraps) need = std::numeric_limits<size_t>::max();  // refused by Reserve
  if (!scratch.Reserve(need)) return false;
  T* buf = scratch.buf;
  if (!a_direct) {
    PackRowMajor(a, am, buf);
    a = buf;
    buf += am.rows * am.cols;
    ta = CblasNoTrans;
    lda = am.cols;
  }
  if (!b_direct) {
    PackRowMajor(b, bm, buf);
    b = buf;
    buf += bm.rows * bm.cols;
    tb = CblasNoTrans;
    ldb = bm.cols;
  }
  T* cdst = c;
  if (!c_direct) {
    cdst = buf;
    ldc = nn;
  }
  BlasGemm<T>(ta, tb, mm, nn, am.cols, a, lda, b, ldb, cdst, ldc);
  if (!c_direct) {
    for (int64_t i = 0; i < mm; ++i)
      for (int64_t j = 0; j < nn; ++j) c[i * cm.s_row + j * cm.s_col] = cdst[i * nn + j];
  }
  return true;
}

// One integer GEMM, wrapping like PyTorch's integer matmul.
template <typename T>
void GemmInt(const T* a, const Mat& am, const T* b, const Mat& bm, T* c, const Mat& cm) {
  const int64_t m = cm.rows, n = cm.cols, k = am.cols;
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * cm.s_row;
    for (int64_t j = 0; j < n; ++j) crow[j * cm.s_col] = T(0);
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * am.s_row + p * am.s_col];
      const T* brow = b + p * bm.s_row;
      for (int64_t j = 0; j < n; ++j) {
        crow[j * cm.s_col] = WrapAdd<T>(crow[j * cm.s_col], WrapMul<T>(av, brow[j * bm.s_col]));
      }
    }
  }
}

// The plan of a @ b into out (MakeMatmulPlan), the batch folded into the
// rows of A and C when B does not vary over it and the rows nest
// uniformly: one big GEMM instead of many small ones.
absl::StatusOr<MatmulPlan> Plan(const char* name, const TensorMeta& a, const TensorMeta& b,
                                const TensorMeta& out) {
  TD_ASSIGN_OR_RETURN(MatmulPlan p, MakeMatmulPlan(name, a, b, out));
  const bool b_constant = std::all_of(p.b_bs.begin(), p.b_bs.end(), [](int64_t s) { return s == 0; });
  if (!p.batch.empty() && b_constant) {
    Shape rows = p.batch, a_st = p.a_bs, c_st = p.c_bs;
    rows.push_back(p.a.rows);
    a_st.push_back(p.a.s_row);
    c_st.push_back(p.c.s_row);
    int64_t ra, sa, rc, sc;
    if (CollapseDims(rows, a_st, &ra, &sa) && CollapseDims(rows, c_st, &rc, &sc)) {
      p.a.rows = ra;
      p.a.s_row = sa;
      p.c.rows = rc;
      p.c.s_row = sc;
      p.batch.clear();
      p.a_bs.clear();
      p.b_bs.clear();
      p.c_bs.clear();
    }
  }
  TD_RETURN_IF_ERROR(CheckGemmDims(name, p));
  return p;
}

template <typename T>
absl::Status RunBatched(const MatmulPlan& p, const TensorRef& a, const TensorRef& b,
                        const TensorRef& c) {
  StridedLoop loop(p.batch);
  auto bytes = [](const Shape& s) {
    Shape r = s;
    for (int64_t& v : r) v *= static_cast<int64_t>(sizeof(T));
    return r;
  };
  loop.Add(c.data_at_offset(), bytes(p.c_bs));
  loop.Add(a.data_at_offset(), bytes(p.a_bs));
  loop.Add(b.data_at_offset(), bytes(p.b_bs));
  loop.Build();
  Scratch<T> scratch;
  bool ok = true;
  loop.RunUntil([&](char* const* ptr, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      T* cp = reinterpret_cast<T*>(ptr[0] + i * s[0]);
      const T* ap = reinterpret_cast<const T*>(ptr[1] + i * s[1]);
      const T* bp = reinterpret_cast<const T*>(ptr[2] + i * s[2]);
      if constexpr (std::is_floating_point_v<T>) {
        if (!GemmFloat<T>(ap, p.a, bp, p.b, cp, p.c, scratch)) {
          ok = false;
          return false;
        }
      } else {
        GemmInt<T>(ap, p.a, bp, p.b, cp, p.c);
      }
    }
    return true;
  });
  if (!ok) return scratch.status.ok() ? OutOfMemoryErr("matmul: cannot allocate a packing buffer") : scratch.status;
  return absl::OkStatus();
}

absl::Status MatmulImpl(const char* name, const TensorRef& a_in, const TensorRef& b_in,
                        const TensorRef& out) {
  const ScalarType t = out.meta->dtype;
  // float16/bfloat16 run in float32 and are rounded once at the end.
  const bool reduced = t == ScalarType::kFloat16 || t == ScalarType::kBFloat16;
  const ScalarType compute = reduced ? ScalarType::kFloat32 : t;
  std::unique_ptr<TempTensor> ha, hb, hc;
  TD_ASSIGN_OR_RETURN(TensorRef a, AsDtype(a_in, compute, ha));
  TD_ASSIGN_OR_RETURN(TensorRef b, AsDtype(b_in, compute, hb));
  TensorRef c = out;
  if (reduced) {
    TD_ASSIGN_OR_RETURN(hc, TempTensor::Make(out.meta->sizes, compute));
    c = hc->ref();
  }
  TD_ASSIGN_OR_RETURN(MatmulPlan plan, Plan(name, *a.meta, *b.meta, *c.meta));
  TD_RETURN_IF_ERROR(Dispatch<kSetInts | kSetStdFloats>(compute, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return RunBatched<T>(plan, a, b, c);
  }));
  if (reduced) return CopyConvert(out, c);
  return absl::OkStatus();
}

absl::Status Matmul(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ProductArgs a, ReadMatmul(ctx));
  return MatmulImpl(a.name, a.a, a.b, ctx.outputs[0]);
}

template <int64_t kRank>
absl::Status MmBmm(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ProductArgs a, ReadMmBmm(ctx, kRank));
  return MatmulImpl(a.name, a.a, a.b, ctx.outputs[0]);
}

// A dense run of the epilogue for float and double: o = alpha * o (+ beta *
// s), the same operations as the general loop, over by-value pointers so
// that GCC vectorises it (the bias add of every linear layer).
template <typename T>
void DenseEpilogue(T* o, const T* s, int64_t n, T alpha, T beta) {
  if (s == nullptr) {
    for (int64_t i = 0; i < n; ++i) o[i] = alpha * o[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i] = alpha * o[i] + beta * s[i];
}

// out = beta * self + alpha * out, self broadcast to out's shape (any
// dtype; converted to out's first). beta == 0 (as given, before conversion)
// ignores self entirely, so NaN/inf in self do not propagate. Integer
// outputs take alpha and beta converted to their type (1.5 -> 1), as PyTorch.
absl::Status Epilogue(const char* name, const TensorRef& out, const TensorRef* self, const Scalar& beta,
                      const Scalar& alpha) {
  const bool use_self = self != nullptr && beta.to_double() != 0.0;
  const bool alpha_one = alpha.to_double() == 1.0;
  if (!use_self && alpha_one) return absl::OkStatus();
  std::unique_ptr<TempTensor> hs;
  TensorRef s{};
  if (use_self) {
    TD_ASSIGN_OR_RETURN(s, AsDtype(*self, out.meta->dtype, hs));
  }
  StridedLoop loop(out.meta->sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(out));
  if (use_self) TD_RETURN_IF_ERROR(loop.AddTensor(s));
  loop.Build();
  return Dispatch<kSetInts | kSetFloats>(out.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const C a = ScalarTo<T>(alpha);
    const C b = use_self ? ScalarTo<T>(beta) : C(0);
    loop.Run([&](char* const* p, const int64_t* st, int64_t n) {
      if constexpr (std::is_floating_point_v<T>) {
        if (st[0] == static_cast<int64_t>(sizeof(T)) && (!use_self || st[1] == static_cast<int64_t>(sizeof(T)))) {
          DenseEpilogue(reinterpret_cast<T*>(p[0]), use_self ? reinterpret_cast<const T*>(p[1]) : nullptr, n,
                        T(a), T(b));
          return;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        char* o = p[0] + i * st[0];
        C v = WrapMul<C>(a, Load<T>(o));
        if (use_self) v = WrapAdd<C>(v, WrapMul<C>(b, Load<T>(p[1] + i * st[1])));
        Store<T>(o, v);
      }
    });
    return absl::OkStatus();
  });
}

// addmm(self, mat1, mat2, *, beta, alpha) and baddbmm(self, batch1, batch2,
// *, beta, alpha): the product into the output, then the epilogue.
absl::Status AddmmLike(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ProductArgs a, ReadAddmm(ctx));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(MatmulImpl(a.name, a.a, a.b, out));
  return Epilogue(a.name, out, &*a.self, a.beta, a.alpha);
}

absl::Status Dot(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ProductArgs a, ReadDot(ctx));
  return MatmulImpl("dot", a.a, a.b, ctx.outputs[0]);
}

// outer(self, vec2): out[i, j] = self[i] * vec2[j] in the output's dtype
// (bool: logical and; integers wrap).
absl::Status Outer(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ProductArgs args, ReadOuter(ctx));
  const TensorRef &a_in = args.a, &b_in = args.b;
  const TensorRef& out = ctx.outputs[0];
  std::unique_ptr<TempTensor> ha, hb;
  TD_ASSIGN_OR_RETURN(TensorRef a, AsDtype(a_in, out.meta->dtype, ha));
  TD_ASSIGN_OR_RETURN(TensorRef b, AsDtype(b_in, out.meta->dtype, hb));
  // a as a column [n, 1] and b as a row [1, m], broadcast by the loop.
  const TensorMeta col = ViewMeta(*a.meta, {a.meta->sizes[0], 1}, {a.meta->strides[0], 1}, a.meta->storage_offset);
  StridedLoop loop(out.meta->sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(out));
  TD_RETURN_IF_ERROR(loop.AddTensor(TensorRef{a.base, &col}));
  TD_RETURN_IF_ERROR(loop.AddTensor(b));
  loop.Build();
  return Dispatch<kSetAllButF8>(out.meta->dtype, "outer", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    loop.Run([&](char* const* p, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const C x = Load<T>(p[1] + i * st[1]), y = Load<T>(p[2] + i * st[2]);
        if constexpr (std::is_same_v<C, bool>) {
          Store<T>(p[0] + i * st[0], x && y);
        } else {
          Store<T>(p[0] + i * st[0], WrapMul<C>(x, y));
        }
      }
    });
    return absl::OkStatus();
  });
}

// linear(input, weight, bias=None): input @ weight.t() into the output (its
// shape is matmul's), then + bias (broadcast, converted to the output's dtype).
absl::Status Linear(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const LinearArgs a, ReadLinear(ctx));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(MatmulImpl("linear", a.input, TensorRef{a.weight.base, &a.weight_t}, out));
  if (!a.bias) return absl::OkStatus();
  return Epilogue("linear", out, &*a.bias, Scalar::Int(1), Scalar::Int(1));
}

}  // namespace

absl::Status RegisterMatmulKernels(KernelRegistry& r) {
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "matmul", Matmul));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "mm", MmBmm<2>));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "bmm", MmBmm<3>));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "addmm", AddmmLike));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "baddbmm", AddmmLike));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "dot", Dot));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "outer", Outer));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "linear", Linear));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
