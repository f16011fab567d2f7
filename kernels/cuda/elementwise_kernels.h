// kernels/cuda/elementwise_kernels.h — the host side of the CUDA
// elementwise kernels: one KernelFn per op, which reads the call's
// arguments exactly as the op's CPU kernel does (kernels/cpu/unary.cc,
// binary.cc, copy.cc, factory.cc: the same checks, errors, dtype choice and
// scalar conversions) and describes one or more launches (ElementwiseCall)
// to `L`, the device:
//
//   RegisterElementwiseKernels<CudaLaunch>(registry, DeviceType::kCUDA);   // cuda_kernels.cc
//   RegisterElementwiseKernels<HostLaunch>(registry, DeviceType::kCUDA);   // the host tests
//
// L provides (cuda_launch.h): static int Elementwise(const ElementwiseCall&,
// void* stream); static std::string ErrorString(int); static
// StatusOr<shared_ptr<char>> Allocate(op, bytes, stream); static int
// Memset(char*, bytes, stream).
//
// Kernels return once their work is issued to ctx.stream. Temporaries
// (an input that overlaps an in-place op's self, reshape's contiguous copy)
// come from L::Allocate and are released when the kernel returns, before
// the stream has run the work that reads them: the allocator behind it must
// be stream-ordered (a freed block is reused only by work ordered after it
// on the stream, as cudaFreeAsync and PyTorch's caching allocator do).
//
// Behaviour that differs from the CPU kernels: integer division, remainder
// and fmod by zero give 0 instead of raising ZeroDivisionError (a GPU
// thread cannot raise; see elementwise_ops.h). Host code only.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_
#define TENSORD_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "../cpu/dtypes.h"
#include "../cpu/elementwise_args.h"
#include "../cpu/kernel_util.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "elementwise_call.h"
#include "elementwise_host.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::cuda::ew {

using cpu::CheckContext;
using cpu::DtypeNotImplemented;
using cpu::InputTensor;
using cpu::InputTensorOf;

// ---- launching ---------------------------------------------------------------------

template <class L>
absl::Status Launch(const KernelContext& ctx, const ElementwiseCall& call) {
  const int code = L::Elementwise(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

// out = functor (family, op) over `inputs`, computed in `dtype`.
template <class L>
absl::Status Run(const KernelContext& ctx, EwFamily family, int op, ScalarType dtype, const TensorRef& out,
                 std::initializer_list<EwInput> inputs, uint64_t param = 0, int flags = 0) {
  ElementwiseCall call;
  TD_ASSIGN_OR_RETURN(call.iter, MakeIter(ctx.op->full_name(), out, inputs));
  call.family = family;
  call.op = op;
  call.dtype = dtype;
  call.param = param;
  call.flags = flags;
  return Launch<L>(ctx, call);
}

template <typename E>
constexpr int OpCode(E e) {
  return static_cast<int>(e);
}

// The unsigned-or-integer dtype of `itemsize` bytes, whose copies keep bits.
constexpr ScalarType BitsDtype(int64_t itemsize) {
  switch (itemsize) {
    case 1: return ScalarType::kUInt8;
    case 2: return ScalarType::kInt16;
    case 4: return ScalarType::kInt32;
    default: return ScalarType::kInt64;
  }
}

// dst[...] = convert(src[...]), src broadcast to dst's shape; any dtypes.
// Between equal dtypes the bits are copied as the CPU copies them (a NaN's
// payload and sign included) by moving integers of the element's size;
// bool is still normalised to 0/1, as the CPU does.
template <class L>
absl::Status CopyConvert(const KernelContext& ctx, const TensorRef& dst, const TensorRef& src) {
  const ScalarType dt = dst.meta->dtype;
  if (src.meta->dtype != dt || dt == ScalarType::kBool) {
    return Run<L>(ctx, EwFamily::kCopy, OpCode(CopyOp::kCopy), dt, dst, {EwInput::Of(src)});
  }
  ElementwiseCall call;
  TD_ASSIGN_OR_RETURN(call.iter, MakeIter(ctx.op->full_name(), dst, {EwInput::Of(src)}));
  call.family = EwFamily::kCopy;
  call.op = OpCode(CopyOp::kCopy);
  call.dtype = BitsDtype(dst.meta->itemsize());
  call.iter.operands[0].dtype = call.iter.operands[1].dtype = call.dtype;
  return Launch<L>(ctx, call);
}

// Every element of dst = value (converted as the CPU's Fill does).
template <class L>
absl::Status Fill(const KernelContext& ctx, const TensorRef& dst, const Scalar& value) {
  return Run<L>(ctx, EwFamily::kCopy, OpCode(CopyOp::kCopy), dst.meta->dtype, dst,
                {EwInput::Constant(ScalarBits(value, dst.meta->dtype))});
}

// A contiguous tensor of the kernel's own on ctx.device, from L::Allocate.
struct DeviceTemp {
  std::shared_ptr<char> buffer;
  TensorMeta meta;
  TensorRef ref() { return TensorRef{buffer.get(), &meta}; }
};

template <class L>
absl::StatusOr<std::unique_ptr<DeviceTemp>> MakeTemp(const KernelContext& ctx, Shape sizes, ScalarType dtype) {
  TD_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(sizes));
  TD_ASSIGN_OR_RETURN(int64_t bytes, CheckedBytes(absl::StrCat(ctx.op->full_name(), ": temporary"), numel, ItemSize(dtype)));
  auto t = std::make_unique<DeviceTemp>();
  TD_ASSIGN_OR_RETURN(t->buffer, L::Allocate(ctx.op->full_name(), bytes, ctx.stream));
  t->meta = TensorMeta::Contiguous(std::move(sizes), dtype, ctx.device);
  return t;
}

// ---- in-place ops -------------------------------------------------------------------

// The CPU's RunInPlace on the device: `base` (the out-of-place kernel)
// writes straight into self (outputs[0]) when its result has self's dtype
// and no input shares self's storage in another layout; otherwise it writes
// a temporary of its result's dtype, which is then converted into self.
template <class L>
absl::Status RunInPlace(KernelContext& ctx, KernelFn base) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  TD_ASSIGN_OR_RETURN(const cpu::InPlacePlan plan, cpu::PlanInPlace(ctx));
  if (plan.direct) return base(ctx);
  TD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTemp> tmp, MakeTemp<L>(ctx, plan.result.sizes, plan.result.dtype));
  KernelContext inner = ctx;
  inner.outputs[0] = tmp->ref();
  TD_RETURN_IF_ERROR(base(inner));
  return CopyConvert<L>(ctx, out, tmp->ref());
}

