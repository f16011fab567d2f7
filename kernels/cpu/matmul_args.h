// kernels/cpu/matmul_args.h — how the matrix-product kernels (matmul, mm,
// bmm, addmm, baddbmm, dot, outer, linear) read a call's arguments and
// check them, and the batched problem (MatmulPlan) they reduce to, shared by
// the CPU kernels (matmul.cc) and the CUDA host side
// (cuda/matmul_kernels.h), so that both devices raise the same errors with
// the same texts:
//
//   TD_ASSIGN_OR_RETURN(const ProductArgs a, ReadMmBmm(ctx, 2));
//   TD_ASSIGN_OR_RETURN(MatmulPlan p, MakeMatmulPlan(a.name, *a.a.meta, *a.b.meta, *out.meta));
//
// The Read* functions start with CheckContext. Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_MATMUL_ARGS_H_
#define TENSORD_KERNELS_CPU_MATMUL_ARGS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::cpu {

// A strided matrix (element strides).
struct Mat {
  int64_t rows = 0, cols = 0;
  int64_t s_row = 0, s_col = 0;
  Mat Transposed() const { return Mat{cols, rows, s_col, s_row}; }
};

// The batched problem of a @ b into out: batch shape, per-operand batch
// strides (elements) and the matrices.
struct MatmulPlan {
  Shape batch;
  Shape a_bs, b_bs, c_bs;
  Mat a, b, c;
};

// The plan of a @ b into `out` with matmul's rules (1-D operands, broadcast
// batch dims). RuntimeError naming `name` for an operand without dims, a
// size mismatch or batch dims that do not broadcast; internal when `out`
// does not have the product's sizes.
absl::StatusOr<MatmulPlan> MakeMatmulPlan(const char* name, const TensorMeta& a, const TensorMeta& b,
                                          const TensorMeta& out);

// RuntimeError naming `name` when a matrix dim of `p` exceeds what a GEMM
// takes (an int: BLAS's and cuBLAS's limit).
absl::Status CheckGemmDims(const char* name, const MatmulPlan& p);

// Collapses dims (sizes, strides) into one (*size, *stride) when they nest
// uniformly (size-1 dims skipped); false otherwise.
bool CollapseDims(const Shape& sizes, const Shape& strides, int64_t* size, int64_t* stride);

// A product's operands: out = alpha * a @ b (+ beta * self, for addmm and
// baddbmm). `name` is the op's.
struct ProductArgs {
  const char* name = "";
  TensorRef a, b;
  std::optional<TensorRef> self;
  Scalar beta = Scalar::Int(0), alpha = Scalar::Int(1);
};

// matmul(self, other).
absl::StatusOr<ProductArgs> ReadMatmul(const KernelContext& ctx);

// mm (rank 2) / bmm (rank 3) (self, mat2). RuntimeError for operands of
// another rank and (bmm) different batch sizes.
absl::StatusOr<ProductArgs> ReadMmBmm(const KernelContext& ctx, int64_t rank);

// addmm(self, mat1, mat2, *, beta, alpha) / baddbmm(self, batch1, batch2,
// *, beta, alpha). Internal errors for other ranks and batch sizes (the
// meta function refuses them).
absl::StatusOr<ProductArgs> ReadAddmm(const KernelContext& ctx);

// dot(self, tensor): internal error unless both are 1-D.
absl::StatusOr<ProductArgs> ReadDot(const KernelContext& ctx);

// outer(self, vec2): internal error unless both are 1-D; outputs[0] must
// be [self's size, vec2's size].
absl::StatusOr<ProductArgs> ReadOuter(const KernelContext& ctx);

// linear(input, weight, bias=None): `weight_t`, weight's metadata
// transposed (a 1-D weight as is), to be read over weight's storage:
// TensorRef{a.weight.base, &a.weight_t}. Internal error for a weight
// neither 1-D nor 2-D.
struct LinearArgs {
  TensorRef input, weight;
  TensorMeta weight_t;
  std::optional<TensorRef> bias;
};
absl::StatusOr<LinearArgs> ReadLinear(const KernelContext& ctx);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_MATMUL_ARGS_H_
