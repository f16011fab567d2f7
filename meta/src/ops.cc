// The op table, in order. The position of a line is the op's wire id, so the
// table's digest changes whenever a line is added, removed or edited, and the
// handshake refuses a client built from a different table.
//
// To add an op: one line here (schema in PyTorch's syntax, its meta function,
// flags), then its kernel, derivative, saved-reads row and samples:
// docs/adding-an-op.md walks through every place, with a real op.
#include "meta_functions.h"
#include "tensord/meta/op_table.h"

namespace tensord {
namespace {

constexpr uint32_t F = kFunction;
constexpr uint32_t M = kMethod;
constexpr uint32_t FM = kFunction | kMethod;
constexpr uint32_t ND = kNotDifferentiable;

#define FACTORY_KW "*, ScalarType? dtype=None, Device? device=None"

const OpDef kOps[] = {
    // ---- factories -------------------------------------------------------
    {"empty(int[] size, " FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory | ND},
    {"zeros(int[] size, " FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory | ND},
    {"ones(int[] size, " FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory | ND},
    {"full(int[] size, Scalar fill_value, " FACTORY_KW ") -> Tensor", meta::Full, F | kFactory | ND},
    {"arange(Scalar end, " FACTORY_KW ") -> Tensor", meta::Arange, F | kFactory | ND},
    {"arange.start(Scalar start, Scalar end, Scalar step=1, " FACTORY_KW ") -> Tensor", meta::ArangeStart, F | kFactory | ND},
    {"rand(int[] size, " FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory | kRandom | ND},
    {"randn(int[] size, " FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory | kRandom | ND},
    {"eye(int n, int? m=None, " FACTORY_KW ") -> Tensor", meta::Eye, F | kFactory | ND},
    {"empty_like(Tensor self, " FACTORY_KW ") -> Tensor", meta::EmptyLike, F | ND},
    {"zeros_like(Tensor self, " FACTORY_KW ") -> Tensor", meta::EmptyLike, F | ND},
    {"ones_like(Tensor self, " FACTORY_KW ") -> Tensor", meta::EmptyLike, F | ND},
    {"full_like(Tensor self, Scalar fill_value, " FACTORY_KW ") -> Tensor", meta::EmptyLike, F | ND},
    {"rand_like(Tensor self, " FACTORY_KW ") -> Tensor", meta::EmptyLike, F | kRandom | ND},
    {"randn_like(Tensor self, " FACTORY_KW ") -> Tensor", meta::EmptyLike, F | kRandom | ND},

    // ---- unary elementwise ----------------------------------------------
    // Same dtype as the input:
    {"neg(Tensor self) -> Tensor", meta::UnaryNeg, FM},
    {"abs(Tensor self) -> Tensor", meta::UnarySame, FM},
    {"sign(Tensor self) -> Tensor", meta::UnarySame, FM},
    {"floor(Tensor self) -> Tensor", meta::UnarySame, FM},
    {"ceil(Tensor self) -> Tensor", meta::UnarySame, FM},
    {"round(Tensor self) -> Tensor", meta::UnarySame, FM},
    {"trunc(Tensor self) -> Tensor", meta::UnarySame, FM},
    {"relu(Tensor self) -> Tensor", meta::UnarySame, FM},
    {"bitwise_not(Tensor self) -> Tensor", meta::UnaryIntegral, FM | ND},
    // Integers and bool become the default float dtype (PyTorch int_to_float):
    {"exp(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"log(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"sqrt(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"rsqrt(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"sin(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"cos(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"tanh(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"sigmoid(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"reciprocal(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    // bool results:
    {"logical_not(Tensor self) -> Tensor", meta::UnaryBool, FM | ND},
    {"isnan(Tensor self) -> Tensor", meta::UnaryBool, FM | ND},
    {"isinf(Tensor self) -> Tensor", meta::UnaryBool, FM | ND},
    {"isfinite(Tensor self) -> Tensor", meta::UnaryBool, FM | ND},

    // ---- binary elementwise (PyTorch type promotion, broadcasting) -------
    {"add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", meta::BinaryArith, FM},
    {"add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", meta::BinaryArithScalar, FM},
    {"sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", meta::BinarySub, FM},
    {"sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", meta::BinarySubScalar, FM},
    {"rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", meta::BinarySubScalar, FM},
    {"mul.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryArith, FM},
    {"mul.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryArithScalar, FM},
    {"div.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryTrueDiv, FM},
    {"div.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryTrueDivScalar, FM},
    {"remainder.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryArith, FM},
    {"remainder.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryArithScalar, FM},
    {"pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", meta::BinaryArith, FM},
    {"pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", meta::BinaryArithScalar, FM},
    {"pow.Scalar(Scalar self, Tensor exponent) -> Tensor", meta::PowScalarSelf, F},
    {"maximum(Tensor self, Tensor other) -> Tensor", meta::BinaryArith, FM},
    {"minimum(Tensor self, Tensor other) -> Tensor", meta::BinaryArith, FM},
    {"eq.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"eq.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM | ND},
    {"ne.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"ne.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM | ND},
    {"lt.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"lt.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM | ND},
    {"le.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"le.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM | ND},
    {"gt.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"gt.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM | ND},
    {"ge.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"ge.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM | ND},
    {"logical_and(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"logical_or(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"logical_xor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM | ND},
    {"bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryBitwise, FM | ND},
    {"bitwise_and.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryBitwiseScalar, FM | ND},
    {"bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryBitwise, FM | ND},
    {"bitwise_or.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryBitwiseScalar, FM | ND},
    {"bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryBitwise, FM | ND},
    {"bitwise_xor.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryBitwiseScalar, FM | ND},
    {"where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", meta::Where, FM},
    {"where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor", meta::Where, FM},
    {"where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor", meta::Where, F},
    {"where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor", meta::Where, F},
    {"clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", meta::Clamp, FM},
    {"clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", meta::ClampTensor, FM},
    {"clamp_min(Tensor self, Scalar min) -> Tensor", meta::ClampBound, FM},
    {"clamp_min.Tensor(Tensor self, Tensor min) -> Tensor", meta::ClampTensor, FM},
    {"clamp_max(Tensor self, Scalar max) -> Tensor", meta::ClampBound, FM},
    {"clamp_max.Tensor(Tensor self, Tensor max) -> Tensor", meta::ClampTensor, FM},
    {"masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", meta::MaskedFill, FM},
    {"masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", meta::MaskedFill, FM},

    // ---- reductions (contiguous outputs) ---------------------------------
    {"sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::SumMean, FM},
    {"mean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::SumMean, FM},
    {"amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", meta::AmaxAmin, FM},
    {"amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", meta::AmaxAmin, FM},
    {"argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", meta::ArgMaxMin, FM | ND},
    {"argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", meta::ArgMaxMin, FM | ND},
    {"max(Tensor self) -> Tensor", meta::MaxMinAll, FM},
    {"max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", meta::MaxMinDim, FM},
    {"min(Tensor self) -> Tensor", meta::MaxMinAll, FM},
    {"min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", meta::MaxMinDim, FM},

    // ---- matmul family ---------------------------------------------------
    {"matmul(Tensor self, Tensor other) -> Tensor", meta::Matmul, FM},
    {"mm(Tensor self, Tensor mat2) -> Tensor", meta::Mm, FM},
    {"bmm(Tensor self, Tensor mat2) -> Tensor", meta::Bmm, FM},

    // ---- views (no kernel; the meta function gives strides and offset) ---
    {"view(Tensor(a) self, SymInt[] size) -> Tensor(a)", meta::View, M},
    {"reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", meta::Reshape, FM | kMayCopy},
    {"transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", meta::Transpose, FM},
    {"permute(Tensor(a) self, int[] dims) -> Tensor(a)", meta::Permute, FM},
    {"t(Tensor(a) self) -> Tensor(a)", meta::T, FM},
    {"slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)", meta::Slice, F},
    {"select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", meta::Select, FM},
    {"narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)", meta::Narrow, FM},
    {"diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)", meta::Diagonal, FM},
    {"expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)", meta::Expand, M},
    {"squeeze(Tensor(a) self) -> Tensor(a)", meta::Squeeze, FM},
    {"squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", meta::SqueezeDim, FM},
    {"unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", meta::Unsqueeze, FM},
    {"flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", meta::Flatten, FM | kMayCopy},

    // ---- copies ----------------------------------------------------------
    {"contiguous(Tensor(a) self) -> Tensor(a)", meta::Contiguous, M | kMayCopy},
    {"clone(Tensor self) -> Tensor", meta::Clone, FM},
    {"to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False) -> Tensor(a)", meta::ToDtype, M | kMayCopy},
    {"to.device(Tensor(a) self, Device device, ScalarType? dtype=None, bool non_blocking=False, bool copy=False) -> Tensor(a)", meta::ToDevice, M | kMayCopy},

    // ---- selection, joining ----------------------------------------------
    {"topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)", meta::Topk, FM},
    {"gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", meta::Gather, FM},
    {"index_select(Tensor self, int dim, Tensor index) -> Tensor", meta::IndexSelect, FM},
    {"index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", meta::Index, F},
    {"cat(Tensor[] tensors, int dim=0) -> Tensor", meta::Cat, F},
    {"stack(Tensor[] tensors, int dim=0) -> Tensor", meta::Stack, F},

    // ---- data-dependent output shapes (no meta; the daemon reports shapes)
    {"nonzero(Tensor self) -> Tensor", meta::DataDependent, FM | kDataDependent | ND},
    {"masked_select(Tensor self, Tensor mask) -> Tensor", meta::DataDependent, FM | kDataDependent},

    // ---- in-place (write self, return it; the daemon passes self's storage
    // and meta as the kernel's output) -----------------------------------
    {"add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", meta::InPlace<meta::BinaryArith>, M},
    {"add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", meta::InPlace<meta::BinaryArithScalar>, M},
    {"sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", meta::InPlace<meta::BinarySub>, M},
    {"sub_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", meta::InPlace<meta::BinarySubScalar>, M},
    {"mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", meta::InPlace<meta::BinaryArith>, M},
    {"mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", meta::InPlace<meta::BinaryArithScalar>, M},
    {"div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", meta::InPlace<meta::BinaryTrueDiv>, M},
    {"div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", meta::InPlace<meta::BinaryTrueDivScalar>, M},
    {"clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)", meta::InPlace<meta::Clamp>, M},
    {"clamp_.Tensor(Tensor(a!) self, Tensor? min=None, Tensor? max=None) -> Tensor(a!)", meta::InPlace<meta::ClampTensor>, M},
    {"masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)", meta::InPlace<meta::MaskedFill>, M},
    {"masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)", meta::InPlace<meta::MaskedFill>, M},
    {"addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", meta::Addcmul, FM},
    {"addcmul_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)", meta::InPlace<meta::Addcmul>, M},
    {"addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", meta::Addcmul, FM},
    {"addcdiv_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)", meta::InPlace<meta::Addcmul>, M},
    {"copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)", meta::CopyInPlace, M},
    {"zero_(Tensor(a!) self) -> Tensor(a!)", meta::FillInPlace, M},
    {"fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)", meta::FillInPlace, M},
    {"uniform_(Tensor(a!) self, float from=0, float to=1) -> Tensor(a!)", meta::RandomInPlace, M | kRandom},
    {"normal_(Tensor(a!) self, float mean=0, float std=1) -> Tensor(a!)", meta::RandomInPlace, M | kRandom},

    // ---- forward ops for nn ----------------------------------------------
    {"erf(Tensor self) -> Tensor", meta::UnaryFloat, FM},
    {"gelu(Tensor self, *, str approximate='none') -> Tensor", meta::Gelu, F},
    {"softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", meta::Softmax, FM},
    {"log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", meta::Softmax, FM},
    {"detach(Tensor(a) self) -> Tensor(a)", meta::Detach, FM | ND},

    // ---- ops that derivative formulas call --------------------------------
    {"scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", meta::ScatterAdd, FM},
    {"index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", meta::IndexAdd, FM},
    {"index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor", meta::IndexPut, FM},
    {"masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor", meta::MaskedScatter, FM},
    {"select_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt index) -> Tensor", meta::SelectBackward, F},
    {"slice_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt start, SymInt end, SymInt step) -> Tensor", meta::SliceBackward, F},
    {"diagonal_backward(Tensor grad_output, SymInt[] input_sizes, int offset, int dim1, int dim2) -> Tensor", meta::DiagonalBackward, F},
    // ==== one block per op family, in this order.
    // ---- pointwise (exp2 ... lerp) --------------------------------------
    {"exp2(Tensor self) -> Tensor", meta::UnaryFloatMath, FM},
    {"expm1(Tensor self) -> Tensor", meta::UnaryFloatMath, FM},
    {"log2(Tensor self) -> Tensor", meta::UnaryFloatMath, FM},
    {"log1p(Tensor self) -> Tensor", meta::UnaryFloatMath, FM},
    {"silu(Tensor self) -> Tensor", meta::Silu, F},
    {"square(Tensor self) -> Tensor", meta::Square, FM},
    {"relu_(Tensor(a!) self) -> Tensor(a!)", meta::ReluInPlace, M},
    {"div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor", meta::DivMode, FM},
    {"div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor", meta::DivModeScalar, FM},
    {"fmod.Tensor(Tensor self, Tensor other) -> Tensor", meta::Fmod, FM},
    {"fmod.Scalar(Tensor self, Scalar other) -> Tensor", meta::FmodScalar, FM},
    {"atan2(Tensor self, Tensor other) -> Tensor", meta::Atan2, FM},
    {"bitwise_left_shift.Tensor(Tensor self, Tensor other) -> Tensor", meta::BitwiseShift, FM | ND},
    {"bitwise_left_shift.Tensor_Scalar(Tensor self, Scalar other) -> Tensor", meta::BitwiseShiftScalar, FM | ND},
    {"bitwise_right_shift.Tensor(Tensor self, Tensor other) -> Tensor", meta::BitwiseShift, FM | ND},
    {"bitwise_right_shift.Tensor_Scalar(Tensor self, Scalar other) -> Tensor", meta::BitwiseShiftScalar, FM | ND},
    {"lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor", meta::Lerp, FM},
    {"lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor", meta::Lerp, FM},
    {"floor_divide(Tensor self, Tensor other) -> Tensor", meta::FloorDivide, FM},
    {"floor_divide.Scalar(Tensor self, Scalar other) -> Tensor", meta::FloorDivideScalar, FM},
    // ---- reductions and scans -------------------------------------------
    {"nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::Nansum, FM},
    {"prod(Tensor self, *, ScalarType? dtype=None) -> Tensor", meta::Prod, FM},
    {"prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::Prod, FM},
    {"var.correction(Tensor self, int[1]? dim, *, int? correction, bool keepdim=False) -> Tensor", meta::VarStd, FM},
    {"var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", meta::VarStd, FM},
    {"var(Tensor self, bool unbiased=True) -> Tensor", meta::VarStd, FM},
    {"std.correction(Tensor self, int[1]? dim, *, int? correction, bool keepdim=False) -> Tensor", meta::VarStd, FM},
    {"std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", meta::VarStd, FM},
    {"std(Tensor self, bool unbiased=True) -> Tensor", meta::VarStd, FM},
    {"norm.Scalar(Tensor self, Scalar p=2) -> Tensor", meta::Norm, FM},
    {"norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor", meta::Norm, FM},
    {"norm.ScalarOpt_dim_dtype(Tensor self, Scalar? p, int[1] dim, bool keepdim, *, ScalarType dtype) -> Tensor", meta::Norm, FM},
    {"linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::Norm, F},
    {"logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor", meta::Logsumexp, FM},
    {"all(Tensor self) -> Tensor", meta::AllAny, FM | ND},
    {"all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor", meta::AllAny, FM | ND},
    {"any(Tensor self) -> Tensor", meta::AllAny, FM | ND},
    {"any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor", meta::AllAny, FM | ND},
    {"cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", meta::CumScan, FM},
    {"cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", meta::CumScan, FM},
    // ---- shape ops (split, chunk, unbind, flip, roll, repeat, tril, triu, pad, scatter)
    {"split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", meta::Split, FM},
    {"split.sizes(Tensor(a -> *) self, SymInt[] split_size, int dim=0) -> Tensor(a)[]", meta::SplitWithSizes, FM},
    {"split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]", meta::SplitWithSizes, FM},
    {"chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]", meta::Chunk, FM},
    {"unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]", meta::Unbind, FM},
    {"flip(Tensor self, int[] dims) -> Tensor", meta::Flip, FM},
    {"roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor", meta::Roll, FM},
    {"repeat(Tensor self, SymInt[] repeats) -> Tensor", meta::Repeat, M},
    {"tril(Tensor self, int diagonal=0) -> Tensor", meta::TrilTriu, FM},
    {"triu(Tensor self, int diagonal=0) -> Tensor", meta::TrilTriu, FM},
    {"constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor", meta::ConstantPadNd, F},
    {"scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", meta::ScatterSrc, FM},
    {"scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor", meta::ScatterValue, FM},
    // ---- matmul family (addmm, baddbmm, dot, outer, linear) -------------
    {"addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", meta::Addmm, FM},
    {"baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", meta::Baddbmm, FM},
    {"dot(Tensor self, Tensor tensor) -> Tensor", meta::Dot, FM},
    {"outer(Tensor self, Tensor vec2) -> Tensor", meta::Outer, FM},
    {"linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", meta::Linear, F},
    // ---- nn ops (convolution, pooling) ----------------------------------
    // conv2d: PyTorch's conv2d schema (2-D only; input NCHW or CHW). Its
    // backward is aten's convolution_backward without `bool[3] output_mask`
    // (the schema language has no bool lists): all three gradients are
    // always computed.
    {"conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor", meta::Conv2d, F},
    {"convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, int[] stride, SymInt[] padding, int[] dilation, bool transposed, SymInt[] output_padding, int groups) -> (Tensor, Tensor, Tensor)", meta::ConvolutionBackward, F},
    {"max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)", meta::MaxPool2dWithIndices, F},
    {"max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor", meta::MaxPool2dWithIndicesBackward, F},
    {"avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor", meta::AvgPool2d, F},
    {"avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor", meta::AvgPool2dBackward, F},
    // ---- factories (linspace, randint, empty_strided) -------------------
    {"linspace(Scalar start, Scalar end, int steps, " FACTORY_KW ") -> Tensor", meta::Linspace, F | kFactory | ND},
    {"randint(SymInt high, SymInt[] size, " FACTORY_KW ") -> Tensor", meta::Randint, F | kFactory | kRandom | ND},
    {"randint.low(SymInt low, SymInt high, SymInt[] size, " FACTORY_KW ") -> Tensor", meta::RandintLow, F | kFactory | kRandom | ND},
    {"empty_strided(SymInt[] size, SymInt[] stride, " FACTORY_KW ") -> Tensor", meta::EmptyStrided, F | kFactory | ND},
    // ---- fused optimizer steps ------------------------------------------
    // One Adam/AdamW update of one parameter (PyTorch 1.13's single-tensor
    // step, as tensord.optim runs it op by op) in one pass: self, grad and
    // the two moments share one dense layout. Returns the written tensors.
    {"_fused_adam_(Tensor(a!) self, Tensor grad, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, *, float lr, float beta1, float beta2, float weight_decay, float eps, int step, bool maximize=False, bool decoupled_weight_decay=False) -> (Tensor(a!), Tensor(b!), Tensor(c!))", meta::FusedAdam, ND},
};

#undef FACTORY_KW

}  // namespace

absl::Span<const OpDef> BuiltinOpDefs() { return kOps; }

}  // namespace tensord