template <class L, KernelFn kBase>
absl::Status InPlace(KernelContext& ctx) {
  return RunInPlace<L>(ctx, kBase);
}

// ---- unary ---------------------------------------------------------------------------

constexpr const char* UnaryName(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kSign: return "sign";
    case UnaryOp::kFloor: return "floor";
    case UnaryOp::kCeil: return "ceil";
    case UnaryOp::kRound: return "round";
    case UnaryOp::kTrunc: return "trunc";
    case UnaryOp::kRelu: return "relu";
    case UnaryOp::kBitwiseNot: return "bitwise_not";
    case UnaryOp::kSquare: return "square";
  }
  return "unary";
}

// out = op(self) in out's dtype (self converted to it).
template <class L, UnaryOp kOp>
absl::Status Unary(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef a, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, UnaryDtypes(kOp))) return DtypeNotImplemented(UnaryName(kOp), dt);
  return Run<L>(ctx, EwFamily::kUnary, OpCode(kOp), dt, out, {EwInput::Of(a)});
}

constexpr const char* FloatMathName(FloatMathOp op) {
  switch (op) {
    case FloatMathOp::kExp: return "exp";
    case FloatMathOp::kLog: return "log";
    case FloatMathOp::kSqrt: return "sqrt";
    case FloatMathOp::kRsqrt: return "rsqrt";
    case FloatMathOp::kSin: return "sin";
    case FloatMathOp::kCos: return "cos";
    case FloatMathOp::kTanh: return "tanh";
    case FloatMathOp::kSigmoid: return "sigmoid";
    case FloatMathOp::kReciprocal: return "reciprocal";
    case FloatMathOp::kErf: return "erf";
    case FloatMathOp::kExp2: return "exp2";
    case FloatMathOp::kExpm1: return "expm1";
    case FloatMathOp::kLog2: return "log2";
    case FloatMathOp::kLog1p: return "log1p";
    case FloatMathOp::kSilu: return "silu";
    case FloatMathOp::kGeluErf:
    case FloatMathOp::kGeluTanh: return "gelu";
  }
  return "float math";
}

template <class L>
absl::Status RunFloatMath(KernelContext& ctx, FloatMathOp op) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef a, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, FloatMathDtypes(op))) return DtypeNotImplemented(FloatMathName(op), dt);
  return Run<L>(ctx, EwFamily::kFloatMath, OpCode(op), dt, out, {EwInput::Of(a)});
}

template <class L, FloatMathOp kOp>
absl::Status FloatMath(KernelContext& ctx) {
  return RunFloatMath<L>(ctx, kOp);
}

// gelu(self, approximate): 'none' (erf) or 'tanh'.
template <class L>
absl::Status Gelu(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(const bool tanh_approx, cpu::ReadGeluTanh(ctx));
  return RunFloatMath<L>(ctx, tanh_approx ? FloatMathOp::kGeluTanh : FloatMathOp::kGeluErf);
}

constexpr const char* PredicateName(PredicateOp op) {
  switch (op) {
    case PredicateOp::kLogicalNot: return "logical_not";
    case PredicateOp::kIsNan: return "isnan";
    case PredicateOp::kIsInf: return "isinf";
    case PredicateOp::kIsFinite: return "isfinite";
  }
  return "predicate";
}

using cpu::ExpectBoolOutput;

// out (bool) = pred(self), computed in self's dtype.
template <class L, PredicateOp kOp>
absl::Status Predicate(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef a, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectBoolOutput(PredicateName(kOp), out));
  const ScalarType dt = a.meta->dtype;
  if (!DtypeInSet(dt, PredicateDtypes(kOp))) return DtypeNotImplemented(PredicateName(kOp), dt);
  return Run<L>(ctx, EwFamily::kPredicate, OpCode(kOp), dt, out, {EwInput::Of(a)});
}

// ---- binary --------------------------------------------------------------------------

