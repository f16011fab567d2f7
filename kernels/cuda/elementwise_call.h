// kernels/cuda/elementwise_call.h — what one elementwise launch is, as the
// host side of a CUDA kernel (elementwise_kernels.h) describes it to the
// device side (the .cu files): the operands and their geometry, which
// functor (a family and an op in it), the dtype it computes in, and its
// parameters. Plain C++ (no CUDA header), so host code builds calls and the
// host tests run them.
//
//   ElementwiseCall call;
//   call.family = EwFamily::kFloatMath;  call.op = FloatMathOp::kExp;
//   call.dtype = ScalarType::kFloat32;   call.iter = ...;   // MakeIter
//   int code = LaunchElementwiseCuda(call, stream);         // kLaunchOk or an error
//
// Each op's accepted dtypes (the *Dtypes functions) are the CPU kernels'
// (kernels/cpu/), so the two devices refuse the same dtypes with the same
// message; the device side instantiates a functor only for those.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ELEMENTWISE_CALL_H_
#define TENSORD_KERNELS_CUDA_ELEMENTWISE_CALL_H_

#include <cstdint>

#include "offset_calculator.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

// Which dtypes an op accepts: the bits of the CPU kernels' DtypeSet
// (kernels/cpu/dtypes.h).
enum DtypeSet : uint32_t {
  kSetBool = 1u << 0,
  kSetInts = 1u << 1,       // uint8, int8, int16, int32, int64
  kSetStdFloats = 1u << 2,  // float32, float64
  kSetHalfs = 1u << 3,      // float16, bfloat16
  kSetFloat8 = 1u << 4,
  kSetNumeric = kSetInts | kSetStdFloats | kSetHalfs,
  kSetAllButF8 = kSetBool | kSetNumeric,
  kSetFloats = kSetStdFloats | kSetHalfs,
  kSetIntsFloats = kSetInts | kSetFloats,
  kSetAll = kSetAllButF8 | kSetFloat8,
};

constexpr bool DtypeInSet(ScalarType t, uint32_t set) {
  switch (t) {
    case ScalarType::kBool: return (set & kSetBool) != 0;
    case ScalarType::kUInt8:
    case ScalarType::kInt8:
    case ScalarType::kInt16:
    case ScalarType::kInt32:
    case ScalarType::kInt64: return (set & kSetInts) != 0;
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16: return (set & kSetHalfs) != 0;
    case ScalarType::kFloat32:
    case ScalarType::kFloat64: return (set & kSetStdFloats) != 0;
    case ScalarType::kFloat8_e4m3fn:
    case ScalarType::kFloat8_e5m2: return (set & kSetFloat8) != 0;
  }
  return false;
}

// Results of a launch: kLaunchOk, a CUDA error (a cudaError_t, > 0), or one
// of the host side's own (< 0, each a bug in the caller: the kernels check
// what users send before they launch).
enum LaunchCode : int {
  kLaunchOk = 0,
  kLaunchBadOperands = -1,  // operand count or output dtype does not match the functor
  kLaunchBadDtype = -2,     // the functor has no instance for this dtype
  kLaunchBadOp = -3,        // unknown family or op
};

// One operand: a tensor's first element (`data`, of `dtype`, walked with
// the geometry's strides), or, for an input, a constant whose bits
// (`value`, little-endian, low bytes first) hold a value of the compute type
// of its slot (a Python scalar, converted as the CPU kernels convert it).
struct ElementwiseOperand {
  char* data = nullptr;
  ScalarType dtype = ScalarType::kFloat32;
  bool is_constant = false;
  uint64_t value = 0;
};

// The operands of a launch, the output first, and their geometry
// (BuildGeometry: coalesced, byte strides; constants have stride 0).
struct ElementwiseIter {
  ElementwiseGeometry geometry;
  int num_operands = 0;
  ElementwiseOperand operands[kMaxOperands];
};

// ---- functor families and their ops --------------------------------------------

enum class EwFamily : int {
  kCopy,        // out = in converted to out's dtype (copies, casts, fills)
  kUnary,       // out = f(in), one dtype
  kFloatMath,   // out = f(in), floating dtypes
  kPredicate,   // out (bool) = f(in), computed in in's dtype
  kArith,       // out = f(a, b), one dtype
  kDivision,    // remainder, fmod, div with rounding: out = f(a, b), one dtype
  kCompare,     // out (bool) = f(a, b), computed in the promoted dtype
  kTernary,     // where, clamp, masked_fill, addcmul, addcdiv, lerp
};

enum class CopyOp : int { kCopy };

