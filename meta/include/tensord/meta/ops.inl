// tensord/meta/ops.inl — the record of every built-in op, in order: the one
// place an op is declared. Each record gives the op's schema (PyTorch's
// syntax), its meta function, its flags and, for a differentiable op, what
// its derivative formula reads of the saved tensors and the formula itself:
//
//   TD_OP(schema, meta function, flags, saved reads, formula)
//   TD_OP_ND(schema, meta function, flags)    // kNotDifferentiable: no derivative
//
// Two layers read it, each taking its own columns: the op table
// (meta/src/ops.cc: schema, meta function, flags, saved reads), which the
// client and the daemon share, and the daemon's autograd
// (server/runtime/src/autograd/: the formula, declared from here in
// namespace tensord::runtime::formulas and defined in a formulas*.cc file).
// The meta function and the formula are named here and written in their
// layer's files; the op's kernel is registered by name in kernels/, and its
// samples are in tests/python/opinfo*.py. docs/adding-an-op.md walks through
// one op. The in-place and view ops follow from the schema's annotations
// (`Tensor(a!)` on self; `Tensor(a)` on an argument and a return).
//
// A record's position is its op id on the wire: every schema goes into the
// table's digest, and the handshake refuses a client built from another
// table.
//
// Flags (OpFlags in op_table.h): F = kFunction (tensord.<name>), M =
// kMethod (Tensor.<name>), FM = both, kFactory, kRandom, kDataDependent,
// kMayCopy.
//
// Saved reads: what the formula reads of the saved tensors, in the style of
// PyTorch's derivatives.yaml: clauses "WHEN: WHAT ...", separated by ";", in
// the order the formula runs them. WHEN is an argument name (the clause
// applies when that argument gets a gradient) or "*" (always). WHAT is an
// argument name (every tensor of a list), "result" / "resultN" (forward
// output 0 / N), or "saved" (the saved tensors must still be there: PyTorch
// saves something the formula does not need). An empty rule reads nothing.
// A clause "nograd: ARG ..." names differentiable arguments the formula never
// gives a gradient (so no gradient flows on to them). The client's meta mode
// predicts a second backward's and a modified saved tensor's errors from it;
// the daemon compares every formula run with it under
// TENSORD_CHECK_SAVED_READS=1 (which the tests set).
//
// Formulas of in-place ops: `self` in a formula is self's value before the
// op (the daemon saves a clone when the rule reads self).
#if !defined(TD_OP) || !defined(TD_OP_ND)
#error "define TD_OP(schema, meta, flags, saved_reads, formula) and TD_OP_ND(schema, meta, flags) before including tensord/meta/ops.inl"
#endif

#define TD_FACTORY_KW "*, ScalarType? dtype=None, Device? device=None"

// ---- factories -------------------------------------------------------
TD_OP_ND("empty(int[] size, " TD_FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory)
TD_OP_ND("zeros(int[] size, " TD_FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory)
TD_OP_ND("ones(int[] size, " TD_FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory)
TD_OP_ND("full(int[] size, Scalar fill_value, " TD_FACTORY_KW ") -> Tensor", meta::Full, F | kFactory)
TD_OP_ND("arange(Scalar end, " TD_FACTORY_KW ") -> Tensor", meta::Arange, F | kFactory)
TD_OP_ND("arange.start(Scalar start, Scalar end, Scalar step=1, " TD_FACTORY_KW ") -> Tensor", meta::ArangeStart, F | kFactory)
TD_OP_ND("rand(int[] size, " TD_FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory | kRandom)
TD_OP_ND("randn(int[] size, " TD_FACTORY_KW ") -> Tensor", meta::Empty, F | kFactory | kRandom)
TD_OP_ND("eye(int n, int? m=None, " TD_FACTORY_KW ") -> Tensor", meta::Eye, F | kFactory)
TD_OP_ND("empty_like(Tensor self, " TD_FACTORY_KW ") -> Tensor", meta::EmptyLike, F)
TD_OP_ND("zeros_like(Tensor self, " TD_FACTORY_KW ") -> Tensor", meta::EmptyLike, F)
TD_OP_ND("ones_like(Tensor self, " TD_FACTORY_KW ") -> Tensor", meta::EmptyLike, F)
TD_OP_ND("full_like(Tensor self, Scalar fill_value, " TD_FACTORY_KW ") -> Tensor", meta::EmptyLike, F)
TD_OP_ND("rand_like(Tensor self, " TD_FACTORY_KW ") -> Tensor", meta::EmptyLike, F | kRandom)
TD_OP_ND("randn_like(Tensor self, " TD_FACTORY_KW ") -> Tensor", meta::EmptyLike, F | kRandom)

