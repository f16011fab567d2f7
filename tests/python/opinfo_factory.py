"""OpInfo entries of factories; see opinfo.py for how to add one.

linspace, randint (both overloads) and empty_strided. randint is listed as
``shape_only`` (not ``random``: the database's random check expects [0, 1));
its values are checked against [low, high) in test_tools.py, as are the
strides of empty_strided and the errors of all three on real and meta.
"""
import numpy as np
from opinfo_base import torch  # None without PyTorch (the GPU pack)

from opinfo_base import *  # noqa: F401,F403

_INT_DTYPES = {"uint8", "int8", "int16", "int32", "int64"}


def _linspace_ref(start, end, steps, dtype=None):
    """NumPy's linspace; for integer dtypes PyTorch's CPU rule: the ends
    truncated (and wrapped) to the dtype, the steps computed in double from
    both ends, then truncated."""
    if dtype not in _INT_DTYPES:
        return np.linspace(start, end, steps)
    s = float(np.array(np.trunc(start)).astype(np.int64).astype(dtype))
    e = float(np.array(np.trunc(end)).astype(np.int64).astype(dtype))
    if steps == 1:
        return np.array([s]).astype(dtype)
    step = (e - s) / (steps - 1)
    half = steps // 2
    vals = [s + step * i if i < half else e - step * (steps - i - 1) for i in range(steps)]
    return np.trunc(np.array(vals, dtype=np.float64)).astype(dtype)


def _linspace_errors(r):
    return [
        ErrorInput(Sample(0, 1, -1), RuntimeError, "number of steps must be non-negative"),
        ErrorInput(Sample(0, 300, 5, dtype=D("uint8")), RuntimeError,
                   "value cannot be converted to type uint8_t without overflow"),
        ErrorInput(Sample(0, 1e300, 5), RuntimeError, "value cannot be converted to type float without overflow"),
        ErrorInput(Sample(0, 1, 3, dtype=D("bool")), RuntimeError, "not implemented for 'Bool'"),
    ]


def _randint_errors(r):
    return [
        ErrorInput(Sample(0, [3]), RuntimeError, "expects 'from' to be less than 'to', but got from=0 >= to=0"),
        ErrorInput(Sample(-1, [2]), RuntimeError, "but got from=0 >= to=-1"),
        ErrorInput(Sample(3, [-1]), RuntimeError, "Trying to create tensor with negative dimension -1: [-1]"),
        ErrorInput(Sample(3, [2], dtype=D("bool")), RuntimeError, "to - 1 is out of bounds for bool"),
    ]


def _randint_low_errors(r):
    return [
        ErrorInput(Sample(5, 2, [3]), RuntimeError, "expects 'from' to be less than 'to', but got from=5 >= to=2"),
        ErrorInput(Sample(0, 300, [2], dtype=D("uint8")), RuntimeError, "to - 1 is out of bounds for unsigned char"),
        ErrorInput(Sample(-5, 3, [2], dtype=D("uint8")), RuntimeError, "from is out of bounds for unsigned char"),
        ErrorInput(Sample(2 ** 62 - 1, 2 ** 62, [2], dtype=D("float32")), RuntimeError,
                   "to be less than 'to' casted to dtype, but got from=4611686018427387903 >= to=4611685743549480960"),
        ErrorInput(Sample(0, 2 ** 20, [2], dtype=D("float16")), RuntimeError, "to - 1 is out of bounds for c10::Half"),
        ErrorInput(Sample(1, 1, [0]), RuntimeError, "but got from=1 >= to=1"),
    ]


def _empty_strided_errors(r):
    return [
        ErrorInput(Sample([-2, 3], [1, 2]), RuntimeError, "Trying to create tensor with negative dimension -2: [-2, 3]"),
        ErrorInput(Sample([2, 3], [1]), RuntimeError,
                   "dimensionality of sizes (2) must match dimensionality of strides (1)"),
        ErrorInput(Sample([2, 3], [1, -2]), RuntimeError,
                   "Storage size calculation overflowed with sizes=[2, 3] and strides=[1, -2]"),
        ErrorInput(Sample([2 ** 40, 2 ** 40], [1, 2 ** 40]), RuntimeError, "Storage size calculation overflowed"),
    ]


OPINFOS = [
    OpInfo("linspace", lambda r: [
        Sample(0, 10, 5), Sample(-5.5, 7.25, 100), Sample(0.0, 1.0, 11, dtype=D("float64")),
        Sample(-1.7, 10.3, 7, dtype=D("int32")), Sample(10, 0, 6, dtype=D("int64")),
        Sample(0, 10, 4, dtype=D("int64")), Sample(-1, 3, 5, dtype=D("uint8")), Sample(-3, 3, 13, dtype=D("int8")),
        Sample(0, 1, 1), Sample(3, 1, 0), Sample(2.5, 2.5, 1, dtype=D("int16")), Sample(1, -1, 2),
        Sample(0, 1, 5, dtype=D("float16")), Sample(-2, 2, 9, dtype=D("bfloat16")), Sample(True, False, 3),
    ], np_ref=_linspace_ref, errors=_linspace_errors),
    OpInfo("randint", lambda r: [
        Sample(5, [2, 3]), Sample(3, [0]), Sample(1, [4]), Sample(7, [3, 1, 2], dtype=D("int32")),
        Sample(2, [3], dtype=D("bool")), Sample(100, [5], dtype=D("float32")), Sample(10, (), dtype=D("float64")),
        Sample(256, [6], dtype=D("uint8")),
    ], shape_only=True, errors=_randint_errors),
    OpInfo("randint.low", lambda r: [
        Sample(2, 5, [3]), Sample(-3, 3, [2, 2]), Sample(-128, 128, [8], dtype=D("int8")),
        Sample(-(2 ** 63), 2 ** 63 - 1, [3]), Sample(10, 12, [2], dtype=D("float16")),
        Sample(0, 2, [5], dtype=D("bfloat16")), Sample(-2, 0, [0, 3], dtype=D("int16")),
    ], shape_only=True, errors=_randint_low_errors),
    OpInfo("empty_strided", lambda r: [
        Sample([2, 3], [1, 2]), Sample([2, 3], [0, 0]), Sample([2, 0], [5, 7]), Sample([], []),
        Sample([2, 3], [10, 2], dtype=D("int32")), Sample([4], [3], dtype=D("bool")),
        Sample([1, 3, 1], [7, 1, 9], dtype=D("float64")), Sample([2, 2, 2], [1, 2, 4], dtype=D("bfloat16")),
    ], shape_only=True, errors=_empty_strided_errors),
]
