"""OpInfo entries of reductions and scans; see opinfo.py for how to add one.

Covers nansum, prod, var/std (every overload), norm / linalg_vector_norm,
logsumexp, all/any, cumsum/cumprod, and sum/mean over dim=() / [] (PyTorch
1.13 reduces every dim). Samples include batch-norm-like statistics (var and
mean over dims (0, 2, 3) of a 4-D input; the test's non-contiguous layout
transposes it), integer and bool inputs where the op takes them, 0-dim and
size-0 inputs, keepdim and dtype= variants."""
import numpy as np
from opinfo_base import torch  # None without PyTorch (the GPU pack)

from opinfo_base import *  # noqa: F401,F403


def _axis(dim):
    """A NumPy axis from a tensord dim argument (None, [] and () mean every dim)."""
    if dim is None:
        return None
    dims = tuple(np.atleast_1d(dim).tolist())
    return dims or None


def _nansum_ref(x, dim=None, keepdim=False, dtype=None):
    return np.nansum(x, axis=_axis(dim), keepdims=keepdim)


def _prod_ref(x, dtype=None):
    r = np.prod(x.astype(np.int64) if x.dtype.kind in "biu" else x.astype(np.float64))
    return np.asarray(r).astype(dtype) if dtype else np.asarray(r)


def _prod_dim_ref(x, dim, keepdim=False, dtype=None):
    r = np.prod(x.astype(np.int64) if x.dtype.kind in "biu" else x.astype(np.float64),
                axis=dim if x.ndim else None, keepdims=keepdim and x.ndim > 0)
    return np.asarray(r).astype(dtype) if dtype else np.asarray(r)


def _var_ref(std):
    def ref(x, dim=None, unbiased=True, keepdim=False, correction=None):
        if isinstance(dim, bool):   # var(self, unbiased)
            dim, unbiased = None, dim
        ddof = (1 if unbiased else 0) if correction is None else correction
        if x.ndim == 0:
            dim = None
        with np.errstate(all="ignore"):
            x64 = x.astype(np.float64)
            n = x64.size if _axis(dim) is None else int(np.prod([x.shape[d] for d in _axis(dim)]))
            mean = np.mean(x64, axis=_axis(dim), keepdims=True) if x.size else np.zeros_like(x64)
            v = np.sum((x64 - mean) ** 2, axis=_axis(dim), keepdims=keepdim) / max(n - ddof, 0)
        return np.sqrt(v) if std else v
    return ref


def _norm_np(x, p=2, dim=None, keepdim=False, dtype=None):
    a = np.abs(x.astype(np.float64))
    ax = _axis(dim)
    if a.size == 0:
        return np.zeros(np.sum(a, axis=ax, keepdims=keepdim).shape)
    p = 2.0 if p is None else float(p)
    if p == np.inf:
        return np.max(a, axis=ax, keepdims=keepdim)
    if p == -np.inf:
        return np.min(a, axis=ax, keepdims=keepdim)
    if p == 0:
        return np.sum(a != 0, axis=ax, keepdims=keepdim).astype(np.float64)
    return np.sum(a ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)


def _norm_scalar_ref(x, p=2):
    return _norm_np(x, p)


def _norm_dim_ref(x, p, dim, keepdim=False, dtype=None):
    return _norm_np(x, p, dim, keepdim)


def _vector_norm_ref(x, ord=2, dim=None, keepdim=False, dtype=None):
    return _norm_np(x, ord, dim, keepdim)


def _logsumexp_ref(x, dim, keepdim=False):
    x64 = x.astype(np.float64)
    ax = _axis(dim) if x.ndim else None
    m = np.max(x64, axis=ax, keepdims=True) if x.size else np.zeros([1] * x.ndim)
    m = np.where(np.isinf(m), 0, m)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x64 - m), axis=ax, keepdims=True)) + m
    return r if keepdim else (r.reshape(()) if ax is None else np.squeeze(r, axis=ax))


def _all_any_ref(fn):
    def ref(x, dim=None, keepdim=False):
        if x.ndim == 0:
            return np.asarray(fn(x))
        return fn(x, axis=dim, keepdims=keepdim)
    return ref