// ---- unary elementwise ----------------------------------------------
// Same dtype as the input:
TD_OP("neg(Tensor self) -> Tensor", meta::UnaryNeg, FM, "", NegF)
TD_OP("abs(Tensor self) -> Tensor", meta::UnarySame, FM, "self: self", AbsF)
TD_OP("sign(Tensor self) -> Tensor", meta::UnarySame, FM, "", ZeroGrad)
TD_OP("floor(Tensor self) -> Tensor", meta::UnarySame, FM, "", ZeroGrad)
TD_OP("ceil(Tensor self) -> Tensor", meta::UnarySame, FM, "", ZeroGrad)
TD_OP("round(Tensor self) -> Tensor", meta::UnarySame, FM, "", ZeroGrad)
TD_OP("trunc(Tensor self) -> Tensor", meta::UnarySame, FM, "", ZeroGrad)
TD_OP("relu(Tensor self) -> Tensor", meta::UnarySame, FM, "self: result", ReluF)
TD_OP_ND("bitwise_not(Tensor self) -> Tensor", meta::UnaryIntegral, FM)
// Integers and bool become the default float dtype (PyTorch int_to_float):
TD_OP("exp(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: result", ExpF)
TD_OP("log(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: self", LogF)
TD_OP("sqrt(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: result", SqrtF)
TD_OP("rsqrt(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: result", RsqrtF)
TD_OP("sin(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: self", SinF)
TD_OP("cos(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: self", CosF)
TD_OP("tanh(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: result", TanhF)
TD_OP("sigmoid(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: result", SigmoidF)
TD_OP("reciprocal(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: result", ReciprocalF)
// bool results:
TD_OP_ND("logical_not(Tensor self) -> Tensor", meta::UnaryBool, FM)
TD_OP_ND("isnan(Tensor self) -> Tensor", meta::UnaryBool, FM)
TD_OP_ND("isinf(Tensor self) -> Tensor", meta::UnaryBool, FM)
TD_OP_ND("isfinite(Tensor self) -> Tensor", meta::UnaryBool, FM)