// (self, other) of a binary op whose argument 1 is a tensor (".Tensor"
// overloads) or a Scalar.
struct BinaryArgs {
  TensorRef self;
  TensorRef other_tensor;
  std::optional<Scalar> other_scalar;
  bool other_is_tensor() const { return !other_scalar.has_value(); }
  // Other as an input computed in `dtype`.
  EwInput other(ScalarType dtype) const {
    return other_scalar ? EwInput::Constant(ScalarBits(*other_scalar, dtype)) : EwInput::Of(other_tensor);
  }
};

absl::StatusOr<BinaryArgs> ReadBinaryArgs(const KernelContext& ctx);

// out = op(self, other) (or op(other, self) with `other_first`) in out's
// dtype, for a family whose ops compute in the output's dtype.
template <class L>
absl::Status Arith(const KernelContext& ctx, EwFamily family, int op, uint32_t dtypes, const char* name,
                   const BinaryArgs& args, uint64_t param = 0, bool other_first = false) {
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, dtypes)) return DtypeNotImplemented(name, dt);
  const EwInput self = EwInput::Of(args.self), other = args.other(dt);
  if (other_first) return Run<L>(ctx, family, op, dt, out, {other, self}, param);
  return Run<L>(ctx, family, op, dt, out, {self, other}, param);
}

template <class L, ArithOp kOp>
absl::Status ArithOpKernel(const KernelContext& ctx, const char* name, uint64_t param = 0, bool other_first = false) {
  TD_ASSIGN_OR_RETURN(BinaryArgs args, ReadBinaryArgs(ctx));
  return Arith<L>(ctx, EwFamily::kArith, OpCode(kOp), ArithDtypes(kOp), name, args, param, other_first);
}

// add / sub / rsub with alpha: self + alpha * other, self - alpha * other,
// other - alpha * self.
enum class AddKind { kAdd, kSub, kRSub };

template <class L, AddKind kKind>
absl::Status AddLike(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(BinaryArgs args, ReadBinaryArgs(ctx));
  const char* name = kKind == AddKind::kAdd ? "add" : kKind == AddKind::kSub ? "sub" : "rsub";
  constexpr ArithOp op = kKind == AddKind::kAdd ? ArithOp::kAdd : ArithOp::kSub;
  const ScalarType dt = ctx.outputs[0].meta->dtype;
  const uint64_t alpha = ScalarBits(ctx.args[2].scalar(), dt);
  return Arith<L>(ctx, EwFamily::kArith, OpCode(op), ArithDtypes(op), name, args, alpha,
                  /*other_first=*/kKind == AddKind::kRSub);
}

template <class L>
absl::Status Mul(KernelContext& ctx) {
  return ArithOpKernel<L, ArithOp::kMul>(ctx, "mul");
}
template <class L>
absl::Status Div(KernelContext& ctx) {
  return ArithOpKernel<L, ArithOp::kDiv>(ctx, "div");
}
template <class L>
absl::Status Atan2(KernelContext& ctx) {
  return ArithOpKernel<L, ArithOp::kAtan2>(ctx, "atan2");
}
template <class L, bool kMax>
absl::Status MaxMin(KernelContext& ctx) {
  return ArithOpKernel<L, kMax ? ArithOp::kMaximum : ArithOp::kMinimum>(ctx, kMax ? "maximum" : "minimum");
}
template <class L, ArithOp kOp>
absl::Status Bitwise(KernelContext& ctx) {
  const char* name = kOp == ArithOp::kBitwiseAnd  ? "bitwise_and"
                     : kOp == ArithOp::kBitwiseOr ? "bitwise_or"
                     : kOp == ArithOp::kBitwiseXor ? "bitwise_xor"
                     : kOp == ArithOp::kLeftShift  ? "bitwise_left_shift"
                                                   : "bitwise_right_shift";
  return ArithOpKernel<L, kOp>(ctx, name);
}

template <class L>
absl::Status PowTensorTensor(KernelContext& ctx) {
  return ArithOpKernel<L, ArithOp::kPow>(ctx, "pow");
}

template <class L>
absl::Status PowTensorScalar(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(BinaryArgs args, ReadBinaryArgs(ctx));
  if (args.other_scalar) {
    TD_RETURN_IF_ERROR(cpu::CheckPowScalarExponent(ctx.outputs[0].meta->dtype, *args.other_scalar));
  }
  return Arith<L>(ctx, EwFamily::kArith, OpCode(ArithOp::kPow), ArithDtypes(ArithOp::kPow), "pow", args);
}

// pow.Scalar(Scalar self, Tensor exponent): the tensor is argument 1.
template <class L>
absl::Status PowScalarSelf(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  BinaryArgs args;
  TD_ASSIGN_OR_RETURN(args.self, InputTensor(ctx, 1));
  args.other_scalar = ctx.args[0].scalar();
  return Arith<L>(ctx, EwFamily::kArith, OpCode(ArithOp::kPow), ArithDtypes(ArithOp::kPow), "pow", args, 0,
                  /*other_first=*/true);
}

template <class L>
absl::Status Remainder(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(BinaryArgs args, ReadBinaryArgs(ctx));
  return Arith<L>(ctx, EwFamily::kDivision, OpCode(DivisionOp::kRemainder), DivisionDtypes(DivisionOp::kRemainder),
                  "remainder", args);
}

