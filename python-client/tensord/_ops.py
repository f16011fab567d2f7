"""The Python surface of the op table: module functions and Tensor methods.

Nothing here is a list of ops: ``_C.op_table()`` (the table in meta/src/ops.cc)
says which ops exist and whether each has a function and/or a method form;
every generated callable forwards its arguments to the C++ client, which
resolves the overload, binds arguments, runs the meta function and streams
the call. This module only adds documentation and PyTorch-style named tuples
for ops with several returns.
"""
import collections
import types

from . import _C

__all__ = ["install", "return_types", "OP_DOCS"]

# Documentation of each op family, by base name. Behaviour is decided by the
# meta functions and kernels; these words describe it for help().
_UNARY_SAME = ("Elementwise {what}. The output has the input's shape, dtype and memory layout "
               "(strides follow the input's permutation, as PyTorch).")
_UNARY_FLOAT = ("Elementwise {what}. Floating inputs keep their dtype; integer and bool inputs give "
                "the default float dtype (float32), as PyTorch's int-to-float rule. The output has the "
                "input's shape and memory layout.")
_UNARY_BOOL = "Elementwise {what}. Returns a bool tensor of the input's shape."
_BINARY = ("Elementwise {what} with NumPy broadcasting. The result dtype follows PyTorch type promotion "
           "(bool < integer < floating; a Python number or a 0-dim tensor only raises the category; "
           "bfloat16 with float16 gives float32; float8 types do not promote). ``other`` may be a "
           "Tensor or a Python number (which selects the Scalar overload). Raises RuntimeError when "
           "the shapes do not broadcast (naming the sizes and the dimension).")
# For the binary ops with no Scalar overload (maximum, minimum).
_BINARY_TENSORS = ("Elementwise {what} with NumPy broadcasting. The result dtype follows PyTorch type promotion "
                   "(bool < integer < floating; a 0-dim tensor only raises the category; bfloat16 with float16 "
                   "gives float32; float8 types do not promote). ``other`` must be a Tensor: there is no Scalar "
                   "overload, so a Python number is a TypeError, as in PyTorch. Raises RuntimeError when the "
                   "shapes do not broadcast (naming the sizes and the dimension).")
_COMPARE = ("Elementwise {what} with NumPy broadcasting; returns a bool tensor. Operands are "
            "compared in their promoted dtype (PyTorch type promotion). ``other`` may be a Tensor "
            "or a Python number. RuntimeError when the shapes do not broadcast.")
_BITWISE = ("Elementwise {what} of integer or bool tensors with broadcasting (PyTorch type "
            "promotion). RuntimeError for floating inputs.")
_REDUCE = ("{what} over ``dim`` (an int or a list of ints; negative dims count from the end; "
           "None reduces every dim). ``keepdim=True`` keeps reduced dims as size 1. The output is "
           "contiguous. {dtype} IndexError for a dim out of range, RuntimeError for a repeated dim.")
_FACTORY = ("{what}. Sizes may be given as varargs ints (``zeros(3, 4)``) or one sequence "
            "(``zeros((3, 4))``). ``dtype`` defaults to {default}; ``device`` defaults to the innermost "
            "``with tensord.device(...)`` context, else cpu. ``device='meta'`` gives a meta tensor "
            "without contacting any daemon. Negative sizes raise RuntimeError.")
_LIKE = ("{what} with the shape of ``self``, and its dtype, device and memory layout unless "
         "``dtype=``/``device=`` say otherwise (a meta input stays on meta).")
_VIEW = ("{what}. A view: the result aliases ``self``'s storage (no data is copied); its strides "
         "and storage offset are computed by the meta function.")

_INPLACE = ("In place: {what}, with broadcasting of the other operands to ``self``'s shape; returns "
            "``self``. The result is cast to self's dtype; RuntimeError when PyTorch would refuse the cast "
            "(e.g. a float result into an integer tensor: 'result type Float can't be cast to the desired "
            "output type Long'), when the broadcast shape differs from self's, or when self has overlapping "
            "elements (an expanded tensor).")

