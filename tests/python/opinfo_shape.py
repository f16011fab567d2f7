"""OpInfo entries of matmul-family, shape and indexing ops; see opinfo.py for how to add one."""
import numpy as np
from opinfo_base import torch  # None without PyTorch (the GPU pack)

from opinfo_base import *  # noqa: F401,F403

# ---- shape ops: split, chunk, unbind (lists of views), flip, roll, repeat, tril, triu, pad, scatter


def _np_split(x, split_size, dim=0):
    n = x.shape[dim]
    if n == 0:
        return (x,)
    return tuple(np.split(x, list(range(split_size, n, split_size)), axis=dim))


def _np_split_sizes(x, sizes, dim=0):
    return tuple(np.split(x, list(np.cumsum(sizes)[:-1]), axis=dim))


def _np_chunk(x, chunks, dim=0):
    n = x.shape[dim]
    if n == 0:
        return tuple(x for _ in range(chunks))
    return _np_split(x, -(-n // chunks), dim)


def _np_unbind(x, dim=0):
    return tuple(np.take(x, i, axis=dim) for i in range(x.shape[dim]))


def _np_flip(x, dims):
    return np.flip(x, axis=tuple(dims)) if len(dims) and x.ndim else x.copy()


def _np_roll(x, shifts, dims=()):
    if isinstance(shifts, int):
        shifts = [shifts]
    if isinstance(dims, int):
        dims = [dims]
    if not len(dims):
        return np.roll(x, shifts[0])
    return np.roll(x, tuple(shifts), axis=tuple(dims))


def _np_repeat(x, repeats):
    return np.tile(x, tuple(repeats))


def _scatter_index(rng, self_shape, index_shape, dim):
    """An int64 index of index_shape with distinct entries along `dim` (so the
    result does not depend on the order of duplicate writes)."""
    idx = np.empty(index_shape, dtype=np.int64)
    moved = np.moveaxis(idx, dim, -1)
    for pos in np.ndindex(moved.shape[:-1]):
        moved[pos] = rng.permutation(self_shape[dim])[:index_shape[dim]]
    return idx


def _i64(*vals):
    return np.array(vals, dtype=np.int64)


def _split_errors(r):
    return [
        ErrorInput(Sample(f32(r, 5, 3), 0), RuntimeError, "split_size can only be 0 if dimension size is 0"),
        ErrorInput(Sample(f32(r, 5, 3), -1), RuntimeError, "split expects split_size be non-negative"),
        ErrorInput(Sample(f32(r, 5, 3), 2, 2), IndexError, "Dimension out of range"),
        ErrorInput(Sample(np.array(1.0, dtype=np.float32), 1), RuntimeError, "expects at least a 1-dimensional tensor"),
    ]


def _split_sizes_errors(r):
    return [
        ErrorInput(Sample(f32(r, 5, 3), [2, 2]), RuntimeError,
                   "split_with_sizes expects split_sizes to sum exactly to 5 (input tensor's size at dimension 0), "
                   "but got split_sizes=[2, 2]"),
        ErrorInput(Sample(f32(r, 5, 3), [2, -1, 4]), RuntimeError, "only non-negative entries"),
        ErrorInput(Sample(f32(r, 5, 3), [1, 2], -3), IndexError, "Dimension out of range"),
    ]


def _scatter_errors(r, value):
    src = (lambda *s: f32(r, *s)) if not value else (lambda *s: 1.5)
    return [
        ErrorInput(Sample(f32(r, 5, 3), 0, np.zeros((2, 2), dtype=np.int32), src(5, 3)), RuntimeError,
                   "Expected dtype int64 for index"),
        ErrorInput(Sample(f32(r, 5, 3), 2, np.zeros((2, 2), dtype=np.int64), src(5, 3)), IndexError,
                   "Dimension out of range"),
        ErrorInput(Sample(f32(r, 5, 3), 1, np.zeros((6, 2), dtype=np.int64), src(6, 3)), RuntimeError,
                   "Expected index [6, 2] to be smaller than self [5, 3] apart from dimension 1"),
        ErrorInput(Sample(f32(r, 5, 3), 0, np.zeros((2, 2, 2), dtype=np.int64), src(5, 3)), RuntimeError,
                   "Index tensor must have the same number of dimensions as self tensor"),
        # Only the kernel sees index values: the error comes at the sync point.
        ErrorInput(Sample(f32(r, 5, 3), 0, np.full((2, 2), 7, dtype=np.int64), src(5, 3)), RuntimeError,
                   "index 7 is out of bounds for dimension 0 with size 5", data_dependent=True),
        ErrorInput(Sample(f32(r, 5, 3), 1, np.full((1, 1), -1, dtype=np.int64), src(5, 3)), RuntimeError,
                   "index -1 is out of bounds for dimension 1 with size 3", data_dependent=True),
    ] + ([
        ErrorInput(Sample(f32(r, 5, 3), 0, np.zeros((2, 2), dtype=np.int64), f64(r, 5, 3)), RuntimeError,
                   "Expected self.dtype to be equal to src.dtype"),
        ErrorInput(Sample(f32(r, 5, 3), 0, np.zeros((2, 2), dtype=np.int64), f32(r, 1, 1)), RuntimeError,
                   "to be smaller size than src [1, 1]"),
    ] if not value else [
        ErrorInput(Sample(i64(r, 5, 3).astype(np.int8), 0, np.zeros((2, 2), dtype=np.int64), 1000), RuntimeError,
                   "value cannot be converted to type int8_t without overflow"),
    ])


def _scatter_samples(r, value):
    def v(*shape, dtype=np.float32):
        return 2.5 if value else f32(r, *shape).astype(dtype)
    x = f32(r, 5, 3)
    out = [
        Sample(x, 0, _scatter_index(r, (5, 3), (2, 3), 0), v(2, 3)),
        Sample(f32(r, 4, 6), 1, _scatter_index(r, (4, 6), (3, 2), 1), v(3, 4)),    # index smaller than src
        Sample(f32(r, 2, 3, 4), -1, _scatter_index(r, (2, 3, 4), (2, 2, 3), 2), v(2, 2, 3)),
        Sample(f32(r, 5, 3), 0, np.zeros((0, 3), dtype=np.int64), v(2, 3)),       # empty index: a copy
        Sample(f32(r, 2, 3, 4, 2), 1, _scatter_index(r, (2, 3, 4, 2), (2, 2, 4, 2), 1), v(2, 2, 4, 2)),
        Sample(np.array(1.0, dtype=np.float32), 0, np.array(0, dtype=np.int64),
               2.5 if value else np.array(3.0, dtype=np.float32)),                 # 0-dim
    ]
    if value:
        out.append(Sample(i64(r, 4, 3), 0, _scatter_index(r, (4, 3), (2, 3), 0), 7))
        out.append(Sample(bools(r, 4, 3), 1, _scatter_index(r, (4, 3), (4, 2), 1), True))
        out.append(Sample(i64(r, 4, 3).astype(np.int32), 0, _scatter_index(r, (4, 3), (2, 3), 0), 1.5))
    else:
        out.append(Sample(i64(r, 4, 3), 0, _scatter_index(r, (4, 3), (2, 3), 0), i64(r, 2, 3)))
        out.append(Sample(f64(r, 4, 3), 1, _scatter_index(r, (4, 3), (4, 2), 1), f64(r, 4, 3)))
        out.append(Sample(bools(r, 4, 3), 0, _scatter_index(r, (4, 3), (3, 3), 0), bools(r, 3, 3)))
    return out


_SHAPE_OPINFOS = [
    OpInfo("split.Tensor", lambda r: [
        Sample(f32(r, 5, 3), 2), Sample(f32(r, 5, 3), 5), Sample(f32(r, 5, 3), 7), Sample(f32(r, 4, 6), 4, 1),
        Sample(f32(r, 2, 3, 4), 3, -1), Sample(i64(r, 6), 2), Sample(bools(r, 3, 4), 1, 1),
        Sample(np.zeros((0, 3), dtype=np.float32), 2), Sample(np.zeros((0, 3), dtype=np.float32), 0),
        Sample(Cast(f32(r, 4, 2), "bfloat16"), 3), Sample(f32(r, 2, 4, 3, 2), 2, 1), Sample(f32(r, 2, 3, 1, 1), 1, 1),
    ], np_ref=_np_split, errors=_split_errors),
    OpInfo("split.sizes", lambda r: [
        Sample(f32(r, 5, 3), [2, 3]), Sample(f32(r, 5, 3), [1, 0, 2], 1), Sample(i64(r, 4, 2), [4]),
        Sample(f32(r, 2, 3, 4), [1, 1, 2], -1),
    ], np_ref=_np_split_sizes, errors=_split_sizes_errors),
    OpInfo("split_with_sizes", lambda r: [
        Sample(f32(r, 5, 3), [2, 3]), Sample(f32(r, 5, 3), [5, 0]), Sample(f32(r, 5, 3), [1, 1, 1], 1),
        Sample(i64(r, 3, 4), [3, 1], -1), Sample(f64(r, 2, 3, 4), [1, 2], 1),
    ], np_ref=_np_split_sizes, errors=_split_sizes_errors),
    OpInfo("chunk", lambda r: [
        Sample(f32(r, 5, 3), 3), Sample(f32(r, 5, 3), 4), Sample(f32(r, 5, 3), 6), Sample(f32(r, 5, 3), 2, 1),
        Sample(f32(r, 2, 3, 4), 2, -1), Sample(i64(r, 7), 3), Sample(np.zeros((0, 3), dtype=np.float32), 3),
        Sample(bools(r, 4, 4), 1), Sample(f32(r, 2, 4, 3, 2), 3, -1), Sample(f32(r, 2, 3, 4, 2, 2), 2, 2),
    ], np_ref=_np_chunk, errors=lambda r: [
        ErrorInput(Sample(f32(r, 5, 3), 0), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0"),
        ErrorInput(Sample(f32(r, 5, 3), 2, 2), IndexError, "Dimension out of range"),
        ErrorInput(Sample(np.array(1.0, dtype=np.float32), 1), RuntimeError, "expects at least a 1-dimensional tensor"),
    ]),
    OpInfo("unbind.int", lambda r: [
        Sample(f32(r, 3, 4)), Sample(f32(r, 3, 4), 1), Sample(f32(r, 2, 3, 4), -1), Sample(i64(r, 5)),
        Sample(f32(r, 1, 4)), Sample(np.zeros((0, 3), dtype=np.float32)), Sample(bools(r, 2, 2), 1),
        Sample(f32(r, 2, 3, 2, 2), 1),
    ], np_ref=_np_unbind, errors=lambda r: [
        ErrorInput(Sample(f32(r, 3, 4), 2), IndexError, "Dimension out of range"),
        ErrorInput(Sample(np.array(1.0, dtype=np.float32)), IndexError, "Dimension specified as 0 but tensor has no "
                                                                        "dimensions"),
    ]),
    OpInfo("flip", lambda r: [
        Sample(f32(r, 3, 4), [0]), Sample(f32(r, 3, 4), [0, 1]), Sample(f32(r, 2, 3, 4), [-1, 0]),
        Sample(f32(r, 3, 4), []), Sample(i64(r, 5), [0]), Sample(bools(r, 3, 4), [1]),
        Sample(np.array(2.0, dtype=np.float32), [0]), Sample(np.zeros((0, 3), dtype=np.float32), [1]),
        Sample(Cast(f32(r, 2, 3), "bfloat16"), [1]), Sample(f32(r, 3, 4).astype(np.float16), [0]),
        Sample(f32(r, 2, 3, 4, 2), [1, 3]), Sample(f32(r, 2, 3, 1, 1), [0]),
    ], np_ref=_np_flip, errors=lambda r: [
        ErrorInput(Sample(f32(r, 3, 4), [2]), IndexError, "Dimension out of range"),
        ErrorInput(Sample(f32(r, 3, 4), [0, -2]), RuntimeError, "dim 0 appears multiple times in the list of dims"),
    ]),
    OpInfo("roll", lambda r: [
        Sample(f32(r, 5, 3), 1, 0), Sample(f32(r, 5, 3), -2, 1), Sample(f32(r, 5, 3), 4),
        Sample(f32(r, 5, 3), [1, 2], [0, 1]), Sample(f32(r, 5, 3), [1, 2], [0, 0]), Sample(f32(r, 2, 3, 4), 7, -1),
        Sample(i64(r, 6), 2, 0), Sample(bools(r, 3, 4), 1, 1), Sample(np.array(2.0, dtype=np.float32), 3),
        Sample(np.zeros((0, 3), dtype=np.float32), 1, 0), Sample(f32(r, 5, 3), 0, 1),
        Sample(f32(r, 2, 3, 4, 2), 1, 1), Sample(f32(r, 2, 3, 4, 2), 0, -1), Sample(f32(r, 2, 3, 4, 2), [1, -1], [2, 3]),
        Sample(f32(r, 2, 3, 1, 1), 2, 1), Sample(f32(r, 2, 3, 4, 2, 2), 1, 0),
    ], np_ref=_np_roll, errors=lambda r: [
        ErrorInput(Sample(f32(r, 5, 3), [1, 2], [0]), RuntimeError, "shifts and dimensions must align. shifts: 2, dims:1"),
        ErrorInput(Sample(f32(r, 5, 3), [], []), RuntimeError, "`shifts` required"),
        ErrorInput(Sample(f32(r, 5, 3), 1, 2), IndexError, "Dimension out of range"),
        ErrorInput(Sample(np.array(2.0, dtype=np.float32), 1, 0), IndexError, "Dimension specified as 0 but tensor has no "
                                                                              "dimensions"),
    ]),
    OpInfo("repeat", lambda r: [
        Sample(f32(r, 2, 3), [2, 2]), Sample(f32(r, 2, 3), [1, 1]), Sample(f32(r, 2, 3), [2, 1, 3]),
        Sample(f32(r, 2, 3), [0, 2]), Sample(i64(r, 4), [3]), Sample(bools(r, 2, 2), [1, 2]),
        Sample(np.array(1.5, dtype=np.float32), []), Sample(np.array(1.5, dtype=np.float32), [2, 3]),
        Sample(f32(r, 1, 3, 1), [2, 1, 2]), Sample(f32(r, 2, 3, 2, 2), [1, 2, 1, 1]),
    ], np_ref=_np_repeat, errors=lambda r: [
        ErrorInput(Sample(f32(r, 5, 3), [2]), RuntimeError, "Number of dimensions of repeat dims can not be smaller than "
                                                            "number of dimensions of tensor"),
        ErrorInput(Sample(f32(r, 5, 3), [2, -1]), RuntimeError, "Trying to create tensor with negative dimension -3"),
    ]),
    OpInfo("tril", lambda r: [
        Sample(f32(r, 4, 4)), Sample(f32(r, 3, 5), 1), Sample(f32(r, 5, 3), -1), Sample(f32(r, 2, 3, 4), 2),
        Sample(i64(r, 3, 3)), Sample(bools(r, 3, 4), -2), Sample(f32(r, 3, 3), 10), Sample(f32(r, 3, 3), -10),
        Sample(np.zeros((0, 3), dtype=np.float32)), Sample(f32(r, 4, 4).astype(np.float16), 1),
        Sample(f32(r, 2, 3, 4, 3), 1),
    ], np_ref=lambda x, diagonal=0: np.tril(x, diagonal), errors=lambda r: [
        ErrorInput(Sample(f32(r, 3)), IndexError, "Dimension out of range"),
        ErrorInput(Sample(np.array(1.0, dtype=np.float32)), IndexError, "Dimension specified as -2 but tensor has no "
                                                                       "dimensions"),
    ]),
    OpInfo("triu", lambda r: [
        Sample(f32(r, 4, 4)), Sample(f32(r, 3, 5), 1), Sample(f32(r, 5, 3), -1), Sample(f32(r, 2, 3, 4), -2),
        Sample(i64(r, 3, 3)), Sample(bools(r, 3, 4), 2), Sample(f32(r, 3, 3), 10),
        Sample(Cast(f32(r, 3, 3), "bfloat16")),
    ], np_ref=lambda x, diagonal=0: np.triu(x, diagonal), errors=lambda r: [
        ErrorInput(Sample(f32(r, 3)), IndexError, "Dimension out of range"),
    ]),
    OpInfo("constant_pad_nd", lambda r: [
        Sample(f32(r, 3, 4), [1, 2]), Sample(f32(r, 3, 4), [1, 1, 2, 0], 1.5), Sample(f32(r, 3, 4), [-1, 2]),
        Sample(f32(r, 3, 4), [-1, -1]), Sample(f32(r, 3, 4), [0, 0]), Sample(f32(r, 3, 4), []),
        Sample(f32(r, 2, 3, 4), [1, 0, 0, 1, 2, 2], -1.0), Sample(i64(r, 3, 3), [1, 1], 7),
        Sample(i64(r, 3, 3).astype(np.int32), [2, 0], 1.5), Sample(bools(r, 2, 3), [1, 1], True),
        Sample(np.zeros((0, 3), dtype=np.float32), [0, 0, 1, 1]), Sample(np.array(2.0, dtype=np.float32), []),
        Sample(f32(r, 4), [-2, 3]), Sample(f32(r, 2, 3, 4, 2), [1, 1, 2, 0]), Sample(f32(r, 2, 3, 4, 2), [0, 0, -1, -1]),
        Sample(f32(r, 2, 3, 1, 1), [1, 1]), Sample(f32(r, 2, 3, 4, 2, 2), [1, 0, 0, 1]),
    ], errors=lambda r: [
        ErrorInput(Sample(f32(r, 5, 3), [1]), RuntimeError, "Length of pad must be even but instead it equals 1"),
        ErrorInput(Sample(f32(r, 5, 3), [1, 1, 1, 1, 1, 1]), RuntimeError,
                   "Length of pad should be no more than twice the number of dimensions of the input"),
        ErrorInput(Sample(f32(r, 5, 3), [-3, -1]), RuntimeError, "start (0) + length (-1) exceeds dimension size (0)."),
        ErrorInput(Sample(f32(r, 5, 3), [-4, 1]), IndexError, "Dimension out of range"),
        ErrorInput(Sample(np.zeros((0, 3), dtype=np.float32), [1, 1, 0, 0]), RuntimeError,
                   "resulted in a negative output size"),
        ErrorInput(Sample(i64(r, 5, 3).astype(np.int8), [1, 1], 1000), RuntimeError,
                   "value cannot be converted to type int8_t without overflow"),
    ]),
    OpInfo("scatter.src", lambda r: _scatter_samples(r, False), errors=lambda r: _scatter_errors(r, False)),
    OpInfo("scatter.value", lambda r: _scatter_samples(r, True), errors=lambda r: _scatter_errors(r, True)),
]

OPINFOS = [
] + _SHAPE_OPINFOS
