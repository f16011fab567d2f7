"""OpInfo entries of elementwise ops (unary, binary, ternary); see opinfo.py for how to add one.

Floating samples of differentiable ops stay where the op is smooth (gradcheck
runs them); special values (NaN, inf, division by zero, atan2's branch cut)
are checked against PyTorch in test_pointwise_ops.py."""
import numpy as np
from opinfo_base import torch  # None without PyTorch (the GPU pack)

from opinfo_base import *  # noqa: F401,F403


def _u8(rng, *shape, lo=0, hi=200):
    return rng.integers(lo, hi, shape).astype(np.uint8)


def _i8(rng, *shape, lo=-100, hi=100):
    return rng.integers(lo, hi, shape).astype(np.int8)


def _nonzero_i64(rng, *shape):
    a = i64(rng, *shape, lo=-7, hi=8)
    a[a == 0] = 3
    return a


def _f0(v=1.5, dtype=np.float32):
    return np.array(v, dtype=dtype)


# ---- references NumPy lacks or spells differently

def _floor_div_ref(a, b, rounding_mode=None):
    if rounding_mode is None:
        return np.true_divide(a, b)
    if rounding_mode == "trunc":
        q = np.true_divide(a, b)
        res = np.trunc(q)
        if np.result_type(a, b).kind in "iu":
            return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(np.result_type(a, b))
        return res
    return np.floor_divide(a, b)


def _div_mode_ref(a, b, rounding_mode=None):
    with np.errstate(divide="ignore", invalid="ignore"):
        return _floor_div_ref(a, b, rounding_mode)


def _log2_ref(x):
    # log2(False) is -inf, as in PyTorch: numpy's divide warning is expected.
    with np.errstate(divide="ignore"):
        return np.log2(x.astype(np.float64))


def _silu_ref(x):
    x = x.astype(np.float64)
    return x / (1 + np.exp(-x))


def _lerp_ref(a, b, w):
    return a + w * (b - a)


def _shift_values(rng, dtype, shape):
    """In-range shift counts (0 .. bits-1) for `dtype`."""
    bits = np.dtype(dtype).itemsize * 8
    return rng.integers(0, bits, shape).astype(dtype)


_DIV_ERRORS = lambda r: [  # noqa: E731
    ErrorInput(Sample(f32(r, 3), f32(r, 3), rounding_mode="round"), RuntimeError,
               "expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"),
    ErrorInput(Sample(bools(r, 3), bools(r, 3), rounding_mode="floor"), RuntimeError,
               "\"div_floor_cpu\" not implemented for 'Bool'"),
    ErrorInput(Sample(bools(r, 3), bools(r, 3), rounding_mode="trunc"), RuntimeError,
               "\"div_trunc_cpu\" not implemented for 'Bool'"),
    ErrorInput(Sample(f32(r, 2, 3), f32(r, 4), rounding_mode="floor"), RuntimeError, "must match the size"),
    # Integer division by zero surfaces at the sync point on real tensors only.
    ErrorInput(Sample(i64(r, 3), np.zeros(3, dtype=np.int64), rounding_mode="trunc"), RuntimeError,
               "ZeroDivisionError", data_dependent=True),
    ErrorInput(Sample(i64(r, 3), np.array([1, 0, 2]), rounding_mode="floor"), RuntimeError, "ZeroDivisionError", data_dependent=True),
]