OP_DOCS = {
    "empty": _FACTORY.format(what="A tensor of the given sizes with unspecified values", default="float32"),
    "zeros": _FACTORY.format(what="A tensor of the given sizes filled with 0", default="float32"),
    "ones": _FACTORY.format(what="A tensor of the given sizes filled with 1", default="float32"),
    "full": _FACTORY.format(what="A tensor of ``size`` filled with ``fill_value``",
                            default="the dtype of fill_value (bool, int64 or float32)"),
    "arange": ("Values from ``start`` (default 0) to ``end`` (exclusive) by ``step``, as a 1-D tensor. "
               "dtype: int64 when every bound is an int, else float32 (PyTorch's rule). RuntimeError for "
               "a zero step or bounds inconsistent with the step's sign."),
    "rand": _FACTORY.format(what="Uniform random values in [0, 1), drawn from the session's generator",
                            default="float32"),
    "randn": _FACTORY.format(what="Standard normal random values, drawn from the session's generator",
                             default="float32"),
    "eye": ("A 2-D tensor with ones on the diagonal: ``n`` rows and ``m`` (default n) columns. dtype "
            "defaults to float32; device as the other factories."),
    "empty_like": _LIKE.format(what="An uninitialised tensor"),
    "zeros_like": _LIKE.format(what="A tensor of zeros"),
    "ones_like": _LIKE.format(what="A tensor of ones"),
    "full_like": _LIKE.format(what="A tensor filled with ``fill_value``"),
    "rand_like": _LIKE.format(what="Uniform [0, 1) random values"),
    "randn_like": _LIKE.format(what="Standard normal random values"),
    "neg": _UNARY_SAME.format(what="negation (-x); RuntimeError for bool, as PyTorch"),
    "abs": _UNARY_SAME.format(what="absolute value"),
    "sign": _UNARY_SAME.format(what="sign (-1, 0 or 1)"),
    "floor": _UNARY_SAME.format(what="floor (largest integer <= x); integers are returned unchanged"),
    "ceil": _UNARY_SAME.format(what="ceiling (smallest integer >= x)"),
    "round": _UNARY_SAME.format(what="rounding half to even"),
    "trunc": _UNARY_SAME.format(what="truncation toward zero"),
    "relu": _UNARY_SAME.format(what="max(x, 0)"),
    "bitwise_not": "Elementwise bitwise NOT of an integer tensor (logical NOT for bool). RuntimeError for floating inputs.",
    "exp": _UNARY_FLOAT.format(what="e**x"),
    "log": _UNARY_FLOAT.format(what="natural logarithm"),
    "sqrt": _UNARY_FLOAT.format(what="square root"),
    "rsqrt": _UNARY_FLOAT.format(what="1 / sqrt(x)"),
    "sin": _UNARY_FLOAT.format(what="sine"),
    "cos": _UNARY_FLOAT.format(what="cosine"),
    "tanh": _UNARY_FLOAT.format(what="hyperbolic tangent"),
    "sigmoid": _UNARY_FLOAT.format(what="logistic sigmoid 1 / (1 + exp(-x))"),
    "reciprocal": _UNARY_FLOAT.format(what="1 / x"),
    "logical_not": _UNARY_BOOL.format(what="logical NOT (x == 0)"),
    "isnan": _UNARY_BOOL.format(what="test for NaN"),
    "isinf": _UNARY_BOOL.format(what="test for +/-infinity"),
    "isfinite": _UNARY_BOOL.format(what="test for finite values"),
    "add": _BINARY.format(what="addition self + alpha * other"),
    "sub": _BINARY.format(what="subtraction self - alpha * other (RuntimeError for bool)"),
    "rsub": ("Elementwise reversed subtraction other - alpha * self, where ``other`` is a Python number (its "
             "Scalar overload is the only one here: a Tensor ``other`` is a TypeError; ``other - self`` on two "
             "tensors is sub). The result dtype follows PyTorch type promotion (the number only raises the "
             "category: an int tensor minus a float gives the default float dtype)."),
    "mul": _BINARY.format(what="multiplication"),
    "div": ("Elementwise true division with broadcasting. Integer and bool operands give the default "
            "float dtype (float32); floating operands follow PyTorch type promotion."),
    "remainder": _BINARY.format(what="remainder with the sign of the divisor (Python's %)"),
    "pow": _BINARY.format(what="power self ** exponent; ``pow(number, tensor)`` is also accepted"),
    "maximum": _BINARY_TENSORS.format(what="maximum (NaN propagates)"),
    "minimum": _BINARY_TENSORS.format(what="minimum (NaN propagates)"),
    "eq": _COMPARE.format(what="equality"),
    "ne": _COMPARE.format(what="inequality"),
    "lt": _COMPARE.format(what="less-than"),
    "le": _COMPARE.format(what="less-or-equal"),
    "gt": _COMPARE.format(what="greater-than"),
    "ge": _COMPARE.format(what="greater-or-equal"),
    "logical_and": "Elementwise logical AND (nonzero is true) with broadcasting; returns bool.",
    "logical_or": "Elementwise logical OR (nonzero is true) with broadcasting; returns bool.",
    "logical_xor": "Elementwise logical XOR (nonzero is true) with broadcasting; returns bool.",
    "bitwise_and": _BITWISE.format(what="bitwise AND"),
    "bitwise_or": _BITWISE.format(what="bitwise OR"),
    "bitwise_xor": _BITWISE.format(what="bitwise XOR"),
    "where": ("``where(condition, self, other)``: elements of ``self`` where ``condition`` (a bool tensor) "
              "is true, else of ``other``; the three broadcast together and the dtype is the promotion "
              "of self and other. Either may be a Python number. As a method, ``x.where(cond, y)``."),
    "clamp": ("Elementwise clamp into [min, max] (either may be None, not both). ``min`` and ``max`` are "
              "both Python numbers or both Tensors (broadcast with ``self``; the Tensor overload). The dtype "
              "follows PyTorch type promotion with the bounds. A NaN in ``self`` stays NaN, a NaN tensor bound "
              "gives NaN, and where min > max the result is max. RuntimeError when neither bound is given or "
              "the shapes do not broadcast."),
    "clamp_min": ("``clamp(self, min=min)``: elementwise max(self, min) where a NaN stays NaN; ``min`` is a "
                  "Python number or a Tensor broadcast with self. The dtype follows PyTorch type promotion."),
    "clamp_max": ("``clamp(self, max=max)``: elementwise min(self, max) where a NaN stays NaN; ``max`` is a "
                  "Python number or a Tensor broadcast with self. The dtype follows PyTorch type promotion."),
    "masked_fill": ("A copy of ``self`` with ``value`` where ``mask`` (bool, broadcastable to self) is true. "
                    "``value`` is a number or a 0-dim Tensor (of any dtype, converted to self's; RuntimeError for "
                    "a tensor with dimensions). Keeps self's dtype and shape; the result is contiguous."),
    "sum": _REDUCE.format(what="Sum", dtype="Integer and bool inputs sum to int64 (PyTorch's rule) unless "
                          "``dtype=`` is given."),
    "mean": _REDUCE.format(what="Arithmetic mean", dtype="Requires a floating input (or ``dtype=``); "
                           "RuntimeError for integers, as PyTorch."),
    "amax": _REDUCE.format(what="Maximum", dtype="Keeps the input dtype; ``dim=[]`` reduces every dim."),
    "amin": _REDUCE.format(what="Minimum", dtype="Keeps the input dtype; ``dim=[]`` reduces every dim."),
    "argmax": ("Index (int64) of the maximum over ``dim`` (an int; None flattens). The first occurrence wins. "
               "``keepdim`` keeps the dim as size 1."),
    "argmin": ("Index (int64) of the minimum over ``dim`` (an int; None flattens). The first occurrence wins. "
               "``keepdim`` keeps the dim as size 1."),
    "max": ("``max(x)``: the maximum of all elements (0-dim). ``max(x, dim, keepdim=False)``: a named tuple "
            "(values, indices) over ``dim``."),
    "min": ("``min(x)``: the minimum of all elements (0-dim). ``min(x, dim, keepdim=False)``: a named tuple "
            "(values, indices) over ``dim``."),
    "matmul": ("Matrix product with PyTorch's rank rules: 1-D x 1-D is a dot product (0-dim), 2-D x 2-D a "
               "matrix product, 1-D operands are promoted to a matrix and the added dim removed, and batch "
               "dims broadcast. Both operands must have the same dtype. RuntimeError naming both shapes on a "
               "size mismatch, e.g. 'matmul: size mismatch, self is [8, 4], other is [3, 2] (4 != 3)'. "
               "The output is contiguous."),
    "mm": "Matrix product of two 2-D tensors of the same dtype ([n, k] @ [k, m] -> [n, m]).",
    "bmm": "Batched matrix product of two 3-D tensors ([b, n, k] @ [b, k, m] -> [b, n, m]); batch sizes must match.",
    "view": _VIEW.format(what="The same data with a new shape (one size may be -1); varargs ints or one "
                         "sequence. RuntimeError when the strides are incompatible (use reshape)"),
    "reshape": ("The data with a new shape (one size may be -1). A view when the strides allow it, else a "
                "contiguous copy (decided from metadata alone, as PyTorch)."),
    "transpose": _VIEW.format(what="``self`` with dims ``dim0`` and ``dim1`` swapped"),
    "permute": _VIEW.format(what="``self`` with its dims reordered by ``dims`` (varargs or a sequence)"),
    "t": _VIEW.format(what="The transpose of a tensor of at most 2 dims"),
    "slice": _VIEW.format(what="``self[start:end:step]`` along ``dim`` (step > 0)"),
    "select": _VIEW.format(what="``self`` indexed by ``index`` along ``dim``; that dim is removed. IndexError "
                           "when the index is out of range"),
    "narrow": _VIEW.format(what="``length`` elements of ``self`` along ``dim`` from ``start``"),
    "diagonal": _VIEW.format(what="``diagonal(self, offset=0, dim1=0, dim2=1)``: the diagonal of the 2-D planes "
                                  "over ``dim1`` and ``dim2`` (above the main one for ``offset`` > 0), appended as the last "
                                  "dim (PyTorch's rule; an offset past the edge gives size 0). RuntimeError when dim1 == dim2, "
                                  "IndexError for a dim out of range"),
    "expand": _VIEW.format(what="``self`` broadcast to ``size`` (-1 keeps a size) with stride 0 for new or "
                           "expanded dims"),
    "squeeze": _VIEW.format(what="``self`` without size-1 dims (all, or only ``dim``)"),
    "unsqueeze": _VIEW.format(what="``self`` with a size-1 dim inserted at ``dim``"),
    "flatten": "``self`` with dims ``start_dim``..``end_dim`` merged into one (a view when possible, else a copy).",
    "contiguous": "``self`` if it is already contiguous (an alias), else a contiguous copy.",
    "clone": "A copy of ``self`` with fresh storage, keeping its memory layout (preserve_format).",
    "to": ("``to(dtype)`` converts the elements; ``to(device)`` moves the tensor; ``to(device, dtype)`` both. "
           "Returns an alias when nothing changes. A real tensor moved to 'meta' becomes a local meta tensor; "
           "a meta tensor cannot be moved to a real device (it has no data): use "
           "``empty_like(t, device='cpu')`` instead."),
    "topk": ("The ``k`` largest (or smallest with ``largest=False``) elements along ``dim``: a named tuple "
             "(values, indices), indices int64. RuntimeError when k exceeds the dim's size."),
    "gather": ("Values of ``self`` along ``dim`` at ``index`` (int64, same rank as self); the output has "
               "index's shape. Out-of-range indices fail in the daemon (reported at the next sync point)."),
    "index_select": "Rows of ``self`` along ``dim`` chosen by a 1-D int64 ``index``.",
    "index": ("Advanced indexing ``self[indices]`` with a list of int64 tensors (None for dims not "
              "indexed); indices broadcast together. Used by ``x[tensor]``."),
    "cat": "Concatenation of tensors along ``dim`` (sizes must match elsewhere; dtypes promote).",
    "stack": "Stacks tensors of equal shape along a new dim ``dim``.",
    "nonzero": ("The indices of nonzero elements as an int64 tensor [n, ndim]. Its shape depends on the data: "
                "on a real tensor one round trip asks the daemon; on a meta tensor it raises "
                "NotImplementedError naming the op."),
    "masked_select": ("The elements of ``self`` where ``mask`` is true, as a 1-D tensor (broadcasting). Its "
                      "shape depends on the data: NotImplementedError on meta tensors; one round trip on real "
                      "ones. Used by ``x[bool_mask]``."),
    # In-place ops: they write into ``self`` and return it (the same Tensor object).
    "add_": _INPLACE.format(what="``self += alpha * other``"),
    "sub_": _INPLACE.format(what="``self -= alpha * other``"),
    "mul_": _INPLACE.format(what="``self *= other``"),
    "div_": _INPLACE.format(what="``self /= other`` (true division: RuntimeError for an integer self)"),
    "clamp_": _INPLACE.format(what="clamp of ``self`` into [min, max]"),
    "masked_fill_": _INPLACE.format(what="``value`` written where ``mask`` (bool, broadcastable to self) is true"),
    "addcmul": ("``self + value * tensor1 * tensor2`` elementwise; the three broadcast together and the dtype "
                "follows PyTorch type promotion. RuntimeError for bool."),
    "addcmul_": _INPLACE.format(what="``self += value * tensor1 * tensor2``"),
    "addcdiv": ("``self + value * tensor1 / tensor2`` elementwise (broadcasting, type promotion). RuntimeError "
                "when tensor1 and tensor2 are both integer tensors, as PyTorch."),
    "addcdiv_": _INPLACE.format(what="``self += value * tensor1 / tensor2``"),
    "copy_": ("Copies ``src`` into ``self`` (in place; returns self): src broadcasts to self's shape and is "
              "converted to self's dtype (any pair of dtypes). NotImplementedError when src is a meta tensor "
              "and self is not; RuntimeError when src's shape does not broadcast to self's or self has "
              "overlapping elements."),
    "zero_": "Fills ``self`` with zeros in place; returns self.",
    "fill_": ("Fills ``self`` with ``value`` in place; returns self. RuntimeError when the value does not fit "
              "self's dtype (e.g. 300 for int8)."),
    "uniform_": ("Fills ``self`` (floating) in place with uniform values in [from, to), drawn from the "
                 "session's generator; returns self. RuntimeError when from > to; NotImplementedError-style "
                 "RuntimeError for integer dtypes."),
    "normal_": ("Fills ``self`` (floating) in place with normal values of mean ``mean`` and standard deviation "
                "``std``, drawn from the session's generator; returns self. RuntimeError when std < 0."),
    "erf": _UNARY_FLOAT.format(what="error function erf(x)"),
    "gelu": ("Elementwise GELU x * Phi(x) of a floating tensor: ``approximate='none'`` uses the exact normal "
             "CDF, ``'tanh'`` PyTorch's tanh approximation; any other string is a RuntimeError."),
    "softmax": ("Softmax along ``dim``: exp(x - max) / sum(exp(x - max)). ``dtype=`` converts the input first. "
                "Floating inputs only (RuntimeError otherwise); the output is contiguous."),
    "log_softmax": ("Log-softmax along ``dim``: x - max - log(sum(exp(x - max))), computed stably. ``dtype=`` "
                    "converts the input first. Floating inputs only; the output is contiguous."),
    "detach": ("A view of ``self`` sharing its storage that is not part of any autograd graph "
               "(requires_grad=False)."),
    "scatter_add": ("A copy of ``self`` (contiguous) where, for every position i of ``index`` (int64, same rank), "
                    "src[i] is added at i with its ``dim`` coordinate replaced by index[i]. Out-of-range "
                    "indices fail in the daemon (RuntimeError naming the op, at the next sync point)."),
    "index_add": ("A copy of ``self`` (contiguous) with ``alpha * source`` added along ``dim`` at the "
                  "positions given by the 1-D int32/int64 ``index`` (one per source.size(dim); duplicates "
                  "accumulate). Out-of-range indices fail in the daemon (IndexError at the next sync point)."),
    "index_put": ("A copy of ``self`` (layout preserved) with ``self[indices] = values`` (or ``+=`` with "
                  "``accumulate=True``; duplicates then accumulate). ``indices``: int64 tensors, bool masks or "
                  "None, as advanced indexing; values must have self's dtype and broadcast to the indexing "
                  "result's shape."),
    "masked_scatter": ("A contiguous copy of ``self`` (broadcast with ``mask``) where the k-th true element of "
                       "the bool ``mask`` (row-major) takes the k-th element of ``source`` (same dtype as self). "
                       "RuntimeError (at the next sync point) when source has too few elements."),
    "select_backward": ("Zeros of ``input_sizes`` (contiguous, grad_output's dtype) with ``grad_output`` written "
                        "into ``select(dim, index)``: the gradient of select."),
    "slice_backward": ("Zeros of ``input_sizes`` with ``grad_output`` written into ``slice(dim, start, end, "
                       "step)`` (bounds clamped as slice does): the gradient of slice."),
    "diagonal_backward": ("Zeros of ``input_sizes`` (contiguous, grad_output's dtype) with ``grad_output`` written "
                          "onto ``diagonal(offset, dim1, dim2)``: the gradient of diagonal."),
}