// ---- binary elementwise (PyTorch type promotion, broadcasting) -------
TD_OP("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", meta::BinaryArith, FM, "", AddF)
TD_OP("add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", meta::BinaryArithScalar, FM, "", Identity)
TD_OP("sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", meta::BinarySub, FM, "", AddF)
TD_OP("sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", meta::BinarySubScalar, FM, "", Identity)
TD_OP("rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", meta::BinarySubScalar, FM, "", RsubScalarF)
TD_OP("mul.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryArith, FM, "self: other; other: self", MulF)
TD_OP("mul.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryArithScalar, FM, "*: saved", MulScalarF)
TD_OP("div.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryTrueDiv, FM, "*: other; other: self", DivF)
TD_OP("div.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryTrueDivScalar, FM, "*: saved", DivScalarF)
TD_OP("remainder.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryArith, FM, "other: self other", RemainderF)
TD_OP("remainder.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryArithScalar, FM, "", Identity)
TD_OP("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", meta::BinaryArith, FM, "*: self exponent; exponent: result", PowTTF)
TD_OP("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", meta::BinaryArithScalar, FM, "self: self", PowTSF)
TD_OP("pow.Scalar(Scalar self, Tensor exponent) -> Tensor", meta::PowScalarSelf, F, "exponent: result exponent", PowScalarF)
TD_OP("maximum(Tensor self, Tensor other) -> Tensor", meta::BinaryArith, FM, "*: self other", MaxMinimumF)
TD_OP("minimum(Tensor self, Tensor other) -> Tensor", meta::BinaryArith, FM, "*: self other", MaxMinimumF)
TD_OP_ND("eq.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("eq.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM)
TD_OP_ND("ne.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("ne.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM)
TD_OP_ND("lt.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("lt.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM)
TD_OP_ND("le.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("le.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM)
TD_OP_ND("gt.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("gt.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM)
TD_OP_ND("ge.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("ge.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryCompareScalar, FM)
TD_OP_ND("logical_and(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("logical_or(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("logical_xor(Tensor self, Tensor other) -> Tensor", meta::BinaryCompare, FM)
TD_OP_ND("bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryBitwise, FM)
TD_OP_ND("bitwise_and.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryBitwiseScalar, FM)
TD_OP_ND("bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryBitwise, FM)
TD_OP_ND("bitwise_or.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryBitwiseScalar, FM)
TD_OP_ND("bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor", meta::BinaryBitwise, FM)
TD_OP_ND("bitwise_xor.Scalar(Tensor self, Scalar other) -> Tensor", meta::BinaryBitwiseScalar, FM)
TD_OP("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", meta::Where, FM, "*: condition", WhereF)
TD_OP("where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor", meta::Where, FM, "*: condition", WhereF)
TD_OP("where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor", meta::Where, F, "*: condition", WhereF)
TD_OP("where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor", meta::Where, F, "", NoInputsF)
TD_OP("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", meta::Clamp, FM, "self: self", ClampF)
TD_OP("clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", meta::ClampTensor, FM, "*: self min max", ClampTensorF)
TD_OP("clamp_min(Tensor self, Scalar min) -> Tensor", meta::ClampBound, FM, "*: self", ClampBoundF)
TD_OP("clamp_min.Tensor(Tensor self, Tensor min) -> Tensor", meta::ClampTensor, FM, "*: self; self: min; min: min", ClampBoundF)
TD_OP("clamp_max(Tensor self, Scalar max) -> Tensor", meta::ClampBound, FM, "*: self", ClampBoundF)
TD_OP("clamp_max.Tensor(Tensor self, Tensor max) -> Tensor", meta::ClampTensor, FM, "*: self; self: max; max: max", ClampBoundF)
TD_OP("masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", meta::MaskedFill, FM, "self: mask", MaskedFillF)
TD_OP("masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", meta::MaskedFill, FM, "self: mask; value: mask", MaskedFillF)

// ---- reductions (contiguous outputs) ---------------------------------
TD_OP("sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::SumMean, FM, "", SumF)
TD_OP("mean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::SumMean, FM, "", MeanF)
TD_OP("amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", meta::AmaxAmin, FM, "self: self result", AmaxF)
TD_OP("amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", meta::AmaxAmin, FM, "self: self result", AmaxF)
TD_OP_ND("argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", meta::ArgMaxMin, FM)
TD_OP_ND("argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", meta::ArgMaxMin, FM)
TD_OP("max(Tensor self) -> Tensor", meta::MaxMinAll, FM, "self: self result", AmaxF)
TD_OP("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", meta::MaxMinDim, FM, "self: result1", IndexedReductionF)
TD_OP("min(Tensor self) -> Tensor", meta::MaxMinAll, FM, "self: self result", AmaxF)
TD_OP("min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", meta::MaxMinDim, FM, "self: result1", IndexedReductionF)

// ---- matmul family ---------------------------------------------------
TD_OP("matmul(Tensor self, Tensor other) -> Tensor", meta::Matmul, FM, "self: other; other: self", MatmulF)
TD_OP("mm(Tensor self, Tensor mat2) -> Tensor", meta::Mm, FM, "self: mat2; mat2: self", MatmulF)
TD_OP("bmm(Tensor self, Tensor mat2) -> Tensor", meta::Bmm, FM, "self: mat2; mat2: self", MatmulF)

// ---- views (no kernel; the meta function gives strides and offset) ---
TD_OP("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", meta::View, M, "", ReshapeBackF)
TD_OP("reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", meta::Reshape, FM | kMayCopy, "", ReshapeBackF)
TD_OP("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", meta::Transpose, FM, "", TransposeF)
TD_OP("permute(Tensor(a) self, int[] dims) -> Tensor(a)", meta::Permute, FM, "", PermuteF)
TD_OP("t(Tensor(a) self) -> Tensor(a)", meta::T, FM, "", TF)
TD_OP("slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)", meta::Slice, F, "", SliceF)
TD_OP("select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", meta::Select, FM, "", SelectF)
TD_OP("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)", meta::Narrow, FM, "", NarrowF)
TD_OP("diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)", meta::Diagonal, FM, "", DiagonalF)
TD_OP("expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)", meta::Expand, M, "", Identity)  // the engine sums the gradient back to self's shape
TD_OP("squeeze(Tensor(a) self) -> Tensor(a)", meta::Squeeze, FM, "", ReshapeBackF)
TD_OP("squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", meta::SqueezeDim, FM, "", ReshapeBackF)
TD_OP("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", meta::Unsqueeze, FM, "", ReshapeBackF)
TD_OP("flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", meta::Flatten, FM | kMayCopy, "", ReshapeBackF)

// ---- copies ----------------------------------------------------------
TD_OP("contiguous(Tensor(a) self) -> Tensor(a)", meta::Contiguous, M | kMayCopy, "", Identity)
TD_OP("clone(Tensor self) -> Tensor", meta::Clone, FM, "", Identity)
TD_OP("to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False) -> Tensor(a)", meta::ToDtype, M | kMayCopy, "", Identity)  // the engine casts the gradient to self's dtype
TD_OP("to.device(Tensor(a) self, Device device, ScalarType? dtype=None, bool non_blocking=False, bool copy=False) -> Tensor(a)", meta::ToDevice, M | kMayCopy, "", Identity)

// ---- selection, joining ----------------------------------------------
TD_OP("topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)", meta::Topk, FM, "self: result1", IndexedReductionF)
TD_OP("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", meta::Gather, FM, "self: index", GatherF)
TD_OP("index_select(Tensor self, int dim, Tensor index) -> Tensor", meta::IndexSelect, FM, "self: index", IndexSelectF)
TD_OP("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", meta::Index, F, "self: indices", IndexF)
TD_OP("cat(Tensor[] tensors, int dim=0) -> Tensor", meta::Cat, F, "", CatF)
TD_OP("stack(Tensor[] tensors, int dim=0) -> Tensor", meta::Stack, F, "", StackF)

// ---- data-dependent output shapes (no meta; the daemon reports shapes)
TD_OP_ND("nonzero(Tensor self) -> Tensor", meta::DataDependent, FM | kDataDependent)
TD_OP("masked_select(Tensor self, Tensor mask) -> Tensor", meta::DataDependent, FM | kDataDependent, "self: mask", MaskedSelectF)

// ---- in-place (write self, return it; the daemon passes self's storage
// and meta as the kernel's output) -----------------------------------
TD_OP("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", meta::InPlace<meta::BinaryArith>, M, "", AddF)
TD_OP("add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", meta::InPlace<meta::BinaryArithScalar>, M, "", Identity)
TD_OP("sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", meta::InPlace<meta::BinarySub>, M, "", AddF)
TD_OP("sub_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", meta::InPlace<meta::BinarySubScalar>, M, "", Identity)
TD_OP("mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", meta::InPlace<meta::BinaryArith>, M, "self: other; other: self", MulF)
TD_OP("mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", meta::InPlace<meta::BinaryArithScalar>, M, "*: saved", MulScalarF)
TD_OP("div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", meta::InPlace<meta::BinaryTrueDiv>, M, "*: other; other: self", DivF)
TD_OP("div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", meta::InPlace<meta::BinaryTrueDivScalar>, M, "*: saved", DivScalarF)
TD_OP("clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)", meta::InPlace<meta::Clamp>, M, "self: self", ClampF)
TD_OP("clamp_.Tensor(Tensor(a!) self, Tensor? min=None, Tensor? max=None) -> Tensor(a!)", meta::InPlace<meta::ClampTensor>, M, "*: self min max", ClampTensorF)
TD_OP("masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)", meta::InPlace<meta::MaskedFill>, M, "self: mask", MaskedFillF)
TD_OP("masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)", meta::InPlace<meta::MaskedFill>, M, "self: mask; value: mask", MaskedFillF)
TD_OP("addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", meta::Addcmul, FM, "tensor1: tensor2; tensor2: tensor1", AddcmulF)
TD_OP("addcmul_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)", meta::InPlace<meta::Addcmul>, M, "tensor1: tensor2; tensor2: tensor1", AddcmulF)
TD_OP("addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", meta::Addcmul, FM, "tensor1: tensor2; tensor2: tensor2 tensor1", AddcdivF)
TD_OP("addcdiv_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)", meta::InPlace<meta::Addcmul>, M, "tensor1: tensor2; tensor2: tensor2 tensor1", AddcdivF)
TD_OP("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)", meta::CopyInPlace, M, "", CopyF)
TD_OP("zero_(Tensor(a!) self) -> Tensor(a!)", meta::FillInPlace, M, "", ZeroGrad)
TD_OP("fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)", meta::FillInPlace, M, "", ZeroGrad)
TD_OP("uniform_(Tensor(a!) self, float from=0, float to=1) -> Tensor(a!)", meta::RandomInPlace, M | kRandom, "", ZeroGrad)
TD_OP("normal_(Tensor(a!) self, float mean=0, float std=1) -> Tensor(a!)", meta::RandomInPlace, M | kRandom, "", ZeroGrad)

// ---- forward ops for nn ----------------------------------------------
TD_OP("erf(Tensor self) -> Tensor", meta::UnaryFloat, FM, "self: self", ErfF)
TD_OP("gelu(Tensor self, *, str approximate='none') -> Tensor", meta::Gelu, F, "self: self", GeluF)
TD_OP("softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", meta::Softmax, FM, "self: result", SoftmaxF)
TD_OP("log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", meta::Softmax, FM, "self: result", LogSoftmaxF)
TD_OP_ND("detach(Tensor(a) self) -> Tensor(a)", meta::Detach, FM)

// ---- ops that derivative formulas call --------------------------------
TD_OP("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", meta::ScatterAdd, FM, "src: index", ScatterAddF)
TD_OP("index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", meta::IndexAdd, FM, "source: index", IndexAddF)
TD_OP("index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor", meta::IndexPut, FM, "*: indices", IndexPutF)
TD_OP("masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor", meta::MaskedScatter, FM, "*: mask", MaskedScatterF)
TD_OP("select_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt index) -> Tensor", meta::SelectBackward, F, "", SelectBackwardF)
TD_OP("slice_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt start, SymInt end, SymInt step) -> Tensor", meta::SliceBackward, F, "", SliceBackwardF)
TD_OP("diagonal_backward(Tensor grad_output, SymInt[] input_sizes, int offset, int dim1, int dim2) -> Tensor", meta::DiagonalBackward, F, "", DiagonalBackwardF)
// ==== one block per op family, in this order.
// ---- pointwise (exp2 ... floor_divide) ------------------------------
TD_OP("exp2(Tensor self) -> Tensor", meta::UnaryFloatMath, FM, "self: result", Exp2F)
TD_OP("expm1(Tensor self) -> Tensor", meta::UnaryFloatMath, FM, "self: result", Expm1F)
TD_OP("log2(Tensor self) -> Tensor", meta::UnaryFloatMath, FM, "self: self", Log2F)
TD_OP("log1p(Tensor self) -> Tensor", meta::UnaryFloatMath, FM, "self: self", Log1pF)
TD_OP("silu(Tensor self) -> Tensor", meta::Silu, F, "self: self", SiluF)
TD_OP("square(Tensor self) -> Tensor", meta::Square, FM, "self: self", SquareF)
TD_OP("relu_(Tensor(a!) self) -> Tensor(a!)", meta::ReluInPlace, M, "self: result", ReluInPlaceF)
TD_OP("div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor", meta::DivMode, FM, "*: other; other: self", DivModeF)
TD_OP("div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor", meta::DivModeScalar, FM, "*: saved", DivModeScalarF)
TD_OP("fmod.Tensor(Tensor self, Tensor other) -> Tensor", meta::Fmod, FM, "other: self other", FmodF)
TD_OP("fmod.Scalar(Tensor self, Scalar other) -> Tensor", meta::FmodScalar, FM, "", Identity)
TD_OP("atan2(Tensor self, Tensor other) -> Tensor", meta::Atan2, FM, "*: self other", Atan2F)
TD_OP_ND("bitwise_left_shift.Tensor(Tensor self, Tensor other) -> Tensor", meta::BitwiseShift, FM)
TD_OP_ND("bitwise_left_shift.Tensor_Scalar(Tensor self, Scalar other) -> Tensor", meta::BitwiseShiftScalar, FM)
TD_OP_ND("bitwise_right_shift.Tensor(Tensor self, Tensor other) -> Tensor", meta::BitwiseShift, FM)
TD_OP_ND("bitwise_right_shift.Tensor_Scalar(Tensor self, Scalar other) -> Tensor", meta::BitwiseShiftScalar, FM)
TD_OP("lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor", meta::Lerp, FM, "", LerpScalarF)
TD_OP("lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor", meta::Lerp, FM, "*: weight; weight: end self", LerpTensorF)
TD_OP("floor_divide(Tensor self, Tensor other) -> Tensor", meta::FloorDivide, FM, "", ZeroGrads)
TD_OP("floor_divide.Scalar(Tensor self, Scalar other) -> Tensor", meta::FloorDivideScalar, FM, "", ZeroGrads)
// ---- reductions and scans -------------------------------------------
TD_OP("nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::Nansum, FM, "self: self", NansumF)
TD_OP("prod(Tensor self, *, ScalarType? dtype=None) -> Tensor", meta::Prod, FM, "self: self result", ProdF)
TD_OP("prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::Prod, FM, "self: self result", ProdF)
TD_OP("var.correction(Tensor self, int[1]? dim, *, int? correction, bool keepdim=False) -> Tensor", meta::VarStd, FM, "self: self", VarF)
TD_OP("var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", meta::VarStd, FM, "self: self", VarF)
TD_OP("var(Tensor self, bool unbiased=True) -> Tensor", meta::VarStd, FM, "self: self", VarF)
TD_OP("std.correction(Tensor self, int[1]? dim, *, int? correction, bool keepdim=False) -> Tensor", meta::VarStd, FM, "self: self result", StdF)
TD_OP("std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", meta::VarStd, FM, "self: self result", StdF)
TD_OP("std(Tensor self, bool unbiased=True) -> Tensor", meta::VarStd, FM, "self: self result", StdF)
TD_OP("norm.Scalar(Tensor self, Scalar p=2) -> Tensor", meta::Norm, FM, "self: self result", NormF)
TD_OP("norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor", meta::Norm, FM, "self: self result", NormF)
TD_OP("norm.ScalarOpt_dim_dtype(Tensor self, Scalar? p, int[1] dim, bool keepdim, *, ScalarType dtype) -> Tensor", meta::Norm, FM, "self: self result", NormF)
TD_OP("linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", meta::Norm, F, "self: self result", NormF)
TD_OP("logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor", meta::Logsumexp, FM, "self: self result", LogsumexpF)
TD_OP_ND("all(Tensor self) -> Tensor", meta::AllAny, FM)
TD_OP_ND("all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor", meta::AllAny, FM)
TD_OP_ND("any(Tensor self) -> Tensor", meta::AllAny, FM)
TD_OP_ND("any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor", meta::AllAny, FM)
TD_OP("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", meta::CumScan, FM, "", CumsumF)
TD_OP("cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", meta::CumScan, FM, "self: self result", CumprodF)
// ---- shape ops (split, chunk, unbind, flip, roll, repeat, tril, triu, pad, scatter)
TD_OP("split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", meta::Split, FM, "", SplitF)
TD_OP("split.sizes(Tensor(a -> *) self, SymInt[] split_size, int dim=0) -> Tensor(a)[]", meta::SplitWithSizes, FM, "", SplitF)
TD_OP("split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]", meta::SplitWithSizes, FM, "", SplitF)
TD_OP("chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]", meta::Chunk, FM, "", SplitF)
TD_OP("unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]", meta::Unbind, FM, "", UnbindF)
TD_OP("flip(Tensor self, int[] dims) -> Tensor", meta::Flip, FM, "", FlipF)
TD_OP("roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor", meta::Roll, FM, "", RollF)
TD_OP("repeat(Tensor self, SymInt[] repeats) -> Tensor", meta::Repeat, M, "", RepeatF)
TD_OP("tril(Tensor self, int diagonal=0) -> Tensor", meta::TrilTriu, FM, "", TrilTriuF)
TD_OP("triu(Tensor self, int diagonal=0) -> Tensor", meta::TrilTriu, FM, "", TrilTriuF)
TD_OP("constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor", meta::ConstantPadNd, F, "", ConstantPadNdF)
TD_OP("scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", meta::ScatterSrc, FM, "self: index; src: index", ScatterF)
TD_OP("scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor", meta::ScatterValue, FM, "self: index", ScatterF)
// ---- matmul family (addmm, baddbmm, dot, outer, linear) -------------
TD_OP("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", meta::Addmm, FM, "mat1: mat2; mat2: mat1", AddmmF)
TD_OP("baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", meta::Baddbmm, FM, "batch1: batch2; batch2: batch1", AddmmF)
TD_OP("dot(Tensor self, Tensor tensor) -> Tensor", meta::Dot, FM, "self: tensor; tensor: self", DotF)
TD_OP("outer(Tensor self, Tensor vec2) -> Tensor", meta::Outer, FM, "self: vec2; vec2: self", OuterF)
TD_OP("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", meta::Linear, F, "input: weight; weight: input", LinearF)
// ---- nn ops (convolution, pooling) ----------------------------------
// conv2d: PyTorch's conv2d schema (2-D only; input NCHW or CHW). Its
// backward is aten's convolution_backward without `bool[3] output_mask`
// (the schema language has no bool lists): all three gradients are
// always computed.
TD_OP("conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor", meta::Conv2d, F, "*: input weight", Conv2dF)
TD_OP("convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, int[] stride, SymInt[] padding, int[] dilation, bool transposed, SymInt[] output_padding, int groups) -> (Tensor, Tensor, Tensor)", meta::ConvolutionBackward, F, "*: grad_output input weight", ConvolutionBackwardF)
TD_OP("max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)", meta::MaxPool2dWithIndices, F, "self: self result1", MaxPoolF)
TD_OP("max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor", meta::MaxPool2dWithIndicesBackward, F, "grad_output: indices; nograd: self", MaxPoolBackwardF)
TD_OP("avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor", meta::AvgPool2d, F, "self: self", AvgPoolF)
TD_OP("avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor", meta::AvgPool2dBackward, F, "nograd: self", AvgPoolBackwardF)
// ---- factories (linspace, randint, empty_strided) -------------------
TD_OP_ND("linspace(Scalar start, Scalar end, int steps, " TD_FACTORY_KW ") -> Tensor", meta::Linspace, F | kFactory)
TD_OP_ND("randint(SymInt high, SymInt[] size, " TD_FACTORY_KW ") -> Tensor", meta::Randint, F | kFactory | kRandom)
TD_OP_ND("randint.low(SymInt low, SymInt high, SymInt[] size, " TD_FACTORY_KW ") -> Tensor", meta::RandintLow, F | kFactory | kRandom)
TD_OP_ND("empty_strided(SymInt[] size, SymInt[] stride, " TD_FACTORY_KW ") -> Tensor", meta::EmptyStrided, F | kFactory)
// ---- fused optimizer steps ------------------------------------------
// One Adam/AdamW update of one parameter (PyTorch 1.13's single-tensor
// step, as tensord.optim runs it op by op) in one pass: self, grad and
// the two moments share one dense layout. Returns the written tensors.
TD_OP_ND("_fused_adam_(Tensor(a!) self, Tensor grad, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, *, float lr, float beta1, float beta2, float weight_decay, float eps, int step, bool maximize=False, bool decoupled_weight_decay=False) -> (Tensor(a!), Tensor(b!), Tensor(c!))", meta::FusedAdam, kNone)

#undef TD_FACTORY_KW
