"""OpInfo entries of the matmul family beyond matmul, mm and bmm (addmm, baddbmm,
dot, outer, linear); see opinfo.py for how to add one. matmul, mm and bmm
live in opinfo.py; their extra samples (odd layouts, size-0/size-1, integer
dtypes) and error inputs are added here too as separate entries.

Error inputs follow PyTorch 1.13's CPU behaviour (messages quoted from it);
float16 GEMMs are accepted by tensord (computed in float32) where PyTorch's
CPU kernels refuse Half, so no sample uses float16 with a torch reference.
"""
import numpy as np
from opinfo_base import torch  # None without PyTorch (the GPU pack)

from opinfo_base import *  # noqa: F401,F403


def _addmm_ref(self, a, b, beta=1, alpha=1):
    if a.dtype.kind == "i":
        return _int_addmm_ref(self, a, b, beta, alpha)
    prod = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = alpha * prod if beta == 0 else beta * self.astype(np.float64) + alpha * prod
    return out


def _int_addmm_ref(self, a, b, beta=1, alpha=1):
    # Integer dtypes take alpha/beta converted to the integer type (1.5 -> 1).
    prod = np.matmul(a, b)
    return int(beta) * self + int(alpha) * prod


def _nan(*shape):
    return np.full(shape, np.nan, dtype=np.float32)


def _linear_ref(x, w, b=None):
    out = np.matmul(x.astype(np.float64), w.astype(np.float64).T)
    return out if b is None else out + b


def _linear_torch(x, w, b=None):
    return torch.nn.functional.linear(x, w, b)


def _bf16(r, *shape):
    return Cast(f32(r, *shape), "bfloat16")


def _baddbmm_torch(self, batch1, batch2, beta=1, alpha=1):
    """torch.baddbmm, except that beta=0 is computed as beta=1 with a zero
    self: torch 1.13's CPU baddbmm with beta=0 returns NaN in about a third of
    calls (measured: 7344 of 20000; it reads its uninitialised output),
    where its documentation (and tensord) ignore self. The output layout is
    the same, so the metadata comparison holds."""
    if beta == 0:
        self, beta = torch.zeros_like(self), 1
    return torch.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)