# Docs of the families added with the complete meta op set, one block each.
OP_DOCS.update({
    "exp2": _UNARY_FLOAT.format(what="base-2 exponential 2**x"),
    "expm1": _UNARY_FLOAT.format(what="exp(x) - 1, accurate near 0; float16 is refused as PyTorch's CPU kernel "
                                      "(RuntimeError)"),
    "log2": _UNARY_FLOAT.format(what="base-2 logarithm; float16 is refused as PyTorch's CPU kernel (RuntimeError)"),
    "log1p": _UNARY_FLOAT.format(what="log(1 + x), accurate near 0; float16 is refused as PyTorch's CPU kernel "
                                      "(RuntimeError)"),
    "silu": ("Elementwise SiLU x * sigmoid(x) (PyTorch's aten::silu, also torch.nn.functional.silu). Same shape, "
             "dtype and memory layout as the input; float32, float64 and bfloat16 only (RuntimeError for "
             "integer, bool and float16 inputs, as PyTorch's CPU kernel)."),
    "square": ("Elementwise x * x, PyTorch's pow(self, 2): integer inputs keep their dtype (wrapping on "
               "overflow), bool gives int64; same shape and memory layout as the input."),
    "relu_": _INPLACE.format(what="self = max(self, 0) (NaN stays NaN); RuntimeError for bool"),
    "div": ("Elementwise division with broadcasting. ``rounding_mode=None`` (default): true division; integer "
            "and bool operands give the default float dtype (float32), floating operands follow PyTorch type "
            "promotion. ``rounding_mode='trunc'`` rounds toward zero and ``'floor'`` toward -inf; both keep the "
            "promoted dtype (integers stay integers; bool is refused), and integer division by zero raises "
            "RuntimeError('ZeroDivisionError') at the next sync point. Any other rounding_mode is a RuntimeError."),
    # The template says what the operands may be; what follows it, the op's own rules.
    "floor_divide": _BINARY.format(what="floor division self // other") + (
        " PyTorch's floor_divide, which is div(rounding_mode='floor'): rounds toward -inf; integers stay "
        "integers. Integer division by zero raises RuntimeError('ZeroDivisionError') at the next sync point; "
        "bool is refused."),
    "fmod": _BINARY.format(what="C remainder fmod(self, other)") + (
        " The result has the sign of ``self`` (unlike remainder). Integer division by zero raises "
        "RuntimeError('ZeroDivisionError') at the next sync point; bool is refused."),
    # Not _BINARY: atan2 has no Scalar overload, so a number for ``other`` is refused.
    "atan2": ("Elementwise arctangent of self / other, using the signs of both for the quadrant, with NumPy "
              "broadcasting. ``other`` must be a Tensor: there is no Scalar overload, so a Python number is a "
              "TypeError, as in PyTorch. The result dtype follows PyTorch type promotion (bool < integer < "
              "floating; a 0-dim tensor only raises the category; bfloat16 with float16 gives float32; float8 "
              "types do not promote), except that integer and bool inputs give float32; float16 is refused as "
              "PyTorch's CPU kernel (RuntimeError). Raises RuntimeError when the shapes do not broadcast (naming "
              "the sizes and the dimension)."),
    "bitwise_left_shift": _BITWISE.format(what="left shift self << other (bits shifted out are lost; a shift "
                                               "count outside [0, bits) gives 0); bool is refused too") +
                          " ``other`` may be a Python int. The operators ``<<`` and ``other << tensor`` use it.",
    "bitwise_right_shift": _BITWISE.format(what="arithmetic right shift self >> other (a shift count outside "
                                                "[0, bits) gives the sign fill: 0 or -1); bool is refused too") +
                           " ``other`` may be a Python int. The operators ``>>`` and ``other >> tensor`` use it.",
    "lerp": ("Linear interpolation self + weight * (end - self) with NumPy broadcasting of self, end and a tensor "
             "``weight``; ``weight`` may be a Python number. No type promotion: end (and a tensor weight) must "
             "have self's dtype (RuntimeError 'expected dtype float for `end` but got dtype double'); float32, "
             "float64 and bfloat16 only. The output layout follows the inputs', as PyTorch's TensorIterator."),
})
OP_DOCS.update({
    "nansum": _REDUCE.format(what="Sum treating NaN as 0", dtype=(
        "Integer and bool inputs sum to int64 (a plain sum, as PyTorch); floating inputs keep their dtype. "
        "``dtype=`` converts the input first (a floating input needs a floating dtype: RuntimeError otherwise). "
        "``dim=()`` or ``[]`` reduces every dim.")),
    "prod": ("Product of all elements, or along the int ``dim`` (``keepdim`` keeps it as size 1). Integer and "
             "bool inputs give int64 (wrapping on overflow), others keep their dtype; ``dtype=`` converts the "
             "input first. The product of no elements is 1. The output is contiguous. float16/bfloat16 results "
             "raise RuntimeError (PyTorch 1.13's CPU prod lacks them); IndexError for a dim out of range. "
             "Gradient: the product of the other elements (exact with zeros)."),
    "var": ("Variance over ``dim`` (an int, a list, ``()``/``[]`` or None: every dim): "
            "sum((x - mean)^2) / max(N - correction, 0). Overloads as PyTorch 1.13: ``var(x, unbiased=True)``, "
            "``var(x, dim, unbiased=True, keepdim=False)`` and ``var(x, dim, *, correction, keepdim=False)`` "
            "(correction None means 1; an integer). ``unbiased=False`` is correction 0. N <= correction gives "
            "inf or NaN as PyTorch. Floating inputs only (RuntimeError 'std and var only support floating "
            "point and complex dtypes' otherwise); the output has the input's dtype and is contiguous."),
    "std": ("Standard deviation: the square root of ``var`` with the same overloads (``unbiased`` or "
            "``correction``, default 1), dims, keepdim, dtype rules and errors. Its gradient is 0 where the "
            "result is 0."),
    "norm": ("Vector p-norm over ``dim`` (None: every dim), as torch.norm: ``p`` a number (default 2; "
             "``inf``/``-inf``: max/min of |x|; 0: the count of non-zeros; other p: (sum |x|^p)^(1/p)) or "
             "'fro' (= 2). ``keepdim`` keeps reduced dims; ``dtype=`` (floating) converts the input first and "
             "is the result's dtype. Floating inputs only ('norm(): input dtype should be either floating point "
             "or complex'); an empty input gives 0. The output is contiguous."),
    "linalg_vector_norm": ("torch.linalg.vector_norm: the ``ord``-norm (default 2; inf, -inf, 0 or any number) "
                           "of ``self`` over ``dim`` (None: every dim), ``keepdim``, and ``dtype=`` that must not "
                           "narrow the input's dtype. Floating inputs only. RuntimeError for ord < 0 or "
                           "+-inf over an empty dim (no identity), as PyTorch. The output is contiguous."),
    "logsumexp": ("log(sum(exp(x))) over ``dim`` (required: an int or a list), computed stably as "
                  "m + log(sum(exp(x - m))) with m the max (taken as 0 where infinite). Integer and bool inputs "
                  "give float32; float16 raises RuntimeError (as PyTorch 1.13 on CPU). ``dim=()`` reduces every "
                  "dim with keepdim=True, and fails without it on tensors of rank >= 1, as PyTorch 1.13. An "
                  "empty reduction gives -inf. The output is contiguous."),
    "all": ("True when every element (along the int ``dim``, if given; ``keepdim`` keeps it) is non-zero "
            "(NaN counts as non-zero). The result is bool, or uint8 for a uint8 input (PyTorch 1.13). Empty "
            "reductions give True. Not differentiable; the output is contiguous."),
    "any": ("True when some element (along the int ``dim``, if given; ``keepdim`` keeps it) is non-zero. "
            "The result is bool, or uint8 for a uint8 input (PyTorch 1.13). Empty reductions give False. Not "
            "differentiable; the output is contiguous."),
    "cumsum": ("Cumulative sum along ``dim``: out[..., i, ...] = sum of self[..., :i+1, ...]. Integer and bool "
               "inputs give int64 unless ``dtype=`` says otherwise; ``dtype=`` converts the input first. The "
               "output has the input's shape and is contiguous whatever the input's layout (PyTorch 1.13 CPU). "
               "float16 and bool results raise RuntimeError (not implemented on CPU, as PyTorch); IndexError "
               "for a dim out of range."),
    "cumprod": ("Cumulative product along ``dim``; dtypes, layout and errors as cumsum. Its gradient is exact "
                "with zeros in the input (the product of the other factors, as PyTorch)."),
})
OP_DOCS.update({
    "split": ("Splits ``self`` along ``dim`` into views: an int ``split_size`` gives pieces of that many elements "
              "(the last one smaller; split.Tensor), a list gives pieces of those sizes (split.sizes, as "
              "split_with_sizes). Returns a tuple of views aliasing self (no copy; strides and storage offsets "
              "from the meta function, on meta tensors too). RuntimeError for split_size 0 on a non-empty dim, a "
              "negative size, sizes not summing to self.size(dim) or a 0-dim self; IndexError for a bad dim."),
    "split_with_sizes": ("Splits ``self`` along ``dim`` into views of the sizes in ``split_sizes``, which must be "
                         "non-negative and sum to self.size(dim) (RuntimeError otherwise, naming the sum and the "
                         "sizes). Returns a tuple of views aliasing self."),
    "chunk": ("Splits ``self`` along ``dim`` into at most ``chunks`` views of ceil(size / chunks) elements (so "
              "fewer may come back, as PyTorch; an empty dim gives ``chunks`` empty views). Returns a tuple of "
              "views aliasing self. RuntimeError for chunks <= 0 or a 0-dim self."),
    "unbind": ("Removes ``dim``: a tuple of the views self.select(dim, i) for every i (empty for a size-0 dim). "
               "IndexError for a 0-dim self or a bad dim."),
    "flip": ("A copy of ``self`` with the order of elements reversed along every dim in ``dims`` (distinct; "
             "RuntimeError for a repeated dim). Any dtype; the output keeps self's memory layout when self is "
             "dense (PyTorch's empty_like), else is contiguous."),
    "roll": ("A copy of ``self`` shifted circularly by ``shifts[i]`` along ``dims[i]`` (elements that leave one "
             "end come back at the other). No ``dims``: the flattened tensor is rolled by one shift and reshaped "
             "back (contiguous output). RuntimeError when shifts and dims differ in length or shifts is empty."),
    "repeat": ("Tiles ``self``: ``repeats[i]`` copies along each dim; extra leading repeats add dims (as "
               "numpy.tile). Contiguous output of sizes self.size(i) * repeats[i]. RuntimeError for fewer "
               "repeats than dims or a negative repeat."),
    "tril": ("A contiguous copy of ``self`` (at least 2-D; batches over leading dims) keeping the elements on and "
             "below the ``diagonal``-th diagonal (j - i <= diagonal), the others 0. Any dtype."),
    "triu": ("A contiguous copy of ``self`` (at least 2-D; batches over leading dims) keeping the elements on and "
             "above the ``diagonal``-th diagonal (j - i >= diagonal), the others 0. Any dtype."),
    "constant_pad_nd": ("Pads ``self`` with ``value`` (converted to self's dtype; RuntimeError when it does not "
                        "fit): ``pad`` holds (before, after) pairs from the last dim backwards, negative entries "
                        "crop. The output has self's suggested memory format (channels-last stays so); when "
                        "nothing grows it is a copy of the cropped view. RuntimeError for an odd length, more "
                        "pairs than dims, or a size below 1. See tensord.nn.functional.pad."),
    "scatter": ("A contiguous copy of ``self`` where, for every position i of ``index`` (int64, self's number of "
                "dims), out[i with dim replaced by index[i]] = src[i] (or ``value``). index may be smaller than "
                "src everywhere and than self outside ``dim``; src has self's dtype. RuntimeError for other "
                "dtypes or shapes; an index value outside [0, self.size(dim)) fails at the next sync point. "
                "With repeated indices the element written last in index order wins."),
})
OP_DOCS.update({
    "addmm": ("``beta * self + alpha * (mat1 @ mat2)``: mat1 [n, k], mat2 [k, m], self broadcast to [n, m]; "
              "the three tensors must have one dtype (RuntimeError 'self and mat2 must have the same dtype'), "
              "not bool. ``beta=0`` ignores self (NaN included). Integer dtypes take alpha/beta converted to "
              "the integer (1.5 -> 1), as PyTorch. The output is contiguous."),
    "baddbmm": ("``beta * self + alpha * bmm(batch1, batch2)``: batch1 [b, n, k], batch2 [b, k, m], self broadcast "
                "to [b, n, m]. The result has the batches' dtype (they must agree; PyTorch 1.13: an int64 self "
                "with float32 batches gives float32); ``beta=0`` ignores self. RuntimeError naming both dtypes "
                "when the batches differ, and PyTorch's 'Expected size for first two dimensions of batch2 "
                "tensor' on a shape mismatch. The output is contiguous."),
    "dot": ("Inner product of two 1-D tensors of the same length and dtype (a 0-dim tensor). RuntimeError as "
            "PyTorch: '1D tensors expected, but got 2D and 1D tensors', 'inconsistent tensor size, ...', "
            "'expected both vectors to have same dtype, but found Float and Double'."),
    "outer": ("Outer product of two 1-D tensors: [n] x [m] -> [n, m], ``self[:, None] * vec2`` with mul's "
              "type promotion (bool gives bool). RuntimeError 'Expected 1-D argument self, but got 2-D'."),
    "linear": ("``input @ weight.T + bias``: input [*, k], weight [n, k] (or [k]), bias broadcast to the "
               "output or None; gives [*, n], contiguous. Follows PyTorch 1.13's at::linear: a 2-D input (or a "
               "contiguous 3-D one) with a bias is addmm (input, weight and bias of one dtype), otherwise "
               "matmul then an in-place add of the bias (whose dtype must cast to the output's)."),
})
OP_DOCS.update({
    "conv2d": ("2-D convolution (cross-correlation) of ``input`` [N, C_in, H, W] or unbatched [C_in, H, W] with "
               "``weight`` [C_out, C_in / groups, kH, kW] plus optional ``bias`` [C_out]: gives [N, C_out, H_out, "
               "W_out] with H_out = (H + 2*padding - dilation*(kH-1) - 1) // stride + 1. float32/float64 only "
               "(same dtype for all three). The output is contiguous, or channels-last when the input or the "
               "weight is channels-last (PyTorch 1.13 CPU). RuntimeError with PyTorch's words for a channel / "
               "groups / bias mismatch, non-positive stride or dilation, negative padding, or a kernel larger "
               "than the padded input."),
    "convolution_backward": ("Gradients (grad_input, grad_weight, grad_bias) of a 2-D convolution for "
                             "``grad_output``: aten's convolution_backward without ``output_mask`` (all three "
                             "are computed; grad_bias [C_out] even when bias_sizes is None). 4-D input and weight "
                             "only; ``transposed=True`` or non-zero output_padding: NotImplementedError. "
                             "Differentiable (double backward through conv2d)."),
    "max_pool2d_with_indices": ("2-D max pooling of ``self`` [N, C, H, W] or [C, H, W] (float32/float64) with "
                                "``kernel_size``, ``stride`` (default: kernel_size), ``padding`` (at most half the "
                                "kernel), ``dilation`` and ``ceil_mode`` (PyTorch's output-size rule: the last "
                                "window must start inside the input or its left padding). Returns (values, "
                                "indices): indices (int64) are flat positions h * W + w within each input plane; "
                                "a NaN in the window wins. Outputs take the input's suggested memory format."),
    "max_pool2d_with_indices_backward": ("The gradient of max_pool2d_with_indices: zeros of ``self``'s sizes "
                                         "(its memory format) with each grad_output element added at its "
                                         "saved index."),
    "avg_pool2d": ("2-D average pooling of ``self`` [N, C, H, W] or [C, H, W] (float32/float64). Divisor: "
                   "``divisor_override`` when given, else the window size including padding "
                   "(``count_include_pad=True``) or only the in-bounds elements. Output size and errors as "
                   "max_pool2d_with_indices; the output takes the input's suggested memory format."),
    "avg_pool2d_backward": ("The gradient of avg_pool2d: each grad_output element divided by its window's "
                            "divisor and added to every input position of its window."),
})
OP_DOCS.update({
    "linspace": ("``steps`` values evenly spaced from ``start`` to ``end`` inclusive, as a 1-D contiguous "
                 "tensor (PyTorch's CPU rule: the first half counts up from start, the second down from end, so "
                 "both ends are exact). dtype: float32 by default even for int bounds (torch 1.13); an integer "
                 "``dtype=`` truncates start and end to it first, then truncates each value; bool and float8 "
                 "raise RuntimeError. RuntimeError for negative steps or a bound that does not fit the dtype "
                 "('value cannot be converted to type uint8_t without overflow'). device as the other factories."),
    "randint": ("Uniform random integers in [``low``, ``high``) (low defaults to 0: ``randint(high, size)`` "
                "or ``randint(low, high, size)``), of ``size``, drawn from the session's generator. dtype "
                "defaults to int64; any integer, bool or floating dtype but float8 (not differentiable). "
                "RuntimeError, with PyTorch's random_ wording, when low >= high or when low or high - 1 does not "
                "fit the dtype ('to - 1 is out of bounds for unsigned char'), even for an empty size."),
    "empty_strided": ("An uninitialised (in tensord: zero-filled) tensor with exactly the given ``size`` and "
                      "``stride`` (in elements) and storage_offset 0; its storage holds 1 + sum((size - 1) * "
                      "stride) elements, none when a size is 0. ``device='meta'`` allocates nothing (with "
                      "``tensord.TensorMeta`` it describes any layout). RuntimeError for negative sizes, a "
                      "stride list of another length, negative strides or a storage size that overflows, in "
                      "PyTorch's words. dtype defaults to float32; every dtype is accepted."),
})

