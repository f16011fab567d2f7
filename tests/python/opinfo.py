"""The OpInfo-style sample database: for every op of the table (by full name),
sample inputs, error inputs and a reference.

To add an op: add an ``OpInfo`` (opinfo_base.py) to this file or to the
opinfo_*.py file of its family, with a few samples (NumPy arrays become
tensors; other values are passed as they are; ``D("float64")`` is a dtype),
error inputs (``ErrorInput(Sample(...), RuntimeError, "message part")``) and,
where NumPy has the op, an ``np_ref``. Every sample is also compared with
PyTorch 1.13 (values *and* dtype) through ``torch_ref`` (by default the torch
function or method of the same name). ``test_opinfo_completeness`` fails
while an op of the table has no entry here.
"""
import numpy as np
from opinfo_base import torch  # None without PyTorch (the GPU pack)

from opinfo_base import *  # noqa: F401,F403  (OpInfo, Sample, makers)
from opinfo_base import _default_torch, _sum_ref, _topk_torch  # noqa: F401

def _clamp_ref(x, lo, hi):
    """PyTorch's clamp: NaN in x or in a bound gives NaN; then max(x, lo), then min(., hi)."""
    arrays = [np.asarray(v) for v in (x, lo, hi) if v is not None]
    dtype = np.result_type(*arrays) if len(arrays) > 1 else np.asarray(x).dtype
    out = np.asarray(x)
    if lo is not None:
        out = np.where(np.isnan(out) | (out >= lo), out, lo) if out.dtype.kind == "f" else np.maximum(out, lo)
        if np.asarray(lo).dtype.kind == "f":
            out = np.where(np.isnan(lo), lo, out)
    if hi is not None:
        out = np.where(np.isnan(out) | (out <= hi), out, hi) if np.asarray(out).dtype.kind == "f" else np.minimum(out, hi)
        if np.asarray(hi).dtype.kind == "f":
            out = np.where(np.isnan(hi), hi, out)
    return np.asarray(out).astype(dtype, copy=False) if dtype.kind != "b" else np.asarray(out)


# ---------------------------------------------------------------- the database

OPINFOS = [
    # ---- factories
    OpInfo("empty", lambda r: [Sample([2, 3]), Sample([4], dtype=D("int64")), Sample([0, 2])], shape_only=True),
    OpInfo("zeros", lambda r: [Sample([2, 3]), Sample([3], dtype=D("int64")), Sample([]), Sample([0, 4])],
           np_ref=lambda size, dtype=None: np.zeros(size)),
    OpInfo("ones", lambda r: [Sample([2, 3]), Sample([3], dtype=D("bool")), Sample([2, 1, 2], dtype=D("float64"))],
           np_ref=lambda size, dtype=None: np.ones(size)),
    OpInfo("full", lambda r: [Sample([2, 2], 1.5), Sample([3], 7), Sample([2], True), Sample([2, 3], 2, dtype=D("float64"))],
           np_ref=lambda size, v, dtype=None: np.full(size, v)),
    OpInfo("arange", lambda r: [Sample(5), Sample(2.5), Sample(4, dtype=D("float64"))],
           np_ref=lambda end, dtype=None: np.arange(end)),
    OpInfo("arange.start", lambda r: [Sample(1, 10, 3), Sample(0.0, 1.0, 0.25), Sample(10, 0, -2), Sample(-3, 3)],
           np_ref=lambda s, e, st=1: np.arange(s, e, st)),
    OpInfo("rand", lambda r: [Sample([3, 4]), Sample([5], dtype=D("float64"))], random=True),
    OpInfo("randn", lambda r: [Sample([3, 4]), Sample([2, 2], dtype=D("float64"))], random=True),
    OpInfo("eye", lambda r: [Sample(3), Sample(2, 4), Sample(3, dtype=D("int64"))],
           np_ref=lambda n, m=None, dtype=None: np.eye(n, m)),
    OpInfo("empty_like", lambda r: [Sample(f32(r, 2, 3)), Sample(i64(r, 4), dtype=D("float32"))], shape_only=True),
    OpInfo("zeros_like", lambda r: [Sample(f32(r, 2, 3)), Sample(i64(r, 4), dtype=D("float64"))],
           np_ref=lambda x, dtype=None: np.zeros_like(x)),
    OpInfo("ones_like", lambda r: [Sample(f32(r, 2, 3)), Sample(bools(r, 4))], np_ref=lambda x, dtype=None: np.ones_like(x)),
    OpInfo("full_like", lambda r: [Sample(f32(r, 2, 3), 2.5), Sample(i64(r, 4), 3)],
           np_ref=lambda x, v, dtype=None: np.full_like(x, v)),
    OpInfo("rand_like", lambda r: [Sample(f32(r, 2, 3)), Sample(f64(r, 4))], random=True),
    OpInfo("randn_like", lambda r: [Sample(f32(r, 2, 3))], random=True),

    # ---- unary
    unary("neg", np.negative, ("f32", "i64", "f64", "f32_0d")),
    unary("abs", np.abs, ("f32", "i64", "i32")),
    unary("sign", np.sign, ("f32", "i64")),
    unary("floor", np.floor, ("f32", "f64")),
    unary("ceil", np.ceil, ("f32",)),
    unary("round", np.round, ("f32",)),
    unary("trunc", np.trunc, ("f32",)),
    unary("relu", lambda x: np.maximum(x, 0), ("f32", "i64")),
    unary("bitwise_not", np.invert, ("i64", "bool", "i32")),
    unary("exp", np.exp, ("f32", "f64", "i64", "nc11"), rtol=1e-5),
    unary("log", np.log, ("pos",)),
    unary("sqrt", np.sqrt, ("pos", "pos_1d"), rtol=1e-5),
    unary("rsqrt", lambda x: 1 / np.sqrt(x), ("pos",), rtol=1e-5),
    unary("sin", np.sin, ("f32", "f64"), rtol=1e-5),
    unary("cos", np.cos, ("f32",), rtol=1e-5),
    unary("tanh", np.tanh, ("f32",), rtol=1e-5),
    unary("sigmoid", lambda x: 1 / (1 + np.exp(-x.astype(np.float64))), ("f32",), rtol=1e-5),
    unary("reciprocal", lambda x: 1 / x.astype(np.float64), ("pos", "f64"), rtol=1e-6),
    OpInfo("logical_not", lambda r: [Sample(ints_as_f32(r, 3, 4)), Sample(bools(r, 5))], np_ref=np.logical_not),
    OpInfo("isnan", lambda r: [Sample(with_specials(r, 3, 4))], np_ref=np.isnan),
    OpInfo("isinf", lambda r: [Sample(with_specials(r, 3, 4))], np_ref=np.isinf),
    OpInfo("isfinite", lambda r: [Sample(with_specials(r, 3, 4)), Sample(i64(r, 3))], np_ref=np.isfinite),

    # ---- binary
    binary("add.Tensor", np.add, ("same", "broadcast", "mixed", "int", "zero_dim", "bool", "f16", "bf16_f16", "nc11")),
    OpInfo("add.Tensor", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4), alpha=2)],
           np_ref=lambda a, b, alpha=1: a + alpha * b),
    scalar_op("add.Scalar", np.add),
    binary("sub.Tensor", np.subtract, ("same", "broadcast", "mixed", "int")),
    scalar_op("sub.Scalar", np.subtract),
    scalar_op("rsub.Scalar", lambda x, s: s - x),
    binary("mul.Tensor", np.multiply, ("same", "broadcast", "mixed", "int", "bool", "f64_f32", "f16")),
    scalar_op("mul.Scalar", np.multiply),
    binary("div.Tensor", lambda a, b: a / b, ("same", "broadcast", "int"), rtol=1e-5),
    scalar_op("div.Scalar", lambda a, s: a / s, rtol=1e-5),
    binary("remainder.Tensor", np.remainder, ("int", "pos"), rtol=1e-5, atol=1e-5),
    scalar_op("remainder.Scalar", np.remainder, scalars=(2.5, 3, -2), rtol=1e-5, atol=1e-5),
    binary("pow.Tensor_Tensor", np.power, ("pos",), rtol=1e-5),
    scalar_op("pow.Tensor_Scalar", np.power, scalars=(2, 3, 0.5), tensor=lambda r: pos32(r, 3, 4), int_tensor=False,
              rtol=1e-5),
    OpInfo("pow.Scalar", lambda r: [Sample(2, f32(r, 3, 4)), Sample(1.5, f32(r, 4))],
           np_ref=lambda s, x: np.power(s, x.astype(np.float64)), rtol=1e-5),
    binary("maximum", np.maximum, ("same", "broadcast", "int", "bf16_0d_f32")),
    binary("minimum", np.minimum, ("same", "broadcast", "int")),
]