template <class L>
absl::Status Fmod(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(BinaryArgs args, ReadBinaryArgs(ctx));
  return Arith<L>(ctx, EwFamily::kDivision, OpCode(DivisionOp::kFmod), DivisionDtypes(DivisionOp::kFmod), "fmod",
                  args);
}

// div.Tensor_mode / div.Scalar_mode (self, other, rounding_mode) and
// floor_divide / floor_divide.Scalar (always "floor").
template <class L>
absl::Status DivMode(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(BinaryArgs args, ReadBinaryArgs(ctx));
  TD_ASSIGN_OR_RETURN(const cpu::RoundingMode mode, cpu::ReadRoundingMode(ctx));
  if (mode == cpu::RoundingMode::kNone) return Div<L>(ctx);
  const bool floor = mode == cpu::RoundingMode::kFloor;
  const DivisionOp op = floor ? DivisionOp::kDivFloor : DivisionOp::kDivTrunc;
  return Arith<L>(ctx, EwFamily::kDivision, OpCode(op), DivisionDtypes(op), floor ? "div_floor" : "div_trunc", args);
}

// ---- comparisons and logical ops -------------------------------------------------------

constexpr const char* CompareName(CompareOp op) {
  switch (op) {
    case CompareOp::kEq: return "eq";
    case CompareOp::kNe: return "ne";
    case CompareOp::kLt: return "lt";
    case CompareOp::kLe: return "le";
    case CompareOp::kGt: return "gt";
    case CompareOp::kGe: return "ge";
    case CompareOp::kLogicalAnd: return "logical_and";
    case CompareOp::kLogicalOr: return "logical_or";
    case CompareOp::kLogicalXor: return "logical_xor";
  }
  return "compare";
}

// The dtype PyTorch promotes (self, other) to (the CPU's compare dtype).
absl::StatusOr<ScalarType> CompareDtype(const char* name, const BinaryArgs& args);

template <class L, CompareOp kOp>
absl::Status Compare(KernelContext& ctx) {
  const char* name = CompareName(kOp);
  TD_ASSIGN_OR_RETURN(BinaryArgs args, ReadBinaryArgs(ctx));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectBoolOutput(name, out));
  TD_ASSIGN_OR_RETURN(ScalarType common, CompareDtype(name, args));
  if (!DtypeInSet(common, CompareDtypes(kOp))) return DtypeNotImplemented(name, common);
  return Run<L>(ctx, EwFamily::kCompare, OpCode(kOp), common, out, {EwInput::Of(args.self), args.other(common)});
}

// logical_and / or / xor: each operand tested against zero in its own dtype.
template <class L, CompareOp kOp>
absl::Status Logical(KernelContext& ctx) {
  const char* name = CompareName(kOp);
  TD_ASSIGN_OR_RETURN(BinaryArgs args, ReadBinaryArgs(ctx));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectBoolOutput(name, out));
  TD_INTERNAL_CHECK(args.other_is_tensor(), name, " expects two tensors");
  return Run<L>(ctx, EwFamily::kCompare, OpCode(kOp), ScalarType::kBool, out,
                {EwInput::Of(args.self), EwInput::Of(args.other_tensor)});
}

// ---- where, clamp, masked_fill, addcmul, addcdiv, lerp ---------------------------------------

// A tensor argument or a Scalar one, as an input computed in `dtype`.
absl::StatusOr<EwInput> TensorOrScalar(const KernelContext& ctx, size_t i, ScalarType dtype, TensorRef& holder);

// where(condition, self, other) for every mix of tensor and Scalar operands.
template <class L>
absl::Status Where(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef cond, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, TernaryDtypes(TernaryOp::kWhere))) return DtypeNotImplemented("where", dt);
  TensorRef self, other;
  TD_ASSIGN_OR_RETURN(EwInput a, TensorOrScalar(ctx, 1, dt, self));
  TD_ASSIGN_OR_RETURN(EwInput b, TensorOrScalar(ctx, 2, dt, other));
  return Run<L>(ctx, EwFamily::kTernary, OpCode(TernaryOp::kWhere), dt, out, {EwInput::Of(cond), a, b});
}

// out = clamp(self, min, max) with Python-number bounds (either may be absent).
template <class L>
absl::Status ClampByScalars(KernelContext& ctx, const char* name, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_RETURN_IF_ERROR(cpu::CheckClampBounds(lo.has_value(), hi.has_value()));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, TernaryDtypes(TernaryOp::kClampScalar))) return DtypeNotImplemented(name, dt);
  const EwInput l = EwInput::Constant(lo ? ScalarBits(*lo, dt) : 0);
  const EwInput h = EwInput::Constant(hi ? ScalarBits(*hi, dt) : 0);
  const int flags = (lo ? kClampHasMin : 0) | (hi ? kClampHasMax : 0);
  return Run<L>(ctx, EwFamily::kTernary, OpCode(TernaryOp::kClampScalar), dt, out, {EwInput::Of(self), l, h}, 0,
                flags);
}

template <class L>
absl::Status Clamp(KernelContext& ctx) {
  return ClampByScalars<L>(ctx, "clamp", cpu::OptionalScalar(ctx, 1), cpu::OptionalScalar(ctx, 2));
}