# Named tuples for ops with several returns: tensord.return_types.topk, ...
return_types = types.ModuleType("tensord.return_types", "Named tuples returned by ops with several outputs.")


def _doc(name, entries, method):
    lines = []
    if method:
        lines.append(f"Tensor.{name}(...): the method form of tensord.{name}, with this tensor as ``self``.")
    desc = OP_DOCS.get(name)
    lines.append(desc if desc else f"The op {name!r} of the op table.")
    lines.append("")
    lines.append("Schemas (overloads are tried in this order; the first that accepts the arguments wins):")
    for e in entries:
        lines.append("    " + e["schema"])
    lines.append("")
    lines.append("Arguments are bound and the output shape, strides and dtype are computed locally before "
                 "anything is sent: TypeError for arguments no overload accepts, RuntimeError/IndexError for "
                 "shape and dtype errors, raised here at the call site. Errors that need data (e.g. an index "
                 "out of range inside a tensor) surface at the next sync point, naming the op and this call site.")
    return "\n".join(lines)


def _returns_type(name, entries):
    names = None
    for e in entries:
        if len(e["returns"]) > 1 and all(e["returns"]):
            names = tuple(e["returns"])
    if names is None:
        return None
    nt = collections.namedtuple(name, names)
    nt.__module__ = "tensord.return_types"
    nt.__doc__ = f"The outputs of {name}: " + ", ".join(names) + "."
    setattr(return_types, name, nt)
    return nt


