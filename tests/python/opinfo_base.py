"""The building blocks of the OpInfo database (opinfo.py and opinfo_*.py):
OpInfo, Sample, ErrorInput, dtype markers and sample makers.

To add an op: add an ``OpInfo`` below with a few samples (NumPy arrays become
tensors; other values are passed as they are; ``D("float64")`` is a dtype)
and, where NumPy has the op, an ``np_ref``. Every sample is also compared with
PyTorch 1.13 (values *and* dtype) through ``torch_ref`` (by default the torch
function or method of the same name). ``test_opinfo_completeness`` fails
while an op of the table has no entry here.
"""
import numpy as np
try:
    import torch
except ImportError:
    # The GPU pack's Python (scripts/gpu-check.sh) has no PyTorch: the device
    # suites compare each device with tensord's own CPU and never call a
    # torch reference, which would fail loudly on None if one did.
    torch = None




class D:
    """A dtype in a sample, by name: becomes tensord.<name> or torch.<name>."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"D({self.name!r})"


class Cast:
    """An array uploaded and then converted to a dtype NumPy lacks (bfloat16, float8):
    ``Cast(arr, "bfloat16")`` is ``tensord.from_numpy(arr).to(tensord.bfloat16)``."""

    def __init__(self, array, dtype):
        self.array = array
        self.dtype = dtype

    def __repr__(self):
        return f"Cast(array{list(self.array.shape)}, {self.dtype})"


class Sample:
    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs

    def __repr__(self):
        def r(a):
            if isinstance(a, np.ndarray):
                return f"array{list(a.shape)}:{a.dtype}"
            if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
                return "[" + ", ".join(r(x) for x in a) + "]"
            return repr(a)
        parts = [r(a) for a in self.args] + [f"{k}={r(v)}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


_METHOD_ONLY = {"view", "expand", "contiguous", "to"}


def _default_torch(full_name):
    base, _, overload = full_name.partition(".")

    def run(*args, **kwargs):
        if base in ("slice", "index"):
            return getattr(torch.ops.aten, base).Tensor(*args, **kwargs)
        if base not in _METHOD_ONLY and hasattr(torch, base):
            return getattr(torch, base)(*args, **kwargs)
        return getattr(args[0], base)(*args[1:], **kwargs)
    return run


class ErrorInput:
    """A call that must fail: ``sample`` raises ``error`` (an exception class)
    whose message contains ``match``, on real tensors (at the call or at the
    next sync) and, with the same type and message, on meta tensors.
    ``data_dependent=True``: only the kernel can see it (an index out of
    range, an integer division by zero), so meta is not expected to raise."""

    def __init__(self, sample, error, match, data_dependent=False):
        self.sample = sample
        self.error = error
        self.match = match
        self.data_dependent = data_dependent

    def __repr__(self):
        return f"ErrorInput({self.sample!r}, {self.error.__name__}, {self.match!r})"


class OpInfo:
    """Samples and references of one op (full name, e.g. 'add.Scalar').

    samples(rng) -> [Sample]; np_ref(*numpy args, **kwargs) -> array or tuple;
    torch_ref(*torch args, **kwargs) -> torch tensor(s) (None: no torch check);
    random: only shape/dtype (and the range for rand) can be compared;
    shape_only: values are unspecified (empty); data_dependent: no meta;
    noncontig: also run with the other layouts of the tensor inputs (transposed,
    permuted, strided slices with offsets);
    errors(rng) -> [ErrorInput]: calls that must raise, on real and on meta;
    skip_layouts: layouts whose inputs the op cannot be compared on (e.g.
    "expanded" repeats values, so the order of tied indices is unspecified);
    torch_meta: compare output metadata (strides, offset, aliasing) with
    torch_ref's (False when torch_ref is not the same op, e.g. a composite)."""

    def __init__(self, name, samples, np_ref=None, torch_ref="default", random=False, shape_only=False,
                 rtol=1.3e-6, atol=1e-5, noncontig=True, errors=None, torch_meta=True,
                 skip_layouts=()):
        self.name = name
        self.skip_layouts = skip_layouts
        self.torch_meta = torch_meta
        self.samples = samples
        self.errors = errors if errors is not None else (lambda rng: [])
        self.np_ref = np_ref
        self.torch_ref = _default_torch(name) if torch_ref == "default" else torch_ref
        self.random = random
        self.shape_only = shape_only or random
        self.rtol = rtol
        self.atol = atol
        self.noncontig = noncontig

    def __repr__(self):
        return f"OpInfo({self.name})"


# ---------------------------------------------------------------- helpers

def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def f64(rng, *shape):
    return rng.standard_normal(shape)