OPINFOS = [
    # ---- unary, int -> float32
    unary("exp2", np.exp2, ("f32", "f64", "i64", "bool", "f32_0d", "f16"), rtol=1e-5),
    OpInfo("exp2", lambda r: [Sample(Cast(f32(r, 3, 4), "bfloat16")), Sample(f32(r, 0, 3)), Sample(i32(r, 2, 1, 3))],
           np_ref=np.exp2, rtol=1e-5),
    unary("expm1", np.expm1, ("f32", "f64", "i64", "f32_0d"), rtol=1e-5),
    OpInfo("expm1", lambda r: [Sample(Cast(f32(r, 3, 4), "bfloat16")), Sample(f32(r, 2, 0)),
                               Sample(np.array([1e-7, -1e-6, 0.0], dtype=np.float32))],
           np_ref=np.expm1, rtol=1e-5,
           errors=lambda r: [ErrorInput(Sample(f32(r, 3).astype(np.float16)), RuntimeError,
                                        "\"expm1_vml_cpu\" not implemented for 'Half'")]),
    unary("log2", np.log2, ("pos", "pos_1d"), rtol=1e-5),
    OpInfo("log2", lambda r: [Sample(i64(r, 3, 4, lo=1, hi=100)), Sample(Cast(pos32(r, 4), "bfloat16")),
                              Sample(np.abs(f64(r, 2, 3)) + 0.1), Sample(bools(r, 4))],
           np_ref=_log2_ref, rtol=1e-5,
           errors=lambda r: [ErrorInput(Sample(pos32(r, 3).astype(np.float16)), RuntimeError,
                                        "\"log2_vml_cpu\" not implemented for 'Half'")]),
    unary("log1p", np.log1p, ("pos", "f32_0d"), rtol=1e-5),
    OpInfo("log1p", lambda r: [Sample(i32(r, 3, 4, lo=0, hi=50)), Sample(Cast(pos32(r, 5), "bfloat16")),
                               Sample(np.array([1e-7, -1e-6, 0.0, -0.5, 3.0], dtype=np.float32)),
                               Sample(np.abs(f64(r, 2, 3)) - 0.5)],
           np_ref=lambda x: np.log1p(x.astype(np.float64)), rtol=1e-5,
           errors=lambda r: [ErrorInput(Sample(pos32(r, 3).astype(np.float16)), RuntimeError,
                                        "\"log1p_vml_cpu\" not implemented for 'Half'")]),
    OpInfo("silu", lambda r: [Sample(f32(r, 3, 4)), Sample(f64(r, 2, 5)), Sample(Cast(f32(r, 4), "bfloat16")),
                              Sample(_f0(-0.75)), Sample(f32(r, 0, 2))],
           np_ref=_silu_ref, torch_ref=lambda *a, **k: torch.nn.functional.silu(*a, **k), rtol=1e-5, atol=1e-6,
           errors=lambda r: [ErrorInput(Sample(i64(r, 3)), RuntimeError, "\"silu_cpu\" not implemented for 'Long'"),
                             ErrorInput(Sample(bools(r, 3)), RuntimeError, "\"silu_cpu\" not implemented for 'Bool'"),
                             ErrorInput(Sample(f32(r, 3).astype(np.float16)), RuntimeError,
                                        "\"silu_cpu\" not implemented for 'Half'")]),
    # square = pow(self, 2): integers keep their dtype, bool gives int64.
    unary("square", np.square, ("f32", "f64", "i64", "i32", "f32_0d", "f16"), rtol=1e-6),
    OpInfo("square", lambda r: [Sample(bools(r, 3, 4)), Sample(_u8(r, 2, 3, hi=16)), Sample(_i8(r, 5, lo=-11, hi=12)),
                                Sample(Cast(f32(r, 2, 3), "bfloat16")), Sample(i64(r, 0, 4))],
           np_ref=lambda x: np.square(x.astype(np.int64) if x.dtype == np.bool_ else x)),
    OpInfo("relu_", lambda r: [Sample(f32(r, 3, 4)), Sample(i64(r, 5)), Sample(f64(r, 2, 1, 3)), Sample(_f0(-2.0))],
           np_ref=lambda x: np.where(np.isnan(x), x, np.maximum(x, 0)).astype(x.dtype),
           errors=lambda r: [ErrorInput(Sample(bools(r, 3)), RuntimeError, "Boolean inputs not supported for relu")]),

    # ---- div with rounding_mode, floor_divide
    OpInfo("div.Tensor_mode",
           lambda r: [Sample(f32(r, 3, 4) * 4, f32(r, 3, 4), rounding_mode="floor"),
                      Sample(f32(r, 3, 4) * 4, f32(r, 3, 4), rounding_mode="trunc"),
                      Sample(f32(r, 3, 4), pos32(r, 3, 4), rounding_mode=None),
                      Sample(i64(r, 3, 4, lo=-20, hi=21), _nonzero_i64(r, 1, 4), rounding_mode="floor"),
                      Sample(i64(r, 3, 4, lo=-20, hi=21), _nonzero_i64(r, 3, 1), rounding_mode="trunc"),
                      Sample(i64(r, 2, 3), _nonzero_i64(r, 2, 3), rounding_mode=None),
                      Sample(i32(r, 2, 3, lo=-20, hi=21), f64(r, 2, 3), rounding_mode="floor"),
                      Sample(f64(r, 4) * 10, np.array([2.0, -3.0, 0.5, -0.25]), rounding_mode="floor"),
                      Sample(_i8(r, 2, 3), np.array(-3, dtype=np.int64), rounding_mode="floor"),
                      Sample(_u8(r, 4), _u8(r, 4, lo=1, hi=9), rounding_mode="floor"),
                      Sample(f32(r, 0, 3), f32(r, 3), rounding_mode="floor")],
           np_ref=_div_mode_ref, rtol=1e-5, errors=_DIV_ERRORS),
    OpInfo("div.Scalar_mode",
           lambda r: [Sample(f32(r, 3, 4) * 4, 1.5, rounding_mode="floor"),
                      Sample(f32(r, 3, 4) * 4, -1.5, rounding_mode="trunc"),
                      Sample(i64(r, 3, 4, lo=-20, hi=21), 3, rounding_mode="floor"),
                      Sample(i64(r, 3, 4, lo=-20, hi=21), -4, rounding_mode="trunc"),
                      Sample(i32(r, 2, 3, lo=-20, hi=21), 2.5, rounding_mode="floor"),
                      Sample(i64(r, 5), 2, rounding_mode=None),
                      Sample(_f0(7.5), 2, rounding_mode="floor"),
                      Sample(bools(r, 4), 2, rounding_mode="floor")],
           np_ref=_div_mode_ref, rtol=1e-5,
           errors=lambda r: [ErrorInput(Sample(f32(r, 3), 2, rounding_mode="nearest"), RuntimeError,
                                        "expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                                        "'nearest'"),
                             ErrorInput(Sample(bools(r, 3), True, rounding_mode="trunc"), RuntimeError,
                                        "\"div_trunc_cpu\" not implemented for 'Bool'"),
                             ErrorInput(Sample(i64(r, 3), 0, rounding_mode="floor"), RuntimeError,
                                        "ZeroDivisionError", data_dependent=True)]),
    OpInfo("floor_divide",
           lambda r: [Sample(f32(r, 3, 4) * 4, f32(r, 3, 4)), Sample(i64(r, 3, 4, lo=-20, hi=21), _nonzero_i64(r, 4)),
                      Sample(i32(r, 2, 3), np.array(2, dtype=np.int64)), Sample(f64(r, 2, 1) * 5, f32(r, 1, 3))],
           np_ref=np.floor_divide, rtol=1e-5,
           errors=lambda r: [ErrorInput(Sample(bools(r, 3), bools(r, 3)), RuntimeError,
                                        "\"div_floor_cpu\" not implemented for 'Bool'"),
                             ErrorInput(Sample(i64(r, 3), np.zeros(3, dtype=np.int64)), RuntimeError,
                                        "ZeroDivisionError", data_dependent=True)]),
    OpInfo("floor_divide.Scalar",
           lambda r: [Sample(f32(r, 3, 4) * 4, 1.5), Sample(i64(r, 3, 4, lo=-20, hi=21), -3), Sample(i32(r, 5), 2.5)],
           np_ref=np.floor_divide, rtol=1e-5),

    OpInfo("div.Tensor_mode",
           lambda r: [Sample(f32(r, 3, 4).astype(np.float16) * 8, pos32(r, 4).astype(np.float16), rounding_mode="floor"),
                      Sample(f32(r, 3, 4).astype(np.float16) * 8, pos32(r, 4).astype(np.float16), rounding_mode="trunc"),
                      Sample(Cast(f32(r, 3) * 8, "bfloat16"), Cast(pos32(r, 3), "bfloat16"), rounding_mode="trunc"),
                      Sample(Cast(f32(r, 3, 2) * 8, "bfloat16"), Cast(pos32(r, 2), "bfloat16"), rounding_mode="floor")]),

    # ---- fmod: the sign of self
    OpInfo("fmod.Tensor",
           lambda r: [Sample(f32(r, 3, 4) * 5, pos32(r, 3, 4)), Sample(f32(r, 3, 1) * 5, -pos32(r, 1, 4)),
                      Sample(i64(r, 3, 4, lo=-20, hi=21), _nonzero_i64(r, 3, 4)),
                      Sample(i32(r, 2, 3, lo=-20, hi=21), f64(r, 2, 3)),
                      Sample(_i8(r, 4), np.array(-7, dtype=np.int64)),
                      Sample(f32(r, 0), f32(r, 1))],
           np_ref=np.fmod, rtol=1e-5, atol=1e-5,
           errors=lambda r: [ErrorInput(Sample(bools(r, 3), bools(r, 3)), RuntimeError,
                                        "\"fmod_cpu\" not implemented for 'Bool'"),
                             ErrorInput(Sample(f32(r, 3), f32(r, 2)), RuntimeError, "must match the size"),
                             ErrorInput(Sample(i64(r, 3), np.array([1, 0, 2])), RuntimeError, "ZeroDivisionError", data_dependent=True)]),
    OpInfo("fmod.Scalar",
           lambda r: [Sample(f32(r, 3, 4) * 5, 1.5), Sample(f32(r, 3, 4) * 5, -2), Sample(i64(r, 3, 4, lo=-20, hi=21), 3),
                      Sample(i32(r, 5, lo=-20, hi=21), 2.5), Sample(bools(r, 4), 2), Sample(_f0(-7.5), 2)],
           np_ref=np.fmod, rtol=1e-5, atol=1e-5,
           errors=lambda r: [ErrorInput(Sample(i64(r, 3), 0), RuntimeError, "ZeroDivisionError", data_dependent=True),
                             ErrorInput(Sample(bools(r, 3), True), RuntimeError,
                                        "\"fmod_cpu\" not implemented for 'Bool'")]),

    OpInfo("fmod.Tensor",
           lambda r: [Sample(f32(r, 3).astype(np.float16) * 5, pos32(r, 3).astype(np.float16)),
                      Sample(Cast(f32(r, 4) * 5, "bfloat16"), Cast(pos32(r, 4), "bfloat16"))]),

    # ---- atan2: int -> float32
    OpInfo("atan2",
           lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4)), Sample(f32(r, 3, 1), f32(r, 1, 4)),
                      Sample(i64(r, 2, 3), i64(r, 2, 3)), Sample(bools(r, 4), bools(r, 4)),
                      Sample(f64(r, 2, 3), f32(r, 2, 3)), Sample(i32(r, 3), _f0(2.0, np.float64)),
                      Sample(Cast(f32(r, 3), "bfloat16"), Cast(f32(r, 3), "bfloat16")),
                      Sample(f32(r, 0, 2), f32(r, 2))],
           np_ref=lambda a, b: np.arctan2(np.asarray(a, np.float64), np.asarray(b, np.float64)), rtol=1e-5, atol=1e-6,
           errors=lambda r: [ErrorInput(Sample(f32(r, 3).astype(np.float16), f32(r, 3).astype(np.float16)),
                                        RuntimeError, "\"atan2_cpu\" not implemented for 'Half'"),
                             ErrorInput(Sample(f32(r, 2, 3), f32(r, 3, 2)), RuntimeError, "must match the size")]),

    # ---- shifts (integers only; shift counts in [0, bits))
    OpInfo("bitwise_left_shift.Tensor",
           lambda r: [Sample(i64(r, 3, 4, lo=-1000, hi=1000), _shift_values(r, np.int64, (3, 4))),
                      Sample(i32(r, 3, 1, lo=-1000, hi=1000), _shift_values(r, np.int32, (1, 4))),
                      Sample(_u8(r, 5), _shift_values(r, np.uint8, (5,))),
                      Sample(_i8(r, 2, 3), _shift_values(r, np.int8, (2, 3))),
                      Sample(_i8(r, 4), np.array(3, dtype=np.int64)),          # 0-dim int64 does not widen int8
                      Sample(_i8(r, 2), np.array([3, 1])),                         # int8 with int64 -> int64
                      Sample(i64(r, 0, 3), i64(r, 3, lo=0, hi=5))],
           np_ref=lambda a, b: np.left_shift(*np.broadcast_arrays(*_promoted(a, b))),
           errors=lambda r: [ErrorInput(Sample(f32(r, 3), i64(r, 3)), RuntimeError,
                                        "\"lshift_cpu\" not implemented for 'Float'"),
                             ErrorInput(Sample(bools(r, 3), bools(r, 3)), RuntimeError,
                                        "\"lshift_cpu\" not implemented for 'Bool'"),
                             ErrorInput(Sample(i64(r, 2, 3), i64(r, 4)), RuntimeError, "must match the size")]),
    OpInfo("bitwise_left_shift.Tensor_Scalar",
           lambda r: [Sample(i64(r, 3, 4, lo=-1000, hi=1000), 3), Sample(_i8(r, 5), 2), Sample(_u8(r, 2, 3), 7),
                      Sample(np.array(5, dtype=np.int32), 4)],
           np_ref=lambda a, s: np.left_shift(a, np.array(s, dtype=a.dtype)),
           errors=lambda r: [ErrorInput(Sample(i64(r, 3), 1.5), RuntimeError,
                                        "\"lshift_cpu\" not implemented for 'Float'"),
                             ErrorInput(Sample(f64(r, 3), 1), RuntimeError,
                                        "\"lshift_cpu\" not implemented for 'Double'")]),
    OpInfo("bitwise_right_shift.Tensor",
           lambda r: [Sample(i64(r, 3, 4, lo=-1000, hi=1000), _shift_values(r, np.int64, (3, 4))),
                      Sample(i32(r, 3, 1, lo=-1000, hi=1000), _shift_values(r, np.int32, (1, 4))),
                      Sample(_u8(r, 5), _shift_values(r, np.uint8, (5,))),
                      Sample(_i8(r, 2, 3), _shift_values(r, np.int8, (2, 3))),
                      Sample(np.array([-8, 8, -1, 1 << 40]), np.array([63, 63, 0, 40]))],
           np_ref=lambda a, b: np.right_shift(*np.broadcast_arrays(*_promoted(a, b))),
           errors=lambda r: [ErrorInput(Sample(f32(r, 3), i64(r, 3)), RuntimeError,
                                        "\"rshift_cpu\" not implemented for 'Float'")]),
    OpInfo("bitwise_right_shift.Tensor_Scalar",
           lambda r: [Sample(i64(r, 3, 4, lo=-1000, hi=1000), 3), Sample(_i8(r, 5), 2), Sample(_u8(r, 2, 3), 7)],
           np_ref=lambda a, s: np.right_shift(a, np.array(s, dtype=a.dtype)),
           errors=lambda r: [ErrorInput(Sample(f32(r, 3), 1), RuntimeError,
                                        "\"rshift_cpu\" not implemented for 'Float'"),
                             ErrorInput(Sample(bools(r, 3), True), RuntimeError,
                                        "\"rshift_cpu\" not implemented for 'Bool'")]),

    # ---- lerp: no promotion, floating only
    OpInfo("lerp.Scalar",
           lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4), 0.25), Sample(f32(r, 3, 1), f32(r, 1, 4), 0.75),
                      Sample(f64(r, 2, 3), f64(r, 3), -0.5), Sample(f32(r, 4), f32(r, 4), 2),
                      Sample(Cast(f32(r, 3), "bfloat16"), Cast(f32(r, 3), "bfloat16"), 0.5),
                      Sample(f32(r, 3), _f0(2.0), 1.0), Sample(f32(r, 0, 3), f32(r, 3), 0.5)],
           np_ref=_lerp_ref, rtol=1e-5,
           errors=lambda r: [ErrorInput(Sample(f32(r, 3), f64(r, 3), 0.5), RuntimeError,
                                        "expected dtype float for `end` but got dtype double"),
                             ErrorInput(Sample(i64(r, 3), i64(r, 3), 1), RuntimeError,
                                        "\"lerp_kernel_scalar\" not implemented for 'Long'"),
                             ErrorInput(Sample(f32(r, 3).astype(np.float16), f32(r, 3).astype(np.float16), 0.5),
                                        RuntimeError, "\"lerp_kernel_scalar\" not implemented for 'Half'"),
                             ErrorInput(Sample(f32(r, 3), f32(r, 2), 0.5), RuntimeError, "must match the size")]),
    OpInfo("lerp.Tensor",
           lambda r: [Sample(f32(r, 3, 4), f32(r, 3, 4), f32(r, 3, 4)),
                      Sample(f32(r, 3, 1), f32(r, 1, 4), f32(r, 4)),
                      Sample(f64(r, 2, 3), f64(r, 2, 3), np.array(0.3)),
                      Sample(f32(r, 2, 1, 3), f32(r, 4, 1), f32(r, 1, 1)),
                      Sample(Cast(f32(r, 3), "bfloat16"), Cast(f32(r, 3), "bfloat16"), Cast(f32(r, 3), "bfloat16")),
                      Sample(f32(r, 3, 0), f32(r, 0), f32(r, 1))],
           np_ref=_lerp_ref, rtol=1e-5, atol=1e-5,
           errors=lambda r: [ErrorInput(Sample(f32(r, 3), f32(r, 3), f64(r, 3)), RuntimeError,
                                        "expected dtype float for `weight` but got dtype double"),
                             ErrorInput(Sample(f32(r, 3), f32(r, 3), np.array(0.5)), RuntimeError,
                                        "expected dtype float for `weight` but got dtype double"),
                             ErrorInput(Sample(f64(r, 3), f32(r, 3), f64(r, 3)), RuntimeError,
                                        "expected dtype double for `end` but got dtype float"),
                             ErrorInput(Sample(f32(r, 3).astype(np.float16), f32(r, 3).astype(np.float16),
                                               f32(r, 3).astype(np.float16)),
                                        RuntimeError, "\"lerp_kernel_tensor\" not implemented for 'Half'")]),
]


def _promoted(a, b):
    """a, b converted to PyTorch's result type (0-dim arrays do not widen a higher-dim one)."""
    a, b = np.asarray(a), np.asarray(b)
    if b.ndim == 0 and a.ndim > 0:
        dt = a.dtype
    elif a.ndim == 0 and b.ndim > 0:
        dt = b.dtype
    else:
        dt = np.promote_types(a.dtype, b.dtype)
    return a.astype(dt), b.astype(dt)