template <class L, bool kMin>
absl::Status ClampBound(KernelContext& ctx) {
  const std::optional<Scalar> bound = cpu::OptionalScalar(ctx, 1);
  return kMin ? ClampByScalars<L>(ctx, "clamp_min", bound, std::nullopt)
              : ClampByScalars<L>(ctx, "clamp_max", std::nullopt, bound);
}

// clamp.Tensor and clamp_min.Tensor / clamp_max.Tensor.
using cpu::ClampKind;

template <class L, ClampKind kKind>
absl::Status ClampTensor(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ClampTensorArgs a, cpu::ReadClampTensor(ctx, kKind));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const char* name = a.name;
  const bool has_lo = a.min.has_value(), has_hi = a.max.has_value();
  const EwInput l = has_lo ? EwInput::Of(*a.min) : EwInput::Constant(0);
  const EwInput h = has_hi ? EwInput::Of(*a.max) : EwInput::Constant(0);
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, TernaryDtypes(TernaryOp::kClampTensor))) return DtypeNotImplemented(name, dt);
  const int flags = (has_lo ? kClampHasMin : 0) | (has_hi ? kClampHasMax : 0);
  return Run<L>(ctx, EwFamily::kTernary, OpCode(TernaryOp::kClampTensor), dt, out, {EwInput::Of(self), l, h}, 0,
                flags);
}

// masked_fill.Scalar / masked_fill.Tensor (whose value is a 0-dim tensor,
// read on the device like a broadcast input).
template <class L>
absl::Status MaskedFill(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef mask, InputTensor(ctx, 1));
  TD_RETURN_IF_ERROR(cpu::CheckMaskedFillMask(*mask.meta));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  TensorRef value_tensor;
  if (ctx.args[2].kind() == Value::Kind::kTensor) {
    TD_ASSIGN_OR_RETURN(value_tensor, InputTensor(ctx, 2));
    TD_INTERNAL_CHECK(value_tensor.meta->dim() == 0, "masked_fill: expected a 0-dim value tensor");
  }
  if (!DtypeInSet(dt, TernaryDtypes(TernaryOp::kMaskedFill))) return DtypeNotImplemented("masked_fill", dt);
  TD_ASSIGN_OR_RETURN(EwInput value, TensorOrScalar(ctx, 2, dt, value_tensor));
  return Run<L>(ctx, EwFamily::kTernary, OpCode(TernaryOp::kMaskedFill), dt, out,
                {EwInput::Of(self), EwInput::Of(mask), value});
}

// out = self + value * tensor1 * tensor2 (or / tensor2) in out's dtype.
template <class L, bool kDiv>
absl::Status Addc(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef t1, InputTensor(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef t2, InputTensor(ctx, 2));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  constexpr TernaryOp op = kDiv ? TernaryOp::kAddcdiv : TernaryOp::kAddcmul;
  if (!DtypeInSet(dt, TernaryDtypes(op))) return DtypeNotImplemented(kDiv ? "addcdiv" : "addcmul", dt);
  const uint64_t value = ScalarBits(ctx.args[3].scalar(), dt);
  return Run<L>(ctx, EwFamily::kTernary, OpCode(op), dt, out, {EwInput::Of(self), EwInput::Of(t1), EwInput::Of(t2)},
                value);
}

// lerp.Scalar / lerp.Tensor (self, end, weight).
template <class L>
absl::Status Lerp(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef end, InputTensor(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, TernaryDtypes(TernaryOp::kLerp))) return DtypeNotImplemented("lerp", dt);
  TensorRef weight_tensor;
  TD_ASSIGN_OR_RETURN(EwInput weight, TensorOrScalar(ctx, 2, dt, weight_tensor));
  return Run<L>(ctx, EwFamily::kTernary, OpCode(TernaryOp::kLerp), dt, out,
                {EwInput::Of(self), EwInput::Of(end), weight});
}

// ---- copies and fills -------------------------------------------------------------------

// clone, contiguous, to.dtype: out = convert(self), same shape.
template <class L>
absl::Status CopyOpKernel(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_RETURN_IF_ERROR(cpu::ExpectOutputSizes(ctx.op->full_name(), ctx.outputs[0], self.meta->sizes));
  return CopyConvert<L>(ctx, ctx.outputs[0], self);
}

// `src` into `dst` element by element in row-major order when their shapes
// differ but their numels match (reshape's copy; the CPU's CopyReshape).
template <class L>
absl::Status CopyReshape(const KernelContext& ctx, const TensorRef& dst, const TensorRef& src) {
  const int64_t n = dst.meta->numel();
  TD_INTERNAL_CHECK(n == src.meta->numel(), "reshape copy of ", ShapeToString(src.meta->sizes), " into ",
                    ShapeToString(dst.meta->sizes));
  if (dst.meta->sizes == src.meta->sizes) return CopyConvert<L>(ctx, dst, src);
  if (n == 0) return absl::OkStatus();
  if (dst.meta->is_contiguous()) {
    TensorMeta view = cpu::ViewMeta(*dst.meta, src.meta->sizes, ContiguousStrides(src.meta->sizes),
                                    dst.meta->storage_offset);
    return CopyConvert<L>(ctx, TensorRef{dst.base, &view}, src);
  }
  TensorRef s = src;
  std::unique_ptr<DeviceTemp> holder;
  if (!src.meta->is_contiguous()) {
    TD_ASSIGN_OR_RETURN(holder, MakeTemp<L>(ctx, src.meta->sizes, src.meta->dtype));
    TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, holder->ref(), src));
    s = holder->ref();
  }
  TensorMeta view = cpu::ViewMeta(*s.meta, dst.meta->sizes, ContiguousStrides(dst.meta->sizes), s.meta->storage_offset);
  return CopyConvert<L>(ctx, dst, TensorRef{s.base, &view});
}

