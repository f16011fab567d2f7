// kernels/cpu/elementwise.h — inner loops for elementwise kernels on top of
// StridedLoop: one output and one to three inputs, loaded as compute values
// (Load/Store from dtypes.h), with fast paths for contiguous runs and for a
// broadcast (stride-0) operand so that the compiler can vectorise them; a
// long contiguous run is split across cores (parallel.h). Ops must be pure.
//
//   StridedLoop loop(out.meta->sizes); loop.AddTensor(out); loop.AddTensor(a);
//   loop.AddTensor(b); loop.Build();
//   BinaryLoop<float, float, float>(loop, [](float x, float y) { return x + y; });
//
// Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_ELEMENTWISE_H_
#define TENSORD_KERNELS_CPU_ELEMENTWISE_H_

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "dtypes.h"
#include "kernel_util.h"
#include "parallel.h"
#include "strided_loop.h"

namespace tensord::cpu {

// The contiguous inner loops live in their own (not inlined) functions that
// take op by value: isolated from the surrounding iterator code, GCC
// vectorises them reliably (inlined, byte stores through char-typed pointers
// may alias everything the caller holds in memory, which blocked it).
#define TD_NOINLINE __attribute__((noinline))

template <typename Out, typename A, typename Op>
TD_NOINLINE void UnaryContiguous(char* o, const char* a, int64_t n, Op f) {
  constexpr int64_t so = sizeof(Out), sa = sizeof(A);
  for (int64_t i = 0; i < n; ++i) Store<Out>(o + i * so, f(Load<A>(a + i * sa)));
}

template <typename Out, typename A, typename B, typename Op>
TD_NOINLINE void BinaryContiguous(char* o, const char* a, const char* b, int64_t n, Op f) {
  constexpr int64_t so = sizeof(Out), sa = sizeof(A), sb = sizeof(B);
  for (int64_t i = 0; i < n; ++i) Store<Out>(o + i * so, f(Load<A>(a + i * sa), Load<B>(b + i * sb)));
}

// b is broadcast (stride 0) over the run.
template <typename Out, typename A, typename B, typename Op>
TD_NOINLINE void BinaryContiguousScalarB(char* o, const char* a, ComputeT<B> y, int64_t n, Op f) {
  constexpr int64_t so = sizeof(Out), sa = sizeof(A);
  for (int64_t i = 0; i < n; ++i) Store<Out>(o + i * so, f(Load<A>(a + i * sa), y));
}

// a is broadcast (stride 0) over the run.
template <typename Out, typename A, typename B, typename Op>
TD_NOINLINE void BinaryContiguousScalarA(char* o, ComputeT<A> x, const char* b, int64_t n, Op f) {
  constexpr int64_t so = sizeof(Out), sb = sizeof(B);
  for (int64_t i = 0; i < n; ++i) Store<Out>(o + i * so, f(x, Load<B>(b + i * sb)));
}

template <typename Out, typename A, typename B, typename C, typename Op>
TD_NOINLINE void TernaryContiguous(char* o, const char* a, const char* b, const char* c, int64_t n,
                                   Op f) {
  constexpr int64_t so = sizeof(Out), sa = sizeof(A), sb = sizeof(B), sc = sizeof(C);
  for (int64_t i = 0; i < n; ++i) {
    Store<Out>(o + i * so, f(Load<A>(a + i * sa), Load<B>(b + i * sb), Load<C>(c + i * sc)));
  }
}

#undef TD_NOINLINE

template <typename Out, typename A, typename Op>
void UnaryLoop(const StridedLoop& loop, Op op) {
  constexpr int64_t so = sizeof(Out), sa = sizeof(A);
  loop.Run([&op](char* const* p, const int64_t* s, int64_t n) {
    char* o = p[0];
    const char* a = p[1];
    if (s[0] == so && s[1] == sa) {
      ParallelFor(n, [&](int64_t b, int64_t e) { UnaryContiguous<Out, A>(o + b * so, a + b * sa, e - b, op); });
    } else if (s[0] == so && s[1] == 0) {
      const auto v = op(Load<A>(a));
      for (int64_t i = 0; i < n; ++i) Store<Out>(o + i * so, v);
    } else {
      for (int64_t i = 0; i < n; ++i) Store<Out>(o + i * s[0], op(Load<A>(a + i * s[1])));
    }
  });
}

template <typename Out, typename A, typename B, typename Op>
void BinaryLoop(const StridedLoop& loop, Op op) {
  constexpr int64_t so = sizeof(Out), sa = sizeof(A), sb = sizeof(B);
  loop.Run([&op](char* const* p, const int64_t* s, int64_t n) {
    char* o = p[0];
    const char* a = p[1];
    const char* b = p[2];
    if (s[0] == so && s[1] == sa && s[2] == sb) {
      ParallelFor(n, [&](int64_t i, int64_t e) {
        BinaryContiguous<Out, A, B>(o + i * so, a + i * sa, b + i * sb, e - i, op);
      });
    } else if (s[0] == so && s[1] == sa && s[2] == 0) {
      const auto y = Load<B>(b);
      ParallelFor(n, [&](int64_t i, int64_t e) {
        BinaryContiguousScalarB<Out, A, B>(o + i * so, a + i * sa, y, e - i, op);
      });
    } else if (s[0] == so && s[1] == 0 && s[2] == sb) {
      const auto x = Load<A>(a);
      ParallelFor(n, [&](int64_t i, int64_t e) {
        BinaryContiguousScalarA<Out, A, B>(o + i * so, x, b + i * sb, e - i, op);
      });
    } else {
      for (int64_t i = 0; i < n; ++i) {
        Store<Out>(o + i * s[0], op(Load<A>(a + i * s[1]), Load<B>(b + i * s[2])));
      }
    }
  });
}

template <typename Out, typename A, typename B, typename C, typename Op>
void TernaryLoop(const StridedLoop& loop, Op op) {
  constexpr int64_t so = sizeof(Out), sa = sizeof(A), sb = sizeof(B), sc = sizeof(C);
  loop.Run([&op](char* const* p, const int64_t* s, int64_t n) {
    if (s[0] == so && s[1] == sa && s[2] == sb && s[3] == sc) {
      ParallelFor(n, [&](int64_t i, int64_t e) {
        TernaryContiguous<Out, A, B, C>(p[0] + i * so, p[1] + i * sa, p[2] + i * sb, p[3] + i * sc, e - i, op);
      });
    } else {
      for (int64_t i = 0; i < n; ++i) {
        Store<Out>(p[0] + i * s[0], op(Load<A>(p[1] + i * s[1]), Load<B>(p[2] + i * s[2]),
                                       Load<C>(p[3] + i * s[3])));
      }
    }
  });
}

// True when every operand has out's sizes and is row-major contiguous (its
// elements are numel() consecutive slots in logical order): one flat run
// covers them, with no StridedLoop to build (most of a small op's kernel
// time otherwise).
inline bool FlatRun(std::initializer_list<const TensorRef*> ops) {
  const TensorMeta& o = *(*ops.begin())->meta;
  for (const TensorRef* t : ops) {
    if (t->meta->sizes != o.sizes || !t->meta->is_contiguous()) return false;
  }
  return true;
}

// Runs out = op(a) with `a` cast to dtype In first when it is not already.
template <typename Out, typename In, typename Op>
absl::Status RunUnary(const TensorRef& out, const TensorRef& a, Op op) {
  std::unique_ptr<TempTensor> ha;
  TD_ASSIGN_OR_RETURN(TensorRef ca, AsDtype(a, ScalarTypeOf<In>(), ha));
  if (FlatRun({&out, &ca})) {
    constexpr int64_t so = sizeof(Out), sa = sizeof(In);
    char* o = out.data_at_offset();
    const char* pa = ca.data_at_offset();
    ParallelFor(out.meta->numel(),
                [&](int64_t b, int64_t e) { UnaryContiguous<Out, In>(o + b * so, pa + b * sa, e - b, op); });
    return absl::OkStatus();
  }
  StridedLoop loop(out.meta->sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(out));
  TD_RETURN_IF_ERROR(loop.AddTensor(ca));
  loop.Build();
  UnaryLoop<Out, In>(loop, op);
  return absl::OkStatus();
}

// Runs out = op(a, b), inputs cast to A and B and broadcast to out's shape.
template <typename Out, typename A, typename B, typename Op>
absl::Status RunBinary(const TensorRef& out, const TensorRef& a, const TensorRef& b, Op op) {
  std::unique_ptr<TempTensor> ha, hb;
  TD_ASSIGN_OR_RETURN(TensorRef ca, AsDtype(a, ScalarTypeOf<A>(), ha));
  TD_ASSIGN_OR_RETURN(TensorRef cb, AsDtype(b, ScalarTypeOf<B>(), hb));
  if (FlatRun({&out, &ca, &cb})) {
    constexpr int64_t so = sizeof(Out), sa = sizeof(A), sb = sizeof(B);
    char* o = out.data_at_offset();
    const char* pa = ca.data_at_offset();
    const char* pb = cb.data_at_offset();
    ParallelFor(out.meta->numel(), [&](int64_t i, int64_t e) {
      BinaryContiguous<Out, A, B>(o + i * so, pa + i * sa, pb + i * sb, e - i, op);
    });
    return absl::OkStatus();
  }
  StridedLoop loop(out.meta->sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(out));
  TD_RETURN_IF_ERROR(loop.AddTensor(ca));
  TD_RETURN_IF_ERROR(loop.AddTensor(cb));
  loop.Build();
  BinaryLoop<Out, A, B>(loop, op);
  return absl::OkStatus();
}

template <typename Out, typename A, typename B, typename C, typename Op>
absl::Status RunTernary(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                        const TensorRef& c, Op op) {
  std::unique_ptr<TempTensor> ha, hb, hc;
  TD_ASSIGN_OR_RETURN(TensorRef ca, AsDtype(a, ScalarTypeOf<A>(), ha));
  TD_ASSIGN_OR_RETURN(TensorRef cb, AsDtype(b, ScalarTypeOf<B>(), hb));
  TD_ASSIGN_OR_RETURN(TensorRef cc, AsDtype(c, ScalarTypeOf<C>(), hc));
  StridedLoop loop(out.meta->sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(out));
  TD_RETURN_IF_ERROR(loop.AddTensor(ca));
  TD_RETURN_IF_ERROR(loop.AddTensor(cb));
  TD_RETURN_IF_ERROR(loop.AddTensor(cc));
  loop.Build();
  TernaryLoop<Out, A, B, C>(loop, op);
  return absl::OkStatus();
}

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_ELEMENTWISE_H_