def _make(name, entries, method, nt):
    call = _C.call_method if method else _C.call
    if nt is None:
        # A C callable (no Python frame per call); a method descriptor, so
        # Tensor.<name> binds like a function.
        fn = _C.OpFunction(name, "method" if method else "function")
    else:
        def fn(*args, **kwargs):
            r = call(name, *args, **kwargs)
            return nt(*r) if isinstance(r, tuple) else r
    fn.__name__ = name
    fn.__qualname__ = ("Tensor." + name) if method else name
    fn.__module__ = "tensord"  # pickle finds tensord.<name> and tensord.Tensor.<name> by these
    fn.__doc__ = _doc(name, entries, method)
    return fn


def install(module_dict, tensor_cls):
    """Adds a function to ``module_dict`` for every op with a function form and
    a method to ``tensor_cls`` for every op with a method form. Returns the
    base names installed as (functions, methods)."""
    by_name = {}
    for e in _C.op_table():
        by_name.setdefault(e["name"], []).append(e)
    functions, methods = [], []
    for name, entries in by_name.items():
        nt = _returns_type(name, entries)
        if any(e["is_function"] for e in entries):
            module_dict[name] = _make(name, [e for e in entries if e["is_function"]], False, nt)
            functions.append(name)
        if any(e["is_method"] for e in entries):
            setattr(tensor_cls, name, _make(name, [e for e in entries if e["is_method"]], True, nt))
            methods.append(name)
    return functions, methods