// reshape / flatten when the result cannot be a view.
template <class L>
absl::Status ReshapeCopy(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  return CopyReshape<L>(ctx, ctx.outputs[0], self);
}

// to.device: the dispatcher has copied the input onto the kernel's device.
template <class L>
absl::Status ToDevice(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  if (ctx.outputs[0].meta->device != ctx.device) {
    return NotImplementedErr(absl::StrCat("to.device: a kernel running on ", ctx.device.ToString(),
                                          " cannot write an output on ", ctx.outputs[0].meta->device.ToString()));
  }
  TD_RETURN_IF_ERROR(cpu::ExpectOutputSizes("to", ctx.outputs[0], self.meta->sizes));
  return CopyConvert<L>(ctx, ctx.outputs[0], self);
}

// PyTorch's legacy rule: a 1-D tensor of size 0 may appear in cat with any
// other shapes and is skipped.
inline bool SkippedInCat(const TensorMeta& t) { return t.dim() == 1 && t.sizes[0] == 0; }

template <class L>
absl::Status Cat(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorList& list = ctx.args[0].tensor_list();
  const TensorRef& out = ctx.outputs[0];
  const TensorMeta& om = *out.meta;
  if (om.dim() == 0) return InternalErr("internal: cat: 0-dim output");
  TD_ASSIGN_OR_RETURN(int64_t dim, WrapDim("cat", ctx.args[1].to_int(), om.dim()));
  int64_t offset = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, list[i]));
    if (SkippedInCat(*t.meta) && om.dim() != 1) continue;
    // Every write below stays inside `out`: shapes agree off `dim` and the
    // slices fit along it.
    if (t.meta->dim() != om.dim()) {
      return InternalErr(absl::StrCat("internal: cat: tensor ", i, " has ", t.meta->dim(), " dims, output has ",
                                      om.dim()));
    }
    for (int64_t d = 0; d < om.dim(); ++d) {
      if (d != dim && t.meta->sizes[d] != om.sizes[d]) {
        return InternalErr(absl::StrCat("internal: cat: tensor ", i, " has sizes ", ShapeToString(t.meta->sizes),
                                        ", output ", ShapeToString(om.sizes)));
      }
    }
    const int64_t len = t.meta->sizes[dim];
    if (offset + len > om.sizes[dim]) return InternalErr("internal: cat: inputs exceed the output along the cat dim");
    Shape sizes = om.sizes;
    sizes[dim] = len;
    TensorMeta view = cpu::ViewMeta(om, sizes, om.strides, om.storage_offset + offset * om.strides[dim]);
    TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, TensorRef{out.base, &view}, t));
    offset += len;
  }
  if (offset != om.sizes[dim]) {
    return InternalErr(absl::StrCat("internal: cat: inputs cover ", offset, " of ", om.sizes[dim]));
  }
  return absl::OkStatus();
}

template <class L>
absl::Status Stack(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorList& list = ctx.args[0].tensor_list();
  const TensorRef& out = ctx.outputs[0];
  const TensorMeta& om = *out.meta;
  TD_ASSIGN_OR_RETURN(int64_t dim, WrapDim("stack", ctx.args[1].to_int(), om.dim()));
  if (om.sizes[dim] != static_cast<int64_t>(list.size())) {
    return InternalErr("internal: stack: output size does not match the number of tensors");
  }
  Shape sizes = om.sizes, strides = om.strides;
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  for (size_t i = 0; i < list.size(); ++i) {
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, list[i]));
    if (t.meta->sizes != sizes) {
      return InternalErr(absl::StrCat("internal: stack: tensor ", i, " has sizes ", ShapeToString(t.meta->sizes),
                                      ", expected ", ShapeToString(sizes)));
    }
    TensorMeta view = cpu::ViewMeta(om, sizes, strides, om.storage_offset + static_cast<int64_t>(i) * om.strides[dim]);
    TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, TensorRef{out.base, &view}, t));
  }
  return absl::OkStatus();
}

// copy_(self, src, non_blocking): src converted and broadcast into self
// (outputs[0]); src in self's storage in another layout is copied out first.
template <class L>
absl::Status CopyInPlace(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef src, InputTensor(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  if (src.base == out.base && out.meta->numel() > 0) {
    if (*src.meta == *out.meta) return absl::OkStatus();
    TD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTemp> tmp, MakeTemp<L>(ctx, src.meta->sizes, src.meta->dtype));
    TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, tmp->ref(), src));
    return CopyConvert<L>(ctx, out, tmp->ref());
  }
  return CopyConvert<L>(ctx, out, src);
}