def pos32(rng, *shape):
    return rng.uniform(0.5, 2.0, shape).astype(np.float32)


def i64(rng, *shape, lo=-5, hi=6):
    return rng.integers(lo, hi, shape).astype(np.int64)


def i32(rng, *shape, lo=-5, hi=6):
    return rng.integers(lo, hi, shape).astype(np.int32)


def bools(rng, *shape):
    return rng.random(shape) < 0.5


def ints_as_f32(rng, *shape):
    """Small integer values in float32 (ties for comparisons, exact sums)."""
    return rng.integers(-3, 4, shape).astype(np.float32)


def with_specials(rng, *shape):
    a = f32(rng, *shape).reshape(-1)
    a[:4] = [np.nan, np.inf, -np.inf, 0.0]
    return a.reshape(shape)


def unary(name, np_fn, kinds=("f32",), **kw):
    makers = {"f32": lambda r: f32(r, 3, 4), "f64": lambda r: f64(r, 2, 5), "i64": lambda r: i64(r, 3, 4),
              "i32": lambda r: i32(r, 4, 3), "bool": lambda r: bools(r, 3, 4), "pos": lambda r: pos32(r, 3, 4),
              "f32_1d": lambda r: f32(r, 7), "pos_1d": lambda r: pos32(r, 7), "f32_0d": lambda r: np.array(1.5, dtype=np.float32),
              "f16": lambda r: f32(r, 3, 4).astype(np.float16),
              # (N, C, 1, 1): in the channels_last layout its strides are (C, 1, C, C)
              "nc11": lambda r: f32(r, 2, 3, 1, 1)}
    return OpInfo(name, lambda r: [Sample(makers[k](r)) for k in kinds], np_ref=np_fn, **kw)


def binary(name, np_fn, kinds=("same", "broadcast", "mixed"), **kw):
    def samples(r):
        out = []
        for k in kinds:
            if k == "same":
                out.append(Sample(f32(r, 3, 4), f32(r, 3, 4)))
            elif k == "broadcast":
                out.append(Sample(f32(r, 3, 1), f32(r, 1, 4)))
            elif k == "mixed":      # int64 with float32 -> float32
                out.append(Sample(i64(r, 2, 3), f32(r, 2, 3)))
            elif k == "int":
                out.append(Sample(i64(r, 4, 3), i64(r, 4, 3, lo=1, hi=5)))
            elif k == "zero_dim":   # a 0-dim int64 tensor does not widen int32
                out.append(Sample(i32(r, 3, 2), np.array(3, dtype=np.int64)))
            elif k == "pos":
                out.append(Sample(pos32(r, 3, 4), f32(r, 3, 4)))
            elif k == "ties":
                out.append(Sample(ints_as_f32(r, 4, 5), ints_as_f32(r, 4, 5)))
            elif k == "bool":
                out.append(Sample(bools(r, 3, 4), bools(r, 3, 4)))
            elif k == "f64_f32":
                out.append(Sample(f64(r, 2, 3), f32(r, 2, 3)))
            elif k == "f16":
                out.append(Sample(f32(r, 3, 4).astype(np.float16), f32(r, 3, 4).astype(np.float16)))
            elif k == "bf16_0d_f32":  # a 0-dim float32 tensor does not widen bfloat16
                out.append(Sample(Cast(f32(r, 3, 4), "bfloat16"), np.array(1.5, dtype=np.float32)))
            elif k == "nc11":       # (N, C, 1, 1); channels_last gives strides (C, 1, C, C)
                out.append(Sample(f32(r, 2, 3, 1, 1), f32(r, 2, 3, 1, 1)))
            elif k == "bf16_f16":   # bfloat16 with float16 promotes to float32
                out.append(Sample(Cast(f32(r, 3, 4), "bfloat16"), f32(r, 3, 4).astype(np.float16)))
        return out
    return OpInfo(name, samples, np_ref=np_fn, **kw)


def scalar_op(name, np_fn, scalars=(2.5, 2, -3), tensor=lambda r: f32(r, 3, 4), int_tensor=True, **kw):
    def samples(r):
        out = [Sample(tensor(r), s) for s in scalars]
        if int_tensor:
            out.append(Sample(i64(r, 2, 3), 2))      # stays int64
            out.append(Sample(i32(r, 2, 3), 1.5))    # int + float scalar -> float32
        return out
    return OpInfo(name, samples, np_ref=np_fn, **kw)


def _sum_ref(x, dim=None, keepdim=False, dtype=None):
    return np.sum(x, axis=None if dim is None else tuple(np.atleast_1d(dim)), keepdims=keepdim)


def _topk_torch(x, k, dim=-1, largest=True, sorted=True):
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