enum class UnaryOp : int {
  kNeg, kAbs, kSign, kFloor, kCeil, kRound, kTrunc, kRelu, kBitwiseNot, kSquare,
};

enum class FloatMathOp : int {
  kExp, kLog, kSqrt, kRsqrt, kSin, kCos, kTanh, kSigmoid, kReciprocal, kErf,
  kExp2, kExpm1, kLog2, kLog1p, kSilu, kGeluErf, kGeluTanh,
};

enum class PredicateOp : int { kLogicalNot, kIsNan, kIsInf, kIsFinite };

// kAdd / kSub read `param` (alpha, in the compute type): a + alpha * b, a - alpha * b.
enum class ArithOp : int {
  kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kBitwiseAnd, kBitwiseOr, kBitwiseXor,
  kLeftShift, kRightShift, kAtan2, kPow,
};

enum class DivisionOp : int { kRemainder, kFmod, kDivTrunc, kDivFloor };

// kLogical*: dtype is bool (each operand cast to bool).
enum class CompareOp : int { kEq, kNe, kLt, kLe, kGt, kGe, kLogicalAnd, kLogicalOr, kLogicalXor };

// Operands after the output, in order:
//   kWhere:       condition (bool), self, other
//   kClampScalar: self, min, max (Python numbers; `flags` says which exist)
//   kClampTensor: self, min, max (tensors; `flags` says which exist)
//   kMaskedFill:  self, mask (bool), value
//   kAddcmul / kAddcdiv: self, tensor1, tensor2; `param` is value
//   kLerp:        self, end, weight
enum class TernaryOp : int { kWhere, kClampScalar, kClampTensor, kMaskedFill, kAddcmul, kAddcdiv, kLerp };

// `flags` bits of the clamp ops.
inline constexpr int kClampHasMin = 1;
inline constexpr int kClampHasMax = 2;

// The dtypes each op runs in: those of its CPU kernel.
constexpr uint32_t UnaryDtypes(UnaryOp op) {
  switch (op) {
    case UnaryOp::kSign: return kSetAllButF8;
    case UnaryOp::kBitwiseNot: return kSetBool | kSetInts;
    default: return kSetIntsFloats;
  }
}
constexpr uint32_t FloatMathDtypes(FloatMathOp) { return kSetFloats; }
constexpr uint32_t PredicateDtypes(PredicateOp) { return kSetAll; }
constexpr uint32_t ArithDtypes(ArithOp op) {
  switch (op) {
    case ArithOp::kAdd:
    case ArithOp::kMul:
    case ArithOp::kMaximum:
    case ArithOp::kMinimum: return kSetAllButF8;
    case ArithOp::kDiv:
    case ArithOp::kAtan2: return kSetFloats;
    case ArithOp::kBitwiseAnd:
    case ArithOp::kBitwiseOr:
    case ArithOp::kBitwiseXor: return kSetBool | kSetInts;
    case ArithOp::kLeftShift:
    case ArithOp::kRightShift: return kSetInts;
    default: return kSetIntsFloats;  // sub, pow
  }
}
constexpr uint32_t DivisionDtypes(DivisionOp) { return kSetIntsFloats; }
constexpr uint32_t CompareDtypes(CompareOp op) {
  switch (op) {
    case CompareOp::kLogicalAnd:
    case CompareOp::kLogicalOr:
    case CompareOp::kLogicalXor: return kSetBool;
    default: return kSetAllButF8;
  }
}
constexpr uint32_t TernaryDtypes(TernaryOp op) {
  switch (op) {
    case TernaryOp::kClampScalar:
    case TernaryOp::kAddcmul: return kSetIntsFloats;
    case TernaryOp::kAddcdiv:
    case TernaryOp::kLerp: return kSetFloats;
    default: return kSetAllButF8;  // where, clamp.Tensor, masked_fill
  }
}

// One launch: `family` and `op` pick the functor, instantiated for `dtype`
// (its compute dtype, which the output of every family but kPredicate and
// kCompare has). `param` is a parameter in the compute type's bits (see the
// op enums), `flags` op-specific bits.
struct ElementwiseCall {
  EwFamily family = EwFamily::kCopy;
  int op = 0;
  ScalarType dtype = ScalarType::kFloat32;
  ElementwiseIter iter;
  uint64_t param = 0;
  int flags = 0;
};

// Launches `call` on the CUDA stream `stream` (a cudaStream_t) and returns
// a LaunchCode, the launch's cudaError_t when it failed (checked with
// cudaGetLastError right after it). Returns before the kernel runs.
// Defined in the .cu files (one per family), built only with CUDA.
int LaunchElementwiseCuda(const ElementwiseCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_ELEMENTWISE_CALL_H_