OPINFOS = [
    OpInfo("addmm", lambda r: [
        Sample(f32(r, 2, 3), f32(r, 2, 4), f32(r, 4, 3)),
        Sample(f32(r, 3), f32(r, 2, 4), f32(r, 4, 3)),                 # self broadcasts
        Sample(f32(r, 1, 3), f32(r, 2, 4), f32(r, 4, 3), beta=0.5, alpha=2.0),
        Sample(np.array(1.5, dtype=np.float32), f32(r, 3, 2), f32(r, 2, 4)),  # 0-dim self
        Sample(_nan(2, 3), f32(r, 2, 4), f32(r, 4, 3), beta=0),        # beta=0 ignores NaN
        Sample(f64(r, 2, 1), f64(r, 2, 5), f64(r, 5, 3), alpha=-1),
        Sample(i64(r, 2, 3), i64(r, 2, 4), i64(r, 4, 3), beta=2, alpha=3),
        Sample(i32(r, 3), i32(r, 2, 4), i32(r, 4, 3), alpha=1.5),    # alpha truncated to 1
        Sample(f32(r, 0, 3), f32(r, 0, 4), f32(r, 4, 3)),             # size 0
        Sample(f32(r, 2, 3), f32(r, 2, 0), f32(r, 0, 3), beta=2),     # k = 0
        Sample(f32(r, 1, 1), f32(r, 1, 4), f32(r, 4, 1)),             # size 1
        Sample(_bf16(r, 2, 3), _bf16(r, 2, 4), _bf16(r, 4, 3)),
    ], np_ref=_addmm_ref, rtol=1e-5, atol=1e-5, errors=lambda r: [
        ErrorInput(Sample(i64(r, 2, 3), f32(r, 2, 4), f32(r, 4, 3)), RuntimeError,
                   "self and mat2 must have the same dtype"),
        ErrorInput(Sample(f32(r, 2, 3), f64(r, 2, 4), f32(r, 4, 3)), RuntimeError,
                   "mat1 and mat2 must have the same dtype"),
        ErrorInput(Sample(f32(r, 2, 3), f32(r, 2, 4), f32(r, 5, 3)), RuntimeError,
                   "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)"),
        ErrorInput(Sample(f32(r, 2, 3), f32(r, 4), f32(r, 4, 3)), RuntimeError,
                   "mat1 must be a matrix, got 1-D tensor"),
        ErrorInput(Sample(f32(r, 4, 3), f32(r, 2, 4), f32(r, 4, 3)), RuntimeError,
                   "The expanded size of the tensor (2) must match the existing size (4) at non-singleton dimension 0"),
        ErrorInput(Sample(f32(r, 1, 2, 3), f32(r, 2, 4), f32(r, 4, 3)), RuntimeError,
                   "the number of sizes provided (2) must be greater or equal to the number of dimensions in the tensor (3)"),
        ErrorInput(Sample(bools(r, 2, 3), bools(r, 2, 4), bools(r, 4, 3)), RuntimeError,
                   "not implemented for 'Bool'"),
    ]),
    OpInfo("addmm", lambda r: [Sample(i64(r, 2, 3), i64(r, 2, 4), i64(r, 4, 3), beta=0.5, alpha=1.5)],
           np_ref=_int_addmm_ref),
    OpInfo("baddbmm", lambda r: [
        Sample(f32(r, 2, 3, 5), f32(r, 2, 3, 4), f32(r, 2, 4, 5)),
        Sample(i64(r, 2, 3, 5), f32(r, 2, 3, 4), f32(r, 2, 4, 5)),    # int64 self, float32 batches -> float32
        Sample(i64(r, 5), f32(r, 2, 3, 4), f32(r, 2, 4, 5), beta=2.0),
        Sample(f64(r, 2, 3, 5), f32(r, 2, 3, 4), f32(r, 2, 4, 5)),    # float64 self -> float32
        Sample(bools(r, 3, 1), f32(r, 2, 3, 4), f32(r, 2, 4, 5)),     # bool self -> float32
        Sample(f32(r, 1, 1), f32(r, 2, 3, 4), f32(r, 2, 4, 5), beta=0.25, alpha=-2.0),
        Sample(np.array(2.0, dtype=np.float32), f64(r, 2, 3, 4), f64(r, 2, 4, 5)),
        Sample(_nan(2, 3, 5), f32(r, 2, 3, 4), f32(r, 2, 4, 5), beta=0),
        Sample(i32(r, 2, 3, 5), i32(r, 2, 3, 4), i32(r, 2, 4, 5), beta=3, alpha=-2),
        Sample(i32(r, 2, 3, 5), i64(r, 2, 3, 4), i64(r, 2, 4, 5)),    # int32 self, int64 batches -> int64
        Sample(f32(r, 0, 3, 5), f32(r, 0, 3, 4), f32(r, 0, 4, 5)),
        Sample(f32(r, 2, 3, 5), f32(r, 2, 3, 0), f32(r, 2, 0, 5)),
        Sample(f32(r, 1, 1, 5), f32(r, 1, 1, 4), f32(r, 1, 4, 5)),
        Sample(_bf16(r, 2, 3, 5), _bf16(r, 2, 3, 4), _bf16(r, 2, 4, 5)),
    ], np_ref=_addmm_ref, torch_ref=_baddbmm_torch, rtol=1e-5, atol=1e-5, errors=lambda r: [
        ErrorInput(Sample(f32(r, 2, 3, 5), f32(r, 2, 3, 4), f32(r, 2, 4, 5).astype(np.float16)), RuntimeError,
                   "expected scalar type Float but found Half"),
        ErrorInput(Sample(f32(r, 2, 3, 5), f32(r, 2, 3, 4), f64(r, 2, 4, 5)), RuntimeError,
                   "expected scalar type Float but found Double"),
        ErrorInput(Sample(f32(r, 2, 3, 5), f32(r, 2, 3, 4), f32(r, 3, 4, 5)), RuntimeError,
                   "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [3, 4]."),
        ErrorInput(Sample(f32(r, 2, 4, 5), f32(r, 2, 3, 4), f32(r, 2, 4, 5)), RuntimeError,
                   "The expanded size of the tensor (3) must match the existing size (4) at non-singleton dimension 1"),
        ErrorInput(Sample(f32(r, 2, 3, 5), f32(r, 3, 4), f32(r, 2, 4, 5)), RuntimeError, "batch1 must be a 3D tensor"),
        ErrorInput(Sample(f32(r, 2, 3, 5), bools(r, 2, 3, 4), bools(r, 2, 4, 5)), RuntimeError,
                   "not implemented for 'Bool'"),
    ]),
    OpInfo("baddbmm", lambda r: [Sample(i64(r, 1, 2, 2), i64(r, 1, 2, 3), i64(r, 1, 3, 2), beta=0.5, alpha=1.5)],
           np_ref=_int_addmm_ref),
    OpInfo("dot", lambda r: [
        Sample(f32(r, 5), f32(r, 5)),
        Sample(f64(r, 7), f64(r, 7)),
        Sample(i64(r, 6), i64(r, 6)),
        Sample(i32(r, 4), i32(r, 4)),
        Sample(f32(r, 0), f32(r, 0)),
        Sample(f32(r, 1), f32(r, 1)),
        Sample(Cast(ints_as_f32(r, 8), "bfloat16"), Cast(ints_as_f32(r, 8), "bfloat16")),
    ], np_ref=np.dot, rtol=1e-5, atol=1e-5, errors=lambda r: [
        ErrorInput(Sample(f32(r, 3, 1), f32(r, 3)), RuntimeError, "1D tensors expected, but got 2D and 1D tensors"),
        ErrorInput(Sample(np.array(1.0, dtype=np.float32), f32(r, 3)), RuntimeError,
                   "1D tensors expected, but got 0D and 1D tensors"),
        ErrorInput(Sample(f32(r, 3), f32(r, 4)), RuntimeError,
                   "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of elements, "
                   "but got 3 and 4 elements respectively"),
        ErrorInput(Sample(f32(r, 3), f64(r, 3)), RuntimeError,
                   "expected both vectors to have same dtype, but found Float and Double"),
        ErrorInput(Sample(bools(r, 3), bools(r, 3)), RuntimeError, "not implemented for 'Bool'"),
    ]),
    OpInfo("outer", lambda r: [
        Sample(f32(r, 3), f32(r, 4)),
        Sample(i64(r, 3), f32(r, 4)),                                 # promotes like mul
        Sample(f64(r, 2), f32(r, 5)),
        Sample(i64(r, 4), i32(r, 2)),
        Sample(bools(r, 3), bools(r, 4)),
        Sample(f32(r, 0), f32(r, 4)),
        Sample(f32(r, 1), f32(r, 4)),
        Sample(f32(r, 3), f32(r, 1)),
        Sample(_bf16(r, 3), f32(r, 2)),
    ], np_ref=np.outer, errors=lambda r: [
        ErrorInput(Sample(f32(r, 3, 1), f32(r, 4)), RuntimeError, "Expected 1-D argument self, but got 2-D"),
        ErrorInput(Sample(f32(r, 3), np.array(1.0, dtype=np.float32)), RuntimeError,
                   "Expected 1-D argument vec2, but got 0-D"),
    ]),
    OpInfo("linear", lambda r: [
        Sample(f32(r, 2, 3), f32(r, 4, 3)),
        Sample(f32(r, 2, 3), f32(r, 4, 3), f32(r, 4)),                # addmm path
        Sample(f32(r, 3), f32(r, 4, 3), f32(r, 4)),                   # 1-D input
        Sample(f32(r, 2, 3), f32(r, 3)),                              # 1-D weight
        Sample(f32(r, 3), f32(r, 3)),                                 # 1-D x 1-D -> 0-dim
        Sample(f32(r, 2, 5, 3), f32(r, 4, 3), f32(r, 4)),             # 3-D (folded addmm when contiguous)
        Sample(f32(r, 2, 5, 3), f32(r, 4, 3)),
        Sample(f32(r, 2, 2, 5, 3), f32(r, 4, 3), f32(r, 4)),          # matmul + add_
        Sample(f32(r, 2, 2, 5, 3), f32(r, 4, 3), f32(r, 5, 4)),       # bias broadcast over rows
        Sample(f32(r, 2, 2, 5, 3), f32(r, 4, 3), f64(r, 4)),          # float64 bias cast into float32
        Sample(f32(r, 2, 2, 5, 3), f32(r, 3), f32(r, 5)),             # 1-D weight with bias
        Sample(f64(r, 2, 3), f64(r, 4, 3), np.array(0.5)),            # 0-dim bias
        Sample(i64(r, 2, 3), i64(r, 4, 3), i64(r, 4)),
        Sample(f32(r, 0, 3), f32(r, 4, 3), f32(r, 4)),
        Sample(f32(r, 2, 0, 3), f32(r, 4, 3), f32(r, 4)),
        Sample(f32(r, 1, 3), f32(r, 1, 3), f32(r, 1)),
        Sample(f32(r, 2, 0), f32(r, 4, 0), f32(r, 4)),                # k = 0
    ], np_ref=_linear_ref, torch_ref=_linear_torch, rtol=1e-5, atol=1e-5, errors=lambda r: [
        ErrorInput(Sample(f32(r, 2, 3), f32(r, 4, 5)), RuntimeError,
                   "mat1 and mat2 shapes cannot be multiplied (2x3 and 5x4)"),
        ErrorInput(Sample(f32(r, 2, 5, 3), f32(r, 4, 5)), RuntimeError, "(10x3 and 5x4)"),
        ErrorInput(Sample(f32(r, 3), f32(r, 4, 5)), RuntimeError, "(1x3 and 5x4)"),
        ErrorInput(Sample(f32(r, 2, 3), f32(r, 4, 3), f32(r, 5)), RuntimeError,
                   "The expanded size of the tensor (4) must match the existing size (5) at non-singleton dimension 1"),
        ErrorInput(Sample(f32(r, 2, 3), f32(r, 2, 4, 3)), RuntimeError,
                   "t() expects a tensor with <= 2 dimensions, but self is 3D"),
        ErrorInput(Sample(f32(r, 2, 3), f64(r, 4, 3)), RuntimeError, "expected scalar type Float but found Double"),
        ErrorInput(Sample(f32(r, 2, 3), f32(r, 4, 3), f64(r, 4)), RuntimeError,
                   "self and mat2 must have the same dtype"),
        ErrorInput(Sample(i64(r, 2, 2, 2, 3), i64(r, 4, 3), f32(r, 4)), RuntimeError,
                   "result type Float can't be cast to the desired output type Long"),
        ErrorInput(Sample(f32(r, 2, 2, 2, 3), f32(r, 4, 3), f32(r, 3, 2, 2, 2, 4)), RuntimeError,
                   "output with shape [2, 2, 2, 4] doesn't match the broadcast shape [3, 2, 2, 2, 4]"),
        ErrorInput(Sample(np.array(1.0, dtype=np.float32), f32(r, 4, 3)), RuntimeError,
                   "both arguments to matmul need to be at least 1D, but they are 0D and 2D"),
    ]),
    # More layouts and dtypes for the existing matmul ops (their main entries are in opinfo.py).
    OpInfo("matmul", lambda r: [
        Sample(f32(r, 0, 4), f32(r, 2, 4, 5)),                        # empty 2-D @ 3-D: PyTorch's transposed layout
        Sample(f32(r, 3, 4), f32(r, 2, 4, 0)),
        Sample(f32(r, 3, 4), f32(r, 0, 4, 5)),
        Sample(f32(r, 3, 4), f32(r, 2, 0, 4, 2)),
        Sample(f32(r, 2, 0, 4), f32(r, 4, 5)),
        Sample(f32(r, 4), f32(r, 0, 4, 5)),
        Sample(f32(r, 0, 3, 4), f32(r, 4)),
        Sample(f32(r, 0), f32(r, 0, 3)),
        Sample(f32(r, 2, 1, 3, 4), f32(r, 1, 5, 4, 2)),
        Sample(f32(r, 1, 4), f32(r, 2, 4, 5)),                        # size-1 rows on the folded path
        Sample(f32(r, 3, 4), f32(r, 2, 4, 1)),
        Sample(f32(r, 2, 5, 3), f32(r, 3, 1)),
        Sample(i64(r, 2, 3, 4), i64(r, 4, 2)),
        Sample(i32(r, 3, 4), i32(r, 4)),
        Sample(_bf16(r, 2, 2, 3), _bf16(r, 3, 5)),
    ], np_ref=np.matmul, rtol=1e-5, atol=1e-5, errors=lambda r: [
        ErrorInput(Sample(f32(r, 3, 4), f64(r, 4, 5)), RuntimeError, "expected scalar type Float but found Double"),
        ErrorInput(Sample(f32(r, 2, 2, 3), f32(r, 3, 3, 5)), RuntimeError,
                   "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"),
        ErrorInput(Sample(bools(r, 2, 2), bools(r, 2, 2)), RuntimeError, "not implemented for 'Bool'"),
    ]),
    OpInfo("mm", lambda r: [
        Sample(f32(r, 0, 4), f32(r, 4, 5)),
        Sample(f32(r, 3, 0), f32(r, 0, 5)),
        Sample(f32(r, 1, 4), f32(r, 4, 1)),
        Sample(i64(r, 3, 4), i64(r, 4, 2)),
        Sample(_bf16(r, 3, 4), _bf16(r, 4, 2)),
        # float16: computed in float32, rounded once; torch 1.13's CPU has no Half mm (meta_deviations.txt)
        Sample(f32(r, 3, 4).astype(np.float16), f32(r, 4, 2).astype(np.float16)),
    ], np_ref=np.matmul, rtol=1e-5, atol=1e-5, errors=lambda r: [
        ErrorInput(Sample(f32(r, 3, 4), f64(r, 4, 5)), RuntimeError, "expected scalar type Float but found Double"),
        ErrorInput(Sample(bools(r, 2, 2), bools(r, 2, 2)), RuntimeError, "not implemented for 'Bool'"),
    ]),
    OpInfo("bmm", lambda r: [
        Sample(f32(r, 0, 3, 4), f32(r, 0, 4, 5)),
        Sample(f32(r, 2, 1, 4), f32(r, 2, 4, 1)),
        Sample(f64(r, 2, 3, 0), f64(r, 2, 0, 5)),
        Sample(i32(r, 2, 3, 4), i32(r, 2, 4, 5)),
        Sample(_bf16(r, 2, 3, 4), _bf16(r, 2, 4, 5)),
        Sample(f32(r, 2, 3, 4).astype(np.float16), f32(r, 2, 4, 5).astype(np.float16)),   # see mm
    ], np_ref=np.matmul, rtol=1e-5, atol=1e-5, errors=lambda r: [
        # float16 with float32 is an error on real and therefore on meta; PyTorch's text depends on the order.
        ErrorInput(Sample(f32(r, 2, 3, 4), f32(r, 2, 4, 5).astype(np.float16)), RuntimeError,
                   "expected scalar type Float but found Half"),
        ErrorInput(Sample(f32(r, 2, 3, 4).astype(np.float16), f32(r, 2, 4, 5)), RuntimeError, "Half"),
        ErrorInput(Sample(bools(r, 2, 2, 2), bools(r, 2, 2, 2)), RuntimeError, "not implemented for 'Bool'"),
    ]),
]