def _scan_ref(fn):
    def ref(x, dim, dtype=None):
        if x.ndim == 0:
            return x.astype(np.int64) if x.dtype.kind in "biu" else x.copy()
        acc = np.int64 if x.dtype.kind in "biu" else np.float64
        return fn(x.astype(acc), axis=dim)
    return ref


def _bn_input(r):
    """An (N, C, H, W) activation: batch-norm statistics reduce (0, 2, 3)."""
    return f32(r, 4, 3, 2, 5)


def _zeros_in(r):
    a = f64(r, 3, 4)
    a[0, 1] = 0.0           # one zero in row 0
    a[2, 0] = a[2, 3] = 0   # two zeros in row 2
    return a


def _nan_in(r):
    a = f32(r, 3, 4)
    a[0, 0] = a[2, 3] = np.nan
    return a


def _var_errors(op):
    return lambda r: [
        ErrorInput(Sample(i64(r, 3, 4), 1, correction=1), RuntimeError, "std and var only support floating point"),
        ErrorInput(Sample(bools(r, 3), None, correction=0), RuntimeError, "std and var only support floating point"),
        ErrorInput(Sample(f32(r, 3, 4), 2, correction=1), IndexError, "Dimension out of range"),
        ErrorInput(Sample(f32(r, 3, 4), [0, 0], correction=1), RuntimeError, "appears multiple times"),
    ]


def _var_infos(op):
    std = op == "std"
    ref = _var_ref(std)
    return [
        OpInfo(f"{op}.correction", lambda r: [
            Sample(f32(r, 3, 4), 1, correction=1),
            Sample(f32(r, 3, 4), None, correction=0, keepdim=True),
            Sample(_bn_input(r), [0, 2, 3], correction=0, keepdim=True),    # batch-norm statistics
            Sample(_bn_input(r), [0, 2, 3], correction=None),
            Sample(f64(r, 2, 3, 4), [-1, 0], correction=2),
            Sample(f32(r, 3, 4), [], correction=1),                         # [] reduces every dim
            Sample(f32(r, 3, 4), (), correction=1, keepdim=True),
            Sample(np.array(1.5, dtype=np.float32), 0, correction=0),       # 0-dim
            Sample(f32(r, 3, 1), 1, correction=0, keepdim=True),            # one element, no correction
            Sample(f32(r, 3, 4).astype(np.float16), 0, correction=1),
        ], np_ref=ref, rtol=1e-5, errors=_var_errors(op)),
        OpInfo(f"{op}.dim", lambda r: [
            Sample(f32(r, 3, 4), 1),
            Sample(f32(r, 3, 4), 0, False),
            Sample(_bn_input(r), [0, 2, 3], False, True),
            Sample(f64(r, 2, 3), None, True, True),
            Sample(Cast(f32(r, 3, 4), "bfloat16"), 1, True),
        ], np_ref=ref, rtol=1e-5),
        OpInfo(op, lambda r: [Sample(f32(r, 3, 4)), Sample(f64(r, 2, 5), False), Sample(f32(r, 7), True)],
               np_ref=ref, rtol=1e-5),
    ]


def _norm_errors(r):
    return [
        ErrorInput(Sample(i64(r, 3, 4), 2), RuntimeError, "input dtype should be either floating point"),
        ErrorInput(Sample(bools(r, 3), 1), RuntimeError, "input dtype should be either floating point"),
    ]