for _op, _fn in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                 ("gt", np.greater), ("ge", np.greater_equal)):
    OPINFOS.append(binary(f"{_op}.Tensor", _fn, ("ties", "broadcast", "mixed", "int")))
    OPINFOS.append(OpInfo(f"{_op}.Scalar", lambda r: [Sample(ints_as_f32(r, 3, 4), 1), Sample(i64(r, 5), 0.5),
                                                       Sample(f32(r, 2, 2), 0.0)], np_ref=_fn))

OPINFOS += [
    binary("logical_and", np.logical_and, ("ties", "bool", "broadcast")),
    binary("logical_or", np.logical_or, ("ties", "bool")),
    binary("logical_xor", np.logical_xor, ("ties", "bool")),
    binary("bitwise_and.Tensor", np.bitwise_and, ("int", "bool")),
    OpInfo("bitwise_and.Scalar", lambda r: [Sample(i64(r, 3, 4), 6), Sample(i32(r, 5), 3)], np_ref=np.bitwise_and),
    binary("bitwise_or.Tensor", np.bitwise_or, ("int", "bool")),
    OpInfo("bitwise_or.Scalar", lambda r: [Sample(i64(r, 3, 4), 6), Sample(i32(r, 5), 3)], np_ref=np.bitwise_or),
    binary("bitwise_xor.Tensor", np.bitwise_xor, ("int", "bool")),
    OpInfo("bitwise_xor.Scalar", lambda r: [Sample(i64(r, 3, 4), 6)], np_ref=np.bitwise_xor),
    OpInfo("where.self", lambda r: [Sample(bools(r, 3, 4), f32(r, 3, 4), f32(r, 3, 4)),
                                    Sample(bools(r, 3, 1), f32(r, 1, 4), i64(r, 3, 4))], np_ref=np.where),
    OpInfo("where.ScalarOther", lambda r: [Sample(bools(r, 3, 4), f32(r, 3, 4), 0.0),
                                           Sample(bools(r, 4), i64(r, 4), 2)], np_ref=np.where),
    OpInfo("where.ScalarSelf", lambda r: [Sample(bools(r, 3, 4), 1.0, f32(r, 3, 4))], np_ref=np.where),
    OpInfo("where.Scalar", lambda r: [Sample(bools(r, 3, 4), 1.0, 0.0), Sample(bools(r, 5), 1, 0)], np_ref=np.where),
    OpInfo("clamp", lambda r: [Sample(f32(r, 3, 4), -0.5, 0.5), Sample(f32(r, 3, 4), min=0.0),
                               Sample(i64(r, 5), max=2)],
           np_ref=lambda x, min=None, max=None: np.clip(x, min, max)),
    # tensor bounds broadcast with self and take part in type promotion; NaN in
    # self or in a bound gives NaN; min > max gives max
    OpInfo("clamp.Tensor", lambda r: [Sample(with_specials(r, 3, 4), f32(r, 3, 4) - 0.5, f32(r, 1, 4) + 0.5),
                                      Sample(f32(r, 3, 4), min=f32(r, 4)), Sample(f32(r, 3, 1), max=f32(r, 1, 4)),
                                      Sample(i64(r, 5), np.array(0.5, np.float32), i64(r, 5)),
                                      Sample(f32(r, 2, 3), f64(r, 2, 3), f32(r, 2, 3)),
                                      Sample(bools(r, 4), min=bools(r, 4)),
                                      Sample(np.array([1.0, 2.0, 5.0], np.float32), np.array([0.0, np.nan, 3.0], np.float32),
                                             np.array([2.0, 3.0, 1.0], np.float32))],
           np_ref=lambda x, min=None, max=None: _clamp_ref(x, min, max)),
    OpInfo("clamp_min", lambda r: [Sample(with_specials(r, 3, 4), 0.25), Sample(f64(r, 2, 3), -0.5), Sample(i64(r, 5), 2),
                                   Sample(i32(r, 4), 1.5)],
           np_ref=lambda x, b: _clamp_ref(x, b, None)),
    OpInfo("clamp_min.Tensor", lambda r: [Sample(with_specials(r, 3, 4), f32(r, 1, 4)), Sample(i64(r, 2, 3), f32(r, 3)),
                                          Sample(bools(r, 4), bools(r, 4))],
           np_ref=lambda x, b: _clamp_ref(x, b, None)),
    OpInfo("clamp_max", lambda r: [Sample(with_specials(r, 3, 4), 0.25), Sample(f32(r, 3, 4), 0.5), Sample(i64(r, 5), -1)],
           np_ref=lambda x, b: _clamp_ref(x, None, b)),
    OpInfo("clamp_max.Tensor", lambda r: [Sample(with_specials(r, 3, 4), f32(r, 3, 1)), Sample(f32(r, 2, 3), f32(r, 3)),
                                          Sample(i32(r, 2, 3), i64(r, 2, 3))],
           np_ref=lambda x, b: _clamp_ref(x, None, b)),
    OpInfo("masked_fill.Scalar", lambda r: [Sample(f32(r, 3, 4), bools(r, 3, 4), 0.0),
                                            Sample(i64(r, 3, 4), bools(r, 1, 4), 9)],
           np_ref=lambda x, m, v: np.where(m, v, x)),
    # a 0-dim value tensor of any dtype, converted to self's (1.75 into int64 gives 1)
    OpInfo("masked_fill.Tensor", lambda r: [Sample(f32(r, 3, 4), bools(r, 3, 4), np.array(2.5, np.float32)),
                                            Sample(f64(r, 2, 3), bools(r, 3), np.array(-1.0)),
                                            Sample(i64(r, 3, 4), bools(r, 1, 4), np.array(1.75, np.float32)),
                                            Sample(f32(r, 2, 3), bools(r, 2, 3), np.array(4, np.int64))],
           np_ref=lambda x, m, v: np.where(m, v.astype(x.dtype), x),
           errors=lambda r: [ErrorInput(Sample(f32(r, 3), bools(r, 3), f32(r, 1)), RuntimeError,
                                        "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                                        "with 1 dimension(s).")]),

    # ---- reductions
    OpInfo("sum", lambda r: [Sample(f32(r, 3, 4)), Sample(f32(r, 3, 4), 1), Sample(f32(r, 2, 3, 4), [0, 2], True),
                             Sample(i32(r, 3, 4), 0), Sample(bools(r, 5)), Sample(f32(r, 3, 4), -1, dtype=D("float64")),
                             Sample(f32(r, 2, 3), dim=None, keepdim=True)],
           np_ref=_sum_ref, rtol=1e-5),
    OpInfo("mean", lambda r: [Sample(f32(r, 3, 4)), Sample(f32(r, 3, 4), 0), Sample(f64(r, 2, 3, 4), [1, 2], True)],
           np_ref=lambda x, dim=None, keepdim=False, dtype=None:
               np.mean(x, axis=None if dim is None else tuple(np.atleast_1d(dim)), keepdims=keepdim), rtol=1e-5),
    OpInfo("amax", lambda r: [Sample(f32(r, 3, 4), 1), Sample(i64(r, 3, 4), [0, 1], True), Sample(f32(r, 2, 3)),
                              Sample(f32(r, 2, 3), dim=None, keepdim=True)],   # None is the default [] (torch's parser)
           np_ref=lambda x, dim=(), keepdim=False: np.amax(x, axis=tuple(np.atleast_1d(dim if dim is not None else ()))
                                                           or None, keepdims=keepdim)),
    OpInfo("amin", lambda r: [Sample(f32(r, 3, 4), 0), Sample(i64(r, 3, 4), -1, True)],
           np_ref=lambda x, dim=(), keepdim=False: np.amin(x, axis=tuple(np.atleast_1d(dim)) or None, keepdims=keepdim)),
    OpInfo("argmax", lambda r: [Sample(f32(r, 3, 4)), Sample(f32(r, 3, 4), 1), Sample(ints_as_f32(r, 4, 5), 0, True)],
           np_ref=lambda x, dim=None, keepdim=False: np.argmax(x, axis=dim, keepdims=keepdim)),
    OpInfo("argmin", lambda r: [Sample(f32(r, 3, 4)), Sample(i64(r, 3, 4), 1)],
           np_ref=lambda x, dim=None, keepdim=False: np.argmin(x, axis=dim, keepdims=keepdim)),
    OpInfo("max", lambda r: [Sample(f32(r, 3, 4)), Sample(i64(r, 5))], np_ref=np.max),
    OpInfo("max.dim", lambda r: [Sample(f32(r, 3, 4), 1), Sample(f32(r, 3, 4), 0, True)],
           np_ref=lambda x, d, k=False: (np.max(x, axis=d, keepdims=k), np.argmax(x, axis=d, keepdims=k))),
    OpInfo("min", lambda r: [Sample(f32(r, 3, 4))], np_ref=np.min),
    OpInfo("min.dim", lambda r: [Sample(f32(r, 3, 4), 1), Sample(i64(r, 2, 5) * 7 + np.arange(5), -1, True)],
           np_ref=lambda x, d, k=False: (np.min(x, axis=d, keepdims=k), np.argmin(x, axis=d, keepdims=k))),

    # ---- matmul
    OpInfo("matmul", lambda r: [Sample(f32(r, 3, 4), f32(r, 4, 5)), Sample(f32(r, 4), f32(r, 4)),
                                Sample(f32(r, 4), f32(r, 4, 3)), Sample(f32(r, 3, 4), f32(r, 4)),
                                Sample(f32(r, 2, 3, 4), f32(r, 4, 5)), Sample(f32(r, 2, 1, 3, 4), f32(r, 5, 4, 2)),
                                Sample(f64(r, 3, 4), f64(r, 4, 2))],
           np_ref=np.matmul, rtol=1e-5, atol=1e-5),
    OpInfo("mm", lambda r: [Sample(f32(r, 3, 4), f32(r, 4, 5)), Sample(f64(r, 1, 3), f64(r, 3, 2))], np_ref=np.matmul,
           rtol=1e-5, atol=1e-5),
    OpInfo("bmm", lambda r: [Sample(f32(r, 2, 3, 4), f32(r, 2, 4, 5))], np_ref=np.matmul, rtol=1e-5, atol=1e-5),

    # ---- views
    OpInfo("view", lambda r: [Sample(f32(r, 3, 4), [4, 3]), Sample(f32(r, 3, 4), [-1]), Sample(f32(r, 2, 3, 4), [6, -1])],
           np_ref=lambda x, s: x.reshape(s), noncontig=False),
    OpInfo("reshape", lambda r: [Sample(f32(r, 3, 4), [4, 3]), Sample(f32(r, 3, 4), [2, -1, 2]), Sample(f32(r, 2, 3), [6])],
           np_ref=lambda x, s: x.reshape(s)),
    OpInfo("transpose.int", lambda r: [Sample(f32(r, 3, 4), 0, 1), Sample(f32(r, 2, 3, 4), -1, 0)],
           np_ref=lambda x, a, b: np.swapaxes(x, a, b)),
    OpInfo("permute", lambda r: [Sample(f32(r, 2, 3, 4), [2, 0, 1]), Sample(f32(r, 3, 4), [1, 0])],
           np_ref=np.transpose),
    OpInfo("t", lambda r: [Sample(f32(r, 3, 4)), Sample(f32(r, 5))], np_ref=lambda x: x.T),
    OpInfo("slice.Tensor", lambda r: [Sample(f32(r, 3, 6), 1, 1, 5, 2), Sample(f32(r, 5, 4), 0, None, None, 2),
                                      Sample(f32(r, 5, 4), 0, -3), Sample(f32(r, 5, 4), 1, 1, 100)],
           np_ref=lambda x, d=0, s=None, e=None, st=1: x[(slice(None),) * d + (slice(s, e, st),)]),
    OpInfo("select.int", lambda r: [Sample(f32(r, 3, 4), 1, -1), Sample(f32(r, 3, 4), 0, 2)],
           np_ref=lambda x, d, i: np.take(x, i, axis=d)),
    # a view: dims dim1, dim2 go and the diagonal (stride s1 + s2) is appended
    OpInfo("diagonal", lambda r: [Sample(f32(r, 3, 4)), Sample(f32(r, 2, 3, 4), 1), Sample(f32(r, 2, 3, 4), -1, 2, 0),
                                  Sample(f32(r, 2, 3, 4), 1, -1, -2), Sample(f32(r, 3, 3), 5), Sample(i64(r, 4, 4), -4),
                                  Sample(f64(r, 1, 3, 3), 0, 1, 2)],
           np_ref=lambda x, offset=0, dim1=0, dim2=1: np.diagonal(x, offset, dim1, dim2),
           errors=lambda r: [ErrorInput(Sample(f32(r, 3, 4), 0, 1, 1), RuntimeError,
                                        "diagonal dimensions cannot be identical 1, 1"),
                             ErrorInput(Sample(f32(r, 3), 0, 0, 1), IndexError,
                                        "Dimension out of range (expected to be in range of [-1, 0], but got 1)")]),
    OpInfo("narrow", lambda r: [Sample(f32(r, 3, 6), 1, 1, 3), Sample(f32(r, 5, 2), 0, 0, 5)],
           np_ref=lambda x, d, s, n: np.take(x, range(s, s + n), axis=d)),
    OpInfo("expand", lambda r: [Sample(f32(r, 3, 1), [3, 4]), Sample(f32(r, 3), [2, 3]), Sample(f32(r, 1, 4), [-1, 4])],
           np_ref=lambda x, s: np.broadcast_to(x, [x.shape[i - (len(s) - x.ndim)] if v == -1 else v
                                                   for i, v in enumerate(s)])),
    OpInfo("squeeze", lambda r: [Sample(f32(r, 3, 1, 4, 1)), Sample(f32(r, 1))], np_ref=np.squeeze),
    OpInfo("squeeze.dim", lambda r: [Sample(f32(r, 3, 1, 4), 1), Sample(f32(r, 3, 4), 0)],
           np_ref=lambda x, d: np.squeeze(x, d) if x.shape[d] == 1 else x),
    OpInfo("unsqueeze", lambda r: [Sample(f32(r, 3, 4), 0), Sample(f32(r, 3, 4), -1), Sample(f32(r, 3, 4), 1)],
           np_ref=np.expand_dims),
    OpInfo("flatten.using_ints", lambda r: [Sample(f32(r, 2, 3, 4)), Sample(f32(r, 2, 3, 4), 1, 2)],
           np_ref=lambda x, s=0, e=-1: x.reshape(x.shape[:s] + (-1,) + x.shape[(e % x.ndim) + 1:])),

    # ---- copies
    OpInfo("contiguous", lambda r: [Sample(f32(r, 3, 4)), Sample(i64(r, 2, 5))], np_ref=lambda x: x),
    OpInfo("clone", lambda r: [Sample(f32(r, 3, 4)), Sample(bools(r, 4))], np_ref=np.copy),
    OpInfo("to.dtype", lambda r: [Sample(f32(r, 3, 4) * 10, D("int32")), Sample(i64(r, 5), D("float64")),
                                  Sample(f32(r, 3, 4), D("float16")), Sample(ints_as_f32(r, 4), D("bool")),
                                  Sample(f32(r, 3, 4), D("bfloat16")), Sample(f32(r, 2, 2), D("float32"))],
           rtol=1e-2, atol=1e-2),
    OpInfo("to.device", lambda r: [Sample(f32(r, 3, 4), "cpu"), Sample(i64(r, 3), "cpu", D("float64"))],
           np_ref=lambda x, dev, dtype=None: x),

    # ---- selection and joining
    OpInfo("topk", lambda r: [Sample(f32(r, 3, 6), 2), Sample(f32(r, 5, 4), 3, 0, False), Sample(f32(r, 7), 1)],
           torch_ref=_topk_torch, skip_layouts=("expanded",)),  # ties: index order unspecified
    OpInfo("gather", lambda r: [Sample(f32(r, 3, 4), 1, r.integers(0, 4, (3, 2))),
                                Sample(f32(r, 3, 4), 0, r.integers(0, 3, (2, 4)))],
           np_ref=lambda x, d, i: np.take_along_axis(x, i, d)),
    OpInfo("index_select", lambda r: [Sample(f32(r, 4, 3), 0, np.array([3, 0, 0])), Sample(f32(r, 4, 3), 1, np.array([2, 1]))],
           np_ref=lambda x, d, i: np.take(x, i, axis=d)),
    OpInfo("index.Tensor", lambda r: [Sample(f32(r, 5, 3), [np.array([4, 0, 2])]),
                                      Sample(f32(r, 5, 3), [None, np.array([[0, 2], [1, 1]])]),
                                      Sample(f32(r, 4, 3, 2), [np.array([0, 3]), np.array([1, 2])]),
                                      Sample(i64(r, 6), [np.array([[5, 0], [1, 1]])])],
           np_ref=lambda x, idx: x[tuple(slice(None) if i is None else i for i in idx)]),
    OpInfo("cat", lambda r: [Sample([f32(r, 2, 3), f32(r, 1, 3)]), Sample([f32(r, 2, 3), f32(r, 2, 2)], 1),
                             Sample([i64(r, 2), f32(r, 3)])],
           np_ref=lambda ts, dim=0: np.concatenate(ts, axis=dim)),
    OpInfo("stack", lambda r: [Sample([f32(r, 2, 3), f32(r, 2, 3)]), Sample([f32(r, 4), f32(r, 4), f32(r, 4)], 1)],
           np_ref=lambda ts, dim=0: np.stack(ts, axis=dim)),
    OpInfo("nonzero", lambda r: [Sample(ints_as_f32(r, 3, 4)), Sample(bools(r, 6)), Sample(np.zeros((2, 2), np.float32))],
           np_ref=lambda x: np.stack(np.nonzero(x), 1)),
    OpInfo("masked_select", lambda r: [Sample(f32(r, 3, 4), bools(r, 3, 4)), Sample(i64(r, 3, 4), bools(r, 4))],
           np_ref=lambda x, m: x[np.broadcast_to(m, x.shape)]),
]

# ---------------------------------------------------------------- in-place, nn and backward helpers

def _inplace_ref(fn):
    """NumPy reference of an in-place op: the out-of-place result cast to self's dtype."""
    return lambda self, *a, **k: np.asarray(fn(self, *a, **k)).astype(self.dtype)


def _erf(x):
    import math
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def _gelu_ref(x, approximate="none"):
    x = x.astype(np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return x * 0.5 * (1 + _erf(x / np.sqrt(2)))


def _softmax_ref(x, dim, dtype=None):
    x = x.astype(np.float64)
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax_ref(x, dim, dtype=None):
    x = x.astype(np.float64)
    m = np.max(x, axis=dim, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True))


def _scatter_add_ref(x, dim, index, src):
    out = x.copy()
    for i in np.ndindex(*index.shape):
        j = list(i)
        j[dim] = index[i]
        out[tuple(j)] += src[i]
    return out


def _index_add_ref(x, dim, index, source, alpha=1):
    out = x.copy()
    for k, i in enumerate(index):
        sel = [slice(None)] * x.ndim
        sel[dim] = i
        src = [slice(None)] * x.ndim
        src[dim] = k
        out[tuple(sel)] += alpha * source[tuple(src)]
    return out


def _index_put_ref(x, indices, values, accumulate=False):
    out = x.copy()
    key = tuple(slice(None) if i is None else i for i in indices)
    if accumulate:
        np.add.at(out, key, values)
    else:
        out[key] = values
    return out


def _masked_scatter_ref(x, mask, source):
    shape = np.broadcast_shapes(x.shape, mask.shape)
    out = np.broadcast_to(x, shape).copy()
    m = np.broadcast_to(mask, shape)
    out[m] = source.reshape(-1)[:int(m.sum())]
    return out


def _select_backward_ref(grad, sizes, dim, index):
    out = np.zeros(sizes, dtype=grad.dtype)
    sel = [slice(None)] * len(sizes)
    sel[dim] = index
    out[tuple(sel)] = grad
    return out


def _diagonal_backward_ref(grad, sizes, offset, dim1, dim2):
    out = np.zeros(sizes, dtype=grad.dtype)
    view = np.diagonal(out, offset, dim1, dim2)
    view.flags.writeable = True   # NumPy's diagonal is a read-only view of `out`
    view[...] = grad
    return out


def _slice_backward_ref(grad, sizes, dim, start, end, step):
    out = np.zeros(sizes, dtype=grad.dtype)
    sel = [slice(None)] * len(sizes)
    sel[dim] = slice(start, end, step)
    out[tuple(sel)] = grad
    return out


OPINFOS += [
    # ---- in-place (self is written and returned)
    OpInfo("add_.Tensor", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4)), Sample(f32(r, 3, 4), f32(r, 1, 4), alpha=2),
                                     Sample(f32(r, 2, 3), f64(r, 2, 3)), Sample(i64(r, 3, 2), i64(r, 3, 2)),
                                     Sample(f32(r, 2, 3), i64(r, 3))],
           np_ref=_inplace_ref(lambda a, b, alpha=1: a + alpha * b)),
    OpInfo("add_.Scalar", lambda r: [Sample(f32(r, 3, 4), 2.5), Sample(i64(r, 4), 3), Sample(f64(r, 2, 2), -1)],
           np_ref=_inplace_ref(lambda a, b, alpha=1: a + alpha * b)),
    OpInfo("sub_.Tensor", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4)), Sample(f32(r, 3, 4), f32(r, 4), alpha=0.5),
                                     Sample(i64(r, 2, 3), i64(r, 2, 3))],
           np_ref=_inplace_ref(lambda a, b, alpha=1: a - alpha * b)),
    OpInfo("sub_.Scalar", lambda r: [Sample(f32(r, 3, 4), 2.5), Sample(i64(r, 4), 3)],
           np_ref=_inplace_ref(lambda a, b, alpha=1: a - alpha * b)),
    OpInfo("mul_.Tensor", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4)), Sample(f32(r, 3, 4), f32(r, 3, 1)),
                                     Sample(i64(r, 2, 3), i64(r, 2, 3)), Sample(f64(r, 2, 3), f32(r, 2, 3))],
           np_ref=_inplace_ref(np.multiply)),
    OpInfo("mul_.Scalar", lambda r: [Sample(f32(r, 3, 4), -1.5), Sample(i64(r, 5), 2)], np_ref=_inplace_ref(np.multiply)),
    OpInfo("div_.Tensor", lambda r: [Sample(f32(r, 3, 4), pos32(r, 3, 4)), Sample(f64(r, 2, 3), pos32(r, 3))],
           np_ref=_inplace_ref(lambda a, b: a / b), rtol=1e-5),
    OpInfo("div_.Scalar", lambda r: [Sample(f32(r, 3, 4), 4), Sample(f64(r, 3), -0.5)],
           np_ref=_inplace_ref(lambda a, b: a / b), rtol=1e-5),
    OpInfo("clamp_", lambda r: [Sample(f32(r, 3, 4), -0.5, 0.5), Sample(f32(r, 3, 4), min=0.0),
                                Sample(i64(r, 5), max=2)],
           np_ref=_inplace_ref(lambda x, min=None, max=None: np.clip(x, min, max))),
    OpInfo("clamp_.Tensor", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4) - 0.5, f32(r, 4) + 0.5),
                                       Sample(f32(r, 3, 4), min=f64(r, 1, 4)), Sample(i64(r, 5), max=i64(r, 5))],
           np_ref=_inplace_ref(lambda x, min=None, max=None: _clamp_ref(x, min, max))),
    OpInfo("masked_fill_.Scalar", lambda r: [Sample(f32(r, 3, 4), bools(r, 3, 4), 0.0),
                                             Sample(i64(r, 3, 4), bools(r, 1, 4), 9)],
           np_ref=_inplace_ref(lambda x, m, v: np.where(m, v, x))),
    OpInfo("masked_fill_.Tensor", lambda r: [Sample(f32(r, 3, 4), bools(r, 3, 4), np.array(0.5, np.float32)),
                                             Sample(i64(r, 3, 4), bools(r, 1, 4), np.array(9, np.int64))],
           np_ref=_inplace_ref(lambda x, m, v: np.where(m, v.astype(x.dtype), x))),
    OpInfo("addcmul", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4), f32(r, 3, 4)),
                                 Sample(f32(r, 3, 1), f32(r, 1, 4), f32(r, 3, 4), value=0.5),
                                 Sample(i64(r, 2, 3), i64(r, 2, 3), i64(r, 2, 3), value=2),
                                 Sample(f32(r, 2, 3), i64(r, 2, 3), f64(r, 2, 3))],
           np_ref=lambda s, a, b, value=1: s + value * a * b, rtol=1e-5),
    OpInfo("addcmul_", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4), f32(r, 1, 4), value=2),
                                  Sample(f64(r, 2, 3), f64(r, 2, 3), f64(r, 3))],
           np_ref=_inplace_ref(lambda s, a, b, value=1: s + value * a * b), rtol=1e-5),
    OpInfo("addcdiv", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4), pos32(r, 3, 4)),
                                 Sample(f32(r, 3, 1), f32(r, 1, 4), pos32(r, 3, 4), value=-0.5),
                                 Sample(f64(r, 2, 3), i64(r, 2, 3), pos32(r, 2, 3))],
           np_ref=lambda s, a, b, value=1: s + value * a / b, rtol=1e-5),
    OpInfo("addcdiv_", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4), pos32(r, 3, 4), value=0.1),
                                  Sample(f32(r, 3), f32(r, 3), pos32(r, 3))],
           np_ref=_inplace_ref(lambda s, a, b, value=1: s + value * a / b), rtol=1e-5),
    OpInfo("copy_", lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4)), Sample(f32(r, 3, 4), f32(r, 4)),
                               Sample(i64(r, 2, 3), f64(r, 2, 3) * 4), Sample(f64(r, 2, 2), bools(r, 2, 2))],
           np_ref=lambda x, src: np.broadcast_to(src, x.shape).astype(x.dtype)),
    OpInfo("zero_", lambda r: [Sample(f32(r, 3, 4)), Sample(i64(r, 5))], np_ref=np.zeros_like),
    OpInfo("fill_.Scalar", lambda r: [Sample(f32(r, 3, 4), 2.5), Sample(i64(r, 4), 3), Sample(bools(r, 3), True)],
           np_ref=lambda x, v: np.full_like(x, v)),
    OpInfo("uniform_", lambda r: [Sample(f32(r, 3, 4)), Sample(f64(r, 5), -2.0, 3.0)], random=True),
    OpInfo("normal_", lambda r: [Sample(f32(r, 3, 4)), Sample(f64(r, 5), 1.0, 0.5)], random=True),

    # ---- forward ops for nn
    unary("erf", _erf, ("f32", "f64", "i64"), rtol=1e-5, atol=1e-6),
    OpInfo("gelu", lambda r: [Sample(f32(r, 3, 4)), Sample(f64(r, 2, 5), approximate="tanh"),
                              Sample(f32(r, 4), approximate="none")],
           np_ref=_gelu_ref, torch_ref=lambda *a, **k: torch.nn.functional.gelu(*a, **k), rtol=1e-5, atol=1e-6),
    OpInfo("softmax.int", lambda r: [Sample(f32(r, 3, 4), 1), Sample(f32(r, 2, 3, 4), 0),
                                     Sample(f32(r, 3, 4), -1, dtype=D("float64")), Sample(i64(r, 3, 4), 1, dtype=D("float32"))],
           np_ref=_softmax_ref, rtol=1e-5, atol=1e-6),
    OpInfo("log_softmax.int", lambda r: [Sample(f32(r, 3, 4), 1), Sample(f64(r, 2, 3, 4), 2), Sample(f32(r, 5), 0)],
           np_ref=_log_softmax_ref, rtol=1e-5, atol=1e-5),
    OpInfo("detach", lambda r: [Sample(f32(r, 3, 4)), Sample(i64(r, 5))], np_ref=lambda x: x),

    # ---- ops that derivative formulas call
    # An index smaller than src (last sample) is valid forward, but its src gradient has index's shape
    # (PyTorch 1.13 raises "ScatterAddBackward0 returned an invalid gradient" too), so floating samples
    # use an index of src's shape.
    OpInfo("scatter_add", lambda r: [Sample(f32(r, 3, 4), 0, r.integers(0, 3, (2, 4)), f32(r, 2, 4)),
                                     Sample(f32(r, 3, 4), 1, r.integers(0, 4, (3, 2)), f32(r, 3, 2)),
                                     Sample(i64(r, 4), 0, np.array([0, 3, 0]), i64(r, 3)),
                                     Sample(i64(r, 3, 4), 1, r.integers(0, 4, (3, 2)), i64(r, 3, 5))],
           np_ref=_scatter_add_ref, rtol=1e-5),
    OpInfo("index_add", lambda r: [Sample(f32(r, 4, 3), 0, np.array([3, 0, 0]), f32(r, 3, 3)),
                                   Sample(f32(r, 4, 3), 1, np.array([2, 1]), f32(r, 4, 2), alpha=2),
                                   Sample(i64(r, 5), 0, np.array([4, 4]), i64(r, 2))],
           np_ref=_index_add_ref, rtol=1e-5),
    OpInfo("index_put", lambda r: [Sample(f32(r, 5, 3), [np.array([4, 0, 2])], f32(r, 3, 3)),
                                   Sample(f32(r, 5, 3), [None, np.array([0, 2])], f32(r, 5, 2)),
                                   Sample(f32(r, 5, 3), [np.array([1, 1, 3])], f32(r, 3), True),
                                   Sample(f32(r, 3, 4), [np.array([0, 2]), np.array([3, 1])], f32(r, 2)),
                                   Sample(f32(r, 3, 4), [bools(r, 3, 4)], np.array(7.0, dtype=np.float32))],
           np_ref=_index_put_ref,
           torch_ref=lambda x, idx, v, acc=False: torch.ops.aten.index_put(x, idx, v, acc)),
    OpInfo("masked_scatter", lambda r: [Sample(f32(r, 3, 4), bools(r, 3, 4), f32(r, 12)),
                                        Sample(f32(r, 4), bools(r, 3, 4), f32(r, 3, 4)),
                                        Sample(i64(r, 2, 3), bools(r, 2, 3), i64(r, 7))],
           np_ref=_masked_scatter_ref),
    OpInfo("select_backward", lambda r: [Sample(f32(r, 3), [4, 3], 0, 2), Sample(f32(r, 4), [4, 3], 1, -1),
                                         Sample(f64(r, 2, 3), [2, 5, 3], 1, 0)],
           np_ref=_select_backward_ref, torch_ref=lambda *a: torch.ops.aten.select_backward(*a)),
    OpInfo("slice_backward", lambda r: [Sample(f32(r, 2, 4), [5, 4], 0, 1, 5, 2), Sample(f32(r, 3, 2), [3, 6], 1, 0, 100, 3),
                                        Sample(f64(r, 1, 3), [4, 3], 0, -1, 4, 1)],
           np_ref=_slice_backward_ref, torch_ref=lambda *a: torch.ops.aten.slice_backward(*a)),
    OpInfo("diagonal_backward", lambda r: [Sample(f32(r, 3), [3, 4], 0, 0, 1), Sample(f32(r, 2, 2), [2, 3, 4], 1, -1, 1),
                                           Sample(f64(r, 3, 1), [2, 4, 3], -1, 0, 1), Sample(f32(r, 0), [2, 3], 5, 0, 1)],
           np_ref=_diagonal_backward_ref, torch_ref=lambda *a: torch.ops.aten.diagonal_backward(*a)),
]