// zero_(self) / fill_.Scalar(self, value): every element of self (outputs[0]).
template <class L>
absl::Status FillInPlace(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const Scalar value = ctx.args.size() > 1 ? ctx.args[1].scalar() : Scalar::Int(0);
  return Fill<L>(ctx, ctx.outputs[0], value);
}

// zeros, ones, full (fill_value is argument 1), and their *_like forms.
template <class L>
absl::Status Zeros(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return Fill<L>(ctx, ctx.outputs[0], Scalar::Int(0));
}
template <class L>
absl::Status Ones(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return Fill<L>(ctx, ctx.outputs[0], Scalar::Int(1));
}
template <class L>
absl::Status Full(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return Fill<L>(ctx, ctx.outputs[0], ctx.args[1].scalar());
}

// empty and empty_strided: zero the bytes the output's storage span covers
// (1 + sum((size - 1) * stride) elements from its offset), not every
// logical element (the CPU's ZeroSpan).
template <class L>
absl::Status ZeroSpan(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->numel() == 0) return absl::OkStatus();
  int64_t span = 1;
  for (int64_t d = 0; d < out.meta->dim(); ++d) span += (out.meta->sizes[d] - 1) * out.meta->strides[d];
  const int code = L::Memset(out.data_at_offset(), span * out.meta->itemsize(), ctx.stream);
  if (code != 0) return LaunchError(ctx.op->full_name(), code, L::ErrorString(code));
  return absl::OkStatus();
}

// ---- registration ------------------------------------------------------------------------