OPINFOS = [
    # sum / mean over dim=() and dim=[]: every dim, as PyTorch 1.13.
    OpInfo("sum", lambda r: [Sample(f32(r, 3, 4), (), True), Sample(f32(r, 3, 4), []), Sample(i32(r, 2, 3), (), True),
                             Sample(_bn_input(r), [0, 2, 3], True)],
           np_ref=lambda x, dim=None, keepdim=False, dtype=None: np.sum(x, axis=_axis(dim), keepdims=keepdim),
           rtol=1e-5),
    OpInfo("mean", lambda r: [Sample(f32(r, 3, 4), (), True), Sample(f64(r, 2, 3), []),
                              Sample(_bn_input(r), [0, 2, 3], True), Sample(_bn_input(r), [0, 2, 3])],
           np_ref=lambda x, dim=None, keepdim=False, dtype=None: np.mean(x, axis=_axis(dim), keepdims=keepdim),
           rtol=1e-5),
    OpInfo("nansum", lambda r: [
        Sample(_nan_in(r)), Sample(_nan_in(r), 1), Sample(_nan_in(r), [0, 1], True), Sample(_nan_in(r), (), True),
        Sample(f32(r, 3, 4), [], False), Sample(i32(r, 3, 4), 0), Sample(bools(r, 5)), Sample(i64(r, 2, 3), (), True),
        Sample(_nan_in(r), 0, dtype=D("float64")), Sample(f32(r, 0, 3), 0), Sample(np.array(2.5, dtype=np.float32)),
        Sample(f32(r, 3, 4).astype(np.float16), 1),
    ], np_ref=_nansum_ref, rtol=1e-5,
        errors=lambda r: [ErrorInput(Sample(f32(r, 3), dtype=D("int32")), RuntimeError, "not implemented for 'Int'"),
                          ErrorInput(Sample(f32(r, 3, 4), 2), IndexError, "Dimension out of range")]),
    OpInfo("prod", lambda r: [
        Sample(pos32(r, 3, 4)), Sample(i32(r, 2, 3)), Sample(bools(r, 4)), Sample(pos32(r, 3, 4), dtype=D("float64")),
        Sample(np.array(1.5, dtype=np.float32)), Sample(f32(r, 0, 3)), Sample(_zeros_in(r)),
        Sample(i64(r, 3, 4), dtype=D("int32")),
    ], np_ref=_prod_ref, rtol=1e-5,
        errors=lambda r: [ErrorInput(Sample(f32(r, 3).astype(np.float16)), RuntimeError, "not implemented for 'Half'"),
                          ErrorInput(Sample(f32(r, 3), dtype=D("bfloat16")), RuntimeError, "not implemented for 'BFloat16'")]),
    OpInfo("prod.dim_int", lambda r: [
        Sample(pos32(r, 3, 4), 1), Sample(pos32(r, 3, 4), 0, True), Sample(i32(r, 2, 3), -1), Sample(bools(r, 3, 2), 0),
        Sample(f64(r, 2, 3, 4), 1, True, dtype=D("float32")), Sample(np.array(2.0, dtype=np.float32), 0, True),
        Sample(f32(r, 0, 3), 0), Sample(f32(r, 0, 3), 1, True), Sample(_zeros_in(r), 1), Sample(_zeros_in(r), 0, True),
    ], np_ref=_prod_dim_ref, rtol=1e-5,
        errors=lambda r: [ErrorInput(Sample(f32(r, 3, 4), 2), IndexError, "Dimension out of range"),
                          ErrorInput(Sample(np.array(1.0, dtype=np.float32), 1), IndexError, "Dimension out of range")]),
    *_var_infos("var"),
    *_var_infos("std"),
    OpInfo("norm.Scalar", lambda r: [
        Sample(f32(r, 3, 4)), Sample(f32(r, 3, 4), 1), Sample(f64(r, 5), 3), Sample(f32(r, 2, 3), float("inf")),
        Sample(f32(r, 2, 3), float("-inf")), Sample(f32(r, 4), 0), Sample(f64(r, 2, 3), 0.5),
        Sample(np.array(-2.0, dtype=np.float32), 1), Sample(f32(r, 0, 3), float("inf")),
        Sample(f32(r, 3, 4).astype(np.float16)),
    ], np_ref=_norm_scalar_ref, torch_ref=lambda *a, **k: torch.ops.aten.norm.Scalar(*a, **k), rtol=1e-5,
        errors=_norm_errors),
    OpInfo("norm.ScalarOpt_dim", lambda r: [
        Sample(f32(r, 3, 4), 2, [1]), Sample(f32(r, 3, 4), None, [0], True), Sample(f64(r, 2, 3, 4), 1, [0, 2]),
        Sample(f32(r, 3, 4), float("inf"), 1, True), Sample(f32(r, 3, 4), 3, []), Sample(f32(r, 0, 3), 2, [0]),
    ], np_ref=_norm_dim_ref, torch_ref=lambda *a, **k: torch.ops.aten.norm.ScalarOpt_dim(*a, **k), rtol=1e-5,
        errors=lambda r: [ErrorInput(Sample(i64(r, 3, 4), 2, [0]), RuntimeError, "input dtype should be either"),
                          ErrorInput(Sample(f32(r, 3, 4), 2, [0, 0]), RuntimeError, "appears multiple times")]),
    OpInfo("norm.ScalarOpt_dim_dtype", lambda r: [
        Sample(f32(r, 3, 4), 2, [1], False, dtype=D("float64")), Sample(f64(r, 3, 4), 1, [0], True, dtype=D("float32")),
    ], np_ref=_norm_dim_ref, torch_ref=lambda *a, **k: torch.ops.aten.norm.ScalarOpt_dim_dtype(*a, **k), rtol=1e-5,
        errors=lambda r: [ErrorInput(Sample(f32(r, 3, 4), 2, [1], False, dtype=D("int64")), RuntimeError,
                                     "desired output dtype should be either floating point")]),
    OpInfo("linalg_vector_norm", lambda r: [
        Sample(f32(r, 3, 4)), Sample(f32(r, 3, 4), 1, 1), Sample(f64(r, 2, 3, 4), 2, [0, 2], True),
        Sample(f32(r, 3, 4), float("inf"), (0, 1)), Sample(f32(r, 3, 4), float("-inf"), -1, True),
        Sample(f32(r, 3, 4), 0, 0), Sample(f32(r, 3, 4), 3.5), Sample(f32(r, 3, 4), 2, None, False, dtype=D("float64")),
        Sample(f32(r, 0, 3), 2, 0), Sample(f32(r, 0, 3), float("inf"), 1), Sample(np.array(3.0, dtype=np.float32)),
        Sample(Cast(f32(r, 3, 4), "bfloat16"), 2, 1),
    ], np_ref=_vector_norm_ref, torch_ref=lambda *a, **k: torch.linalg.vector_norm(*a, **k), rtol=1e-5,
        errors=lambda r: [
            ErrorInput(Sample(i64(r, 3)), RuntimeError, "Expected a floating point or complex tensor as input"),
            ErrorInput(Sample(f64(r, 3), dtype=D("float32")), RuntimeError, "convertible without narrowing"),
            ErrorInput(Sample(f32(r, 0, 3), float("inf")), RuntimeError, "on an empty tensor"),
            ErrorInput(Sample(f32(r, 0, 3), -1, 0), RuntimeError, "on the dimension 0"),
        ]),
    OpInfo("logsumexp", lambda r: [
        Sample(f32(r, 3, 4), 1), Sample(f32(r, 3, 4), [0, 1], True), Sample(f64(r, 2, 3, 4), (0, 2)),
        Sample(i64(r, 3, 4), 0), Sample(bools(r, 3, 4), 1, True), Sample(f32(r, 3, 4) * 1000, 1),   # stable
        Sample(np.array(1.5, dtype=np.float32), 0), Sample(f32(r, 3, 4), (), True), Sample(f32(r, 0, 3), 0),
        Sample(Cast(f32(r, 3, 4), "bfloat16"), 1),
        Sample(f32(r, 0, 3), ()), Sample(f32(r, 2, 0), (), True), Sample(f32(r, 0), ()),  # empty: -inf
    ], np_ref=_logsumexp_ref, rtol=1e-5,
        errors=lambda r: [
            ErrorInput(Sample(f32(r, 3).astype(np.float16), 0), RuntimeError, "not implemented for 'Half'"),
            ErrorInput(Sample(f32(r, 3, 4), ()), RuntimeError, "doesn't match the broadcast shape [1, 1]"),
            ErrorInput(Sample(f32(r, 3, 4), 3), IndexError, "Dimension out of range"),
        ]),
    OpInfo("all", lambda r: [Sample(bools(r, 3, 4)), Sample(np.ones((3, 4), bool)), Sample(f32(r, 3, 4)),
                             Sample(i64(r, 2, 3)), Sample(i32(r, 4, 3).astype(np.uint8)), Sample(f32(r, 0, 3)),
                             Sample(np.array(np.nan, dtype=np.float32)), Sample(f32(r, 3, 4).astype(np.float16))],
           np_ref=_all_any_ref(np.all)),
    OpInfo("all.dim", lambda r: [Sample(bools(r, 3, 4), 1), Sample(bools(r, 3, 4) | True, 0, True),
                                 Sample(i64(r, 2, 3, lo=0, hi=3), -1), Sample(i32(r, 4, 3).astype(np.uint8), 0),
                                 Sample(f32(r, 0, 3), 0), Sample(f32(r, 0, 3), 1, True), Sample(np.array(0.0), 0)],
           np_ref=_all_any_ref(np.all),
           errors=lambda r: [ErrorInput(Sample(bools(r, 3, 4), 2), IndexError, "Dimension out of range")]),
    OpInfo("any", lambda r: [Sample(bools(r, 3, 4)), Sample(np.zeros((3, 4), bool)), Sample(f32(r, 3, 4)),
                             Sample(i32(r, 4, 3).astype(np.uint8)), Sample(f32(r, 0, 3)), Sample(np.array(0, np.int64))],
           np_ref=_all_any_ref(np.any)),
    OpInfo("any.dim", lambda r: [Sample(bools(r, 3, 4), 1), Sample(np.zeros((3, 4), bool), 0, True),
                                 Sample(i64(r, 2, 3, lo=0, hi=2), -1), Sample(i32(r, 4, 3).astype(np.uint8), 1, True),
                                 Sample(f32(r, 0, 3), 0), Sample(Cast(f32(r, 3, 4), "bfloat16"), 1)],
           np_ref=_all_any_ref(np.any),
           errors=lambda r: [ErrorInput(Sample(bools(r, 3, 4), -3), IndexError, "Dimension out of range")]),
    OpInfo("cumsum", lambda r: [
        Sample(f32(r, 3, 4), 0), Sample(f32(r, 3, 4), 1), Sample(f64(r, 2, 3, 4), -2), Sample(i32(r, 3, 4), 1),
        Sample(bools(r, 5), 0), Sample(f32(r, 3, 4), 1, dtype=D("float64")), Sample(i64(r, 3, 4), 0, dtype=D("int32")),
        Sample(np.array(2.5, dtype=np.float32), 0), Sample(np.array(3, dtype=np.int32), -1), Sample(f32(r, 0, 3), 0),
        Sample(Cast(f32(r, 3, 4), "bfloat16"), 1),
    ], np_ref=_scan_ref(np.cumsum), rtol=1e-5,
        errors=lambda r: [
            ErrorInput(Sample(f32(r, 3).astype(np.float16), 0), RuntimeError, "not implemented for 'Half'"),
            ErrorInput(Sample(f32(r, 3), 0, dtype=D("bool")), RuntimeError, "not implemented for 'Bool'"),
            ErrorInput(Sample(f32(r, 3), 1), IndexError, "Dimension out of range"),
        ]),
    OpInfo("cumprod", lambda r: [
        Sample(pos32(r, 3, 4), 0), Sample(pos32(r, 3, 4), 1), Sample(f64(r, 2, 3, 4), 2), Sample(i32(r, 3, 4), 1),
        Sample(bools(r, 5), 0), Sample(pos32(r, 3, 4), -1, dtype=D("float64")), Sample(np.array(2.5), 0),
        Sample(f32(r, 0, 3), 1), Sample(_zeros_in(r), 1), Sample(_zeros_in(r), 0),
    ], np_ref=_scan_ref(np.cumprod), rtol=1e-5,
        errors=lambda r: [ErrorInput(Sample(f32(r, 3).astype(np.float16), 0), RuntimeError, "not implemented for 'Half'")]),
]