_ADAM = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, step=1)


def _fused_adam_ref(p, g, m, v, lr, beta1, beta2, weight_decay, eps, step, maximize=False,
                    decoupled_weight_decay=False):
    """PyTorch 1.13's single-tensor Adam/AdamW step in float64: (param, exp_avg, exp_avg_sq)."""
    dt = p.dtype
    p, g, m, v = (np.asarray(x, np.float64) for x in (p, g, m, v))
    g = -g if maximize else g
    if weight_decay and decoupled_weight_decay:
        p = p * (1 - lr * weight_decay)
    elif weight_decay:
        g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    denom = np.sqrt(v) / np.sqrt(1 - beta2 ** step) + eps
    p = p - lr / (1 - beta1 ** step) * m / denom
    return p.astype(dt), m.astype(dt), v.astype(dt)


# ---------------------------------------------------------------- error inputs
# Calls that must fail, the same way on real and on meta tensors.

def _z(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


_ERRORS = {
    "zeros": [ErrorInput(Sample([-1, 2]), RuntimeError, "negative dimension -1")],
    "add.Tensor": [ErrorInput(Sample(_z(2, 3), _z(4, 3)), RuntimeError,
                              "The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 0")],
    "mul.Tensor": [ErrorInput(Sample(_z(2, 3), _z(3, 2)), RuntimeError, "must match the size of tensor b")],
    "clamp.Tensor": [ErrorInput(Sample(_z(3), _z(4)), RuntimeError,
                                "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0"),
                     ErrorInput(Sample(_z(3), None, None), RuntimeError, "At least one of 'min' or 'max' must not be None"),
                     ErrorInput(Sample(_z(2, dtype=np.bool_), _z(2, dtype=np.bool_), _z(2, dtype=np.bool_)), RuntimeError,
                                "not implemented for 'Bool'")],
    "clamp_min": [ErrorInput(Sample(_z(2, dtype=np.bool_), True), RuntimeError, "not implemented for 'Bool'")],
    "clamp_.Tensor": [ErrorInput(Sample(_z(3, dtype=np.int64), _z(3)), RuntimeError,
                                 "result type Float can't be cast to the desired output type Long")],
    "where.self": [ErrorInput(Sample(_z(2, 3, dtype=np.bool_), _z(2, 3), _z(4, 3)), RuntimeError,
                              "must match the size of tensor b (4)")],
    "neg": [ErrorInput(Sample(_z(2, dtype=np.bool_)), RuntimeError, "on a bool tensor is not supported")],
    "bitwise_and.Tensor": [ErrorInput(Sample(_z(2), _z(2)), RuntimeError, "not implemented for 'Float'")],
    "masked_fill.Scalar": [ErrorInput(Sample(_z(2, 3), _z(2, 3), 1.0), RuntimeError, "only supports boolean masks")],
    "add_.Tensor": [ErrorInput(Sample(_z(3), _z(2, 3)), RuntimeError,
                               "output with shape [3] doesn't match the broadcast shape [2, 3]")],
    "mul_.Tensor": [ErrorInput(Sample(_z(3, dtype=np.int64), _z(3)), RuntimeError,
                               "result type Float can't be cast to the desired output type Long")],
    "sum": [ErrorInput(Sample(_z(2, 3), 2), IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 2)")],
    "max.dim": [ErrorInput(Sample(_z(2, 3), 4), IndexError, "Dimension out of range")],
    "argmax": [ErrorInput(Sample(_z(0, 3)), IndexError, "Expected reduction dim to be specified for input.numel() == 0")],
    "softmax.int": [ErrorInput(Sample(_z(2, 3), 3), IndexError, "Dimension out of range")],
    "topk": [ErrorInput(Sample(_z(2, 3), 5), RuntimeError, "selected index k out of range")],
    "mm": [ErrorInput(Sample(_z(8, 4), _z(3, 2)), RuntimeError, "size mismatch, self is [8, 4], mat2 is [3, 2] (4 != 3)")],
    "matmul": [ErrorInput(Sample(_z(2, 8, 4), _z(3, 2)), RuntimeError, "size mismatch")],
    "bmm": [ErrorInput(Sample(_z(2, 3, 4), _z(3, 4, 2)), RuntimeError, "batch size mismatch"),
            ErrorInput(Sample(_z(2, 3, 4, dtype=np.float16), _z(2, 4, 2)), RuntimeError,
                       "expected scalar type Half but found Float")],
    "view": [ErrorInput(Sample(_z(2, 3), [4, 2]), RuntimeError, "is invalid for input of size 6")],
    "reshape": [ErrorInput(Sample(_z(2, 3), [4, 2]), RuntimeError, "shape '[4, 2]' is invalid for input of size 6")],
    "transpose.int": [ErrorInput(Sample(_z(2, 3), 0, 5), IndexError, "Dimension out of range")],
    "permute": [ErrorInput(Sample(_z(2, 3), [0, 0]), RuntimeError, "duplicate dims are not allowed")],
    "select.int": [ErrorInput(Sample(_z(2, 3), 1, 7), IndexError, "index 7 out of range")],
    "expand": [ErrorInput(Sample(_z(2, 3), [4, 3]), RuntimeError, "must match the existing size (2) at non-singleton dimension 0")],
    "cat": [ErrorInput(Sample([_z(2, 3), _z(2, 4)], 0), RuntimeError, "Sizes of tensors must match except in dimension 0")],
    "stack": [ErrorInput(Sample([_z(2, 3), _z(3, 2)]), RuntimeError, "stack expects each tensor to be equal size")],
    "gather": [ErrorInput(Sample(_z(2, 3), 1, _z(2, 2)), RuntimeError, "Expected dtype int64 for index")],
    "index_select": [ErrorInput(Sample(_z(2, 3), 0, np.array([5])), IndexError, "index 5 is out of bounds for dimension 0",
                                data_dependent=True)],
}
for _info in OPINFOS:
    if _info.name in _ERRORS:
        _info.errors = (lambda errs: lambda rng: errs)(_ERRORS[_info.name])

# The families added later live in their own files.
from opinfo_pointwise import OPINFOS as _POINTWISE  # noqa: E402
from opinfo_reduction import OPINFOS as _REDUCTION  # noqa: E402
from opinfo_shape import OPINFOS as _SHAPE  # noqa: E402
from opinfo_nn import OPINFOS as _NN  # noqa: E402
from opinfo_factory import OPINFOS as _FACTORY  # noqa: E402
from opinfo_matmul import OPINFOS as _MATMUL  # noqa: E402

OPINFOS += _POINTWISE + _REDUCTION + _SHAPE + _NN + _FACTORY + _MATMUL

# Fused optimizer steps.
OPINFOS.append(OpInfo(
    "_fused_adam_", lambda r: [
        Sample(f32(r, 3, 4), f32(r, 3, 4), f32(r, 3, 4), pos32(r, 3, 4), **_ADAM),
        Sample(f32(r, 5), f32(r, 5), f32(r, 5), pos32(r, 5), **dict(_ADAM, step=3, weight_decay=0.1, maximize=True)),
        Sample(f64(r, 2, 3), f64(r, 2, 3), f64(r, 2, 3), f64(r, 2, 3) ** 2,
               **dict(_ADAM, step=2, weight_decay=0.05, decoupled_weight_decay=True))],
    np_ref=_fused_adam_ref, torch_ref=None, rtol=1e-5, noncontig=False, errors=lambda r: [
        ErrorInput(Sample(_z(2, 3), _z(2, 3), _z(3, 2), _z(2, 3), **_ADAM), RuntimeError,
                   "_fused_adam_: exp_avg has sizes [3, 2], self has [2, 3]"),
        ErrorInput(Sample(_z(2, 3), _z(2, 3, dtype=np.float64), _z(2, 3), _z(2, 3), **_ADAM), RuntimeError,
                   "_fused_adam_: grad is float64, self is float32"),
        ErrorInput(Sample(*(_z(3, dtype=np.int64) for _ in range(4)), **_ADAM), RuntimeError,
                   "expected a float32 or float64 parameter, got int64")]))

BY_NAME = {}
for _info in OPINFOS:
    BY_NAME.setdefault(_info.name, []).append(_info)