// The ops these kernels implement, by full name, for `device`.
template <class L>
absl::Status RegisterElementwiseKernels(KernelRegistry& r, DeviceType device) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      // factories and fills (kernels/cpu/factory.cc, copy.cc)
      {"empty", ZeroSpan<L>},
      {"empty_strided", ZeroSpan<L>},
      {"zeros", Zeros<L>},
      {"ones", Ones<L>},
      {"full", Full<L>},
      {"empty_like", Zeros<L>},
      {"zeros_like", Zeros<L>},
      {"ones_like", Ones<L>},
      {"full_like", Full<L>},
      {"zero_", FillInPlace<L>},
      {"fill_.Scalar", FillInPlace<L>},
      // copies (kernels/cpu/copy.cc)
      {"clone", CopyOpKernel<L>},
      {"contiguous", CopyOpKernel<L>},
      {"to.dtype", CopyOpKernel<L>},
      {"to.device", ToDevice<L>},
      {"reshape", ReshapeCopy<L>},
      {"flatten.using_ints", ReshapeCopy<L>},
      {"cat", Cat<L>},
      {"stack", Stack<L>},
      {"copy_", CopyInPlace<L>},
      // unary (kernels/cpu/unary.cc)
      {"neg", Unary<L, UnaryOp::kNeg>},
      {"abs", Unary<L, UnaryOp::kAbs>},
      {"sign", Unary<L, UnaryOp::kSign>},
      {"floor", Unary<L, UnaryOp::kFloor>},
      {"ceil", Unary<L, UnaryOp::kCeil>},
      {"round", Unary<L, UnaryOp::kRound>},
      {"trunc", Unary<L, UnaryOp::kTrunc>},
      {"relu", Unary<L, UnaryOp::kRelu>},
      {"bitwise_not", Unary<L, UnaryOp::kBitwiseNot>},
      {"square", Unary<L, UnaryOp::kSquare>},
      {"relu_", InPlace<L, Unary<L, UnaryOp::kRelu>>},
      {"exp", FloatMath<L, FloatMathOp::kExp>},
      {"log", FloatMath<L, FloatMathOp::kLog>},
      {"sqrt", FloatMath<L, FloatMathOp::kSqrt>},
      {"rsqrt", FloatMath<L, FloatMathOp::kRsqrt>},
      {"sin", FloatMath<L, FloatMathOp::kSin>},
      {"cos", FloatMath<L, FloatMathOp::kCos>},
      {"tanh", FloatMath<L, FloatMathOp::kTanh>},
      {"sigmoid", FloatMath<L, FloatMathOp::kSigmoid>},
      {"reciprocal", FloatMath<L, FloatMathOp::kReciprocal>},
      {"erf", FloatMath<L, FloatMathOp::kErf>},
      {"exp2", FloatMath<L, FloatMathOp::kExp2>},
      {"expm1", FloatMath<L, FloatMathOp::kExpm1>},
      {"log2", FloatMath<L, FloatMathOp::kLog2>},
      {"log1p", FloatMath<L, FloatMathOp::kLog1p>},
      {"silu", FloatMath<L, FloatMathOp::kSilu>},
      {"gelu", Gelu<L>},
      {"logical_not", Predicate<L, PredicateOp::kLogicalNot>},
      {"isnan", Predicate<L, PredicateOp::kIsNan>},
      {"isinf", Predicate<L, PredicateOp::kIsInf>},
      {"isfinite", Predicate<L, PredicateOp::kIsFinite>},
      // binary (kernels/cpu/binary.cc)
      {"add.Tensor", AddLike<L, AddKind::kAdd>},
      {"add.Scalar", AddLike<L, AddKind::kAdd>},
      {"sub.Tensor", AddLike<L, AddKind::kSub>},
      {"sub.Scalar", AddLike<L, AddKind::kSub>},
      {"rsub.Scalar", AddLike<L, AddKind::kRSub>},
      {"mul.Tensor", Mul<L>},
      {"mul.Scalar", Mul<L>},
      {"div.Tensor", Div<L>},
      {"div.Scalar", Div<L>},
      {"remainder.Tensor", Remainder<L>},
      {"remainder.Scalar", Remainder<L>},
      {"pow.Tensor_Tensor", PowTensorTensor<L>},
      {"pow.Tensor_Scalar", PowTensorScalar<L>},
      {"pow.Scalar", PowScalarSelf<L>},
      {"maximum", MaxMin<L, true>},
      {"minimum", MaxMin<L, false>},
      {"eq.Tensor", Compare<L, CompareOp::kEq>},
      {"eq.Scalar", Compare<L, CompareOp::kEq>},
      {"ne.Tensor", Compare<L, CompareOp::kNe>},
      {"ne.Scalar", Compare<L, CompareOp::kNe>},
      {"lt.Tensor", Compare<L, CompareOp::kLt>},
      {"lt.Scalar", Compare<L, CompareOp::kLt>},
      {"le.Tensor", Compare<L, CompareOp::kLe>},
      {"le.Scalar", Compare<L, CompareOp::kLe>},
      {"gt.Tensor", Compare<L, CompareOp::kGt>},
      {"gt.Scalar", Compare<L, CompareOp::kGt>},
      {"ge.Tensor", Compare<L, CompareOp::kGe>},
      {"ge.Scalar", Compare<L, CompareOp::kGe>},
      {"logical_and", Logical<L, CompareOp::kLogicalAnd>},
      {"logical_or", Logical<L, CompareOp::kLogicalOr>},
      {"logical_xor", Logical<L, CompareOp::kLogicalXor>},
      {"bitwise_and.Tensor", Bitwise<L, ArithOp::kBitwiseAnd>},
      {"bitwise_and.Scalar", Bitwise<L, ArithOp::kBitwiseAnd>},
      {"bitwise_or.Tensor", Bitwise<L, ArithOp::kBitwiseOr>},
      {"bitwise_or.Scalar", Bitwise<L, ArithOp::kBitwiseOr>},
      {"bitwise_xor.Tensor", Bitwise<L, ArithOp::kBitwiseXor>},
      {"bitwise_xor.Scalar", Bitwise<L, ArithOp::kBitwiseXor>},
      {"where.self", Where<L>},
      {"where.ScalarOther", Where<L>},
      {"where.ScalarSelf", Where<L>},
      {"where.Scalar", Where<L>},
      {"clamp", Clamp<L>},
      {"clamp.Tensor", ClampTensor<L, ClampKind::kBoth>},
      {"clamp_min", ClampBound<L, true>},
      {"clamp_min.Tensor", ClampTensor<L, ClampKind::kMin>},
      {"clamp_max", ClampBound<L, false>},
      {"clamp_max.Tensor", ClampTensor<L, ClampKind::kMax>},
      {"masked_fill.Scalar", MaskedFill<L>},
      {"masked_fill.Tensor", MaskedFill<L>},
      {"addcmul", Addc<L, false>},
      {"addcdiv", Addc<L, true>},
      {"div.Tensor_mode", DivMode<L>},
      {"div.Scalar_mode", DivMode<L>},
      {"floor_divide", DivMode<L>},
      {"floor_divide.Scalar", DivMode<L>},
      {"fmod.Tensor", Fmod<L>},
      {"fmod.Scalar", Fmod<L>},
      {"atan2", Atan2<L>},
      {"bitwise_left_shift.Tensor", Bitwise<L, ArithOp::kLeftShift>},
      {"bitwise_left_shift.Tensor_Scalar", Bitwise<L, ArithOp::kLeftShift>},
      {"bitwise_right_shift.Tensor", Bitwise<L, ArithOp::kRightShift>},
      {"bitwise_right_shift.Tensor_Scalar", Bitwise<L, ArithOp::kRightShift>},
      {"lerp.Scalar", Lerp<L>},
      {"lerp.Tensor", Lerp<L>},
      // in-place forms: the out-of-place kernel writing into self
      {"add_.Tensor", InPlace<L, AddLike<L, AddKind::kAdd>>},
      {"add_.Scalar", InPlace<L, AddLike<L, AddKind::kAdd>>},
      {"sub_.Tensor", InPlace<L, AddLike<L, AddKind::kSub>>},
      {"sub_.Scalar", InPlace<L, AddLike<L, AddKind::kSub>>},
      {"mul_.Tensor", InPlace<L, Mul<L>>},
      {"mul_.Scalar", InPlace<L, Mul<L>>},
      {"div_.Tensor", InPlace<L, Div<L>>},
      {"div_.Scalar", InPlace<L, Div<L>>},
      {"clamp_", InPlace<L, Clamp<L>>},
      {"clamp_.Tensor", InPlace<L, ClampTensor<L, ClampKind::kBoth>>},
      {"masked_fill_.Scalar", InPlace<L, MaskedFill<L>>},
      {"masked_fill_.Tensor", InPlace<L, MaskedFill<L>>},
      {"addcmul_", InPlace<L, Addc<L, false>>},
      {"addcdiv_", InPlace<L, Addc<L, true>>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(device, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew

#endif  // TENSORD_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_
