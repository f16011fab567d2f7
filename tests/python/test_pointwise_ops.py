"""The pointwise ops exp2 ... lerp beyond what test_opinfo.py checks:

- every ErrorInput of opinfo_pointwise.py raises on real tensors (at the call
  or at the sync point), the same error on meta tensors unless it needs data
  (ZeroDivisionError), and PyTorch 1.13 raises it too;
- on odd layouts (transposed, permuted 3-D/4-D, (N, C, 1, 1) with strides
  (C, 1, C, C), sliced with steps and an offset, expanded, size-0, size-1,
  0-dim) and operand mixes (same layout, contiguous partner, 0-dim partner,
  Python scalar), sizes, strides, storage offset and dtype equal PyTorch's on
  meta and on the daemon, and the values equal PyTorch's;
- the Python operators <<, >>, // and their reflected forms;
- double backward of the new formulas.
"""
import numpy as np
import pytest
import torch

import tensord
from tensord import _C
from tensord.autograd import gradgradcheck

from test_opinfo import host

# Error inputs run on real, meta and torch in test_opinfo.py.


# ---------------------------------------------------------------- layouts

# name -> (base shape, view applied identically to torch and tensord tensors)
LAYOUTS = {
    "contiguous": ((2, 3, 4), lambda t: t),
    "transposed": ((4, 3), lambda t: t.transpose(0, 1)),
    "permuted3d": ((2, 3, 4), lambda t: t.permute(2, 0, 1)),
    "nc11": ((2, 1, 1, 3), lambda t: t.permute(0, 3, 1, 2)),       # sizes (2,3,1,1), strides (3,1,3,3)
    "permuted4d": ((1, 3, 1, 2), lambda t: t.permute(3, 1, 0, 2)),
    "sliced": ((6, 8), lambda t: t[1::2, ::3]),
    "expanded": ((3, 1), lambda t: t.expand(3, 4)),
    "size0": ((0, 3), lambda t: t),
    "size1": ((1, 4, 1), lambda t: t),
    "zerodim": ((), lambda t: t),
}

_DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "int8": np.int8,
           "bool": np.bool_}


def _array(rng, shape, dtype, kind):
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if kind == "positive":
        a = rng.uniform(0.5, 3.0, shape)
    elif kind == "nonzero":
        a = rng.integers(1, 6, shape) * np.where(rng.random(shape) < 0.5, -1, 1)
    elif kind == "shift":
        a = rng.integers(0, 7, shape)
    else:
        a = rng.standard_normal(shape) * 4
    if np.dtype(_DTYPES[dtype]).kind in "iu":
        a = np.round(a)
    return np.asarray(a).astype(_DTYPES[dtype])


def _pair(arr, layout, device):
    """The same view of `arr` in torch and in tensord (real or meta)."""
    view = LAYOUTS[layout][1]
    ours = tensord.from_numpy(arr) if device is None else tensord.tensor(arr, device=device)
    ref = torch.from_numpy(arr.copy())
    if ref.numel() == 0:   # NumPy gives empty arrays zero strides; start both sides contiguous
        ref = torch.empty(arr.shape, dtype=ref.dtype)
    return view(ref), view(ours)


def _meta(t):
    m = _C._client_meta(t)
    return tuple(m["sizes"]), tuple(m["strides"]), m["storage_offset"], t.dtype._name


def _torch_meta(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset(), str(t.dtype).replace("torch.", "")


# (op, tensord callable, torch callable, operand kinds, dtypes)
UNARY = [
    ("exp2", tensord.exp2, torch.exp2, ("any",), ("float32", "int64", "bool")),
    ("expm1", tensord.expm1, torch.expm1, ("any",), ("float64", "int32")),
    ("log2", tensord.log2, torch.log2, ("positive",), ("float32", "int64")),
    ("log1p", tensord.log1p, torch.log1p, ("positive",), ("float32", "int8")),
    ("silu", tensord.silu, torch.nn.functional.silu, ("any",), ("float32", "float64")),
    ("square", tensord.square, torch.square, ("any",), ("float32", "int64", "bool")),
]
BINARY = [
    ("atan2", tensord.atan2, torch.atan2, ("any", "any"), ("float32", "int64")),
    ("fmod", tensord.fmod, torch.fmod, ("any", "nonzero"), ("float32", "int64")),
    ("div_floor", lambda a, b: tensord.div(a, b, rounding_mode="floor"),
     lambda a, b: torch.div(a, b, rounding_mode="floor"), ("any", "nonzero"), ("float32", "int32")),
    ("div_trunc", lambda a, b: tensord.div(a, b, rounding_mode="trunc"),
     lambda a, b: torch.div(a, b, rounding_mode="trunc"), ("any", "nonzero"), ("float64", "int64")),
    ("div_none", lambda a, b: tensord.div(a, b, rounding_mode=None),
     lambda a, b: torch.div(a, b, rounding_mode=None), ("any", "nonzero"), ("int64",)),
    ("floor_divide", tensord.floor_divide, torch.floor_divide, ("any", "nonzero"), ("float32", "int64")),
    ("lshift", tensord.bitwise_left_shift, torch.bitwise_left_shift, ("any", "shift"), ("int64", "int8")),
    ("rshift", tensord.bitwise_right_shift, torch.bitwise_right_shift, ("any", "shift"), ("int32",)),
    ("lerp_scalar", lambda a, b: tensord.lerp(a, b, 0.3), lambda a, b: torch.lerp(a, b, 0.3), ("any", "any"),
     ("float32", "float64")),
]
# The second operand: same layout, contiguous of the result's shape, 0-dim tensor, Python scalar.
PARTNERS = ("same", "contiguous", "zerodim", "scalar")


def _check(name, ours_real, ours_meta, ref):
    assert _torch_meta(ref) == _meta(ours_real), f"{name}: daemon metadata differs from torch"
    assert _meta(ours_meta) == _meta(ours_real), f"{name}: meta prediction differs from the daemon"
    got, want = host(ours_real), host(ref)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def _unary_cases():
    return [pytest.param(op, layout, dt, id=f"{op[0]}-{layout}-{dt}")
            for op in UNARY for layout in LAYOUTS for dt in op[4]]


@pytest.mark.parametrize("op,layout,dtype", _unary_cases())
def test_unary_layouts_match_torch(session, op, layout, dtype):
    name, ours_fn, torch_fn, kinds, _ = op
    arr = _array(np.random.default_rng(7), LAYOUTS[layout][0], dtype, kinds[0])
    ref_in, real_in = _pair(arr, layout, None)
    _, meta_in = _pair(arr, layout, "meta")
    _check(name, ours_fn(real_in), ours_fn(meta_in), torch_fn(ref_in))


def _binary_cases():
    return [pytest.param(op, layout, partner, dt, id=f"{op[0]}-{layout}-{partner}-{dt}")
            for op in BINARY for layout in LAYOUTS for partner in PARTNERS for dt in op[4]]


@pytest.mark.parametrize("op,layout,partner,dtype", _binary_cases())
def test_binary_layouts_match_torch(session, op, layout, partner, dtype):
    name, ours_fn, torch_fn, kinds, _ = op
    rng = np.random.default_rng(11)
    a = _array(rng, LAYOUTS[layout][0], dtype, kinds[0])
    ref_a, real_a = _pair(a, layout, None)
    _, meta_a = _pair(a, layout, "meta")
    if partner == "same":
        b = _array(rng, LAYOUTS[layout][0], dtype, kinds[1])
        ref_b, real_b = _pair(b, layout, None)
        _, meta_b = _pair(b, layout, "meta")
    elif partner == "scalar":
        if name.startswith("lerp") or name == "atan2":
            pytest.skip(f"{name} has no Scalar overload")
        v = _array(rng, (), dtype, kinds[1]).item()
        ref_b = real_b = meta_b = v
    else:
        shape = tuple(ref_a.shape) if partner == "contiguous" else ()
        b = _array(rng, shape, dtype, kinds[1])
        ref_b, real_b, meta_b = torch.from_numpy(b.copy()), tensord.from_numpy(b), tensord.tensor(b, device="meta")
    _check(name, ours_fn(real_a, real_b), ours_fn(meta_a, meta_b), torch_fn(ref_a, ref_b))
    if partner in ("same", "contiguous") and kinds[0] == kinds[1]:   # the other operand order
        _check(name + " (swapped)", ours_fn(real_b, real_a), ours_fn(meta_b, meta_a), torch_fn(ref_b, ref_a))


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("weight", ("same", "zerodim", "contiguous"))
def test_lerp_tensor_layouts_match_torch(session, layout, weight):
    rng = np.random.default_rng(3)
    shape = LAYOUTS[layout][0]
    a, b = _array(rng, shape, "float32", "any"), _array(rng, shape, "float32", "any")
    (ra, ta), (rb, tb) = _pair(a, layout, None), _pair(b, layout, None)
    (_, ma), (_, mb) = _pair(a, layout, "meta"), _pair(b, layout, "meta")
    if weight == "same":
        w = _array(rng, shape, "float32", "any")
        (rw, tw), (_, mw) = _pair(w, layout, None), _pair(w, layout, "meta")
    else:
        w = _array(rng, tuple(ra.shape) if weight == "contiguous" else (), "float32", "any")
        rw, tw, mw = torch.from_numpy(w.copy()), tensord.from_numpy(w), tensord.tensor(w, device="meta")
    _check("lerp.Tensor", tensord.lerp(ta, tb, tw), tensord.lerp(ma, mb, mw), torch.lerp(ra, rb, rw))
    _check("lerp.Tensor (weight first)", tensord.lerp(tw, tw, ta), tensord.lerp(mw, mw, ma), torch.lerp(rw, rw, ra))


@pytest.mark.parametrize("layout", [l for l in LAYOUTS if l != "expanded"])
def test_relu_inplace_keeps_self(session, layout):
    a = _array(np.random.default_rng(5), LAYOUTS[layout][0], "float32", "any")
    ref, ours = _pair(a, layout, None)
    _, meta = _pair(a, layout, "meta")
    r = ours.relu_()
    assert r is ours
    assert _meta(meta.relu_()) == _meta(ours) == _torch_meta(ref.relu_())
    np.testing.assert_array_equal(host(ours), host(ref))


def test_relu_inplace_refuses_overlap(session):
    t = tensord.zeros(3, 1).expand(3, 4)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        t.relu_()


# ---------------------------------------------------------------- operators

def test_shift_and_floordiv_operators(session):
    a = np.array([[1, -8, 100], [7, 0, -3]], dtype=np.int64)
    b = np.array([1, 2, 3], dtype=np.int64)
    t, u, ta, tb = tensord.from_numpy(a), tensord.from_numpy(b), torch.from_numpy(a), torch.from_numpy(b)
    pairs = [(t << u, ta << tb), (t >> u, ta >> tb), (t << 2, ta << 2), (t >> 1, ta >> 1),
             (3 << u, 3 << tb), (-64 >> u, -64 >> tb), (t // u, ta // tb), (t // -2, ta // -2), (7 // u, 7 // tb)]
    for ours, ref in pairs:
        assert ours.dtype._name == str(ref.dtype).replace("torch.", "")
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    f = tensord.from_numpy(np.array([7.5, -7.5, 3.0], dtype=np.float32))
    np.testing.assert_array_equal((f // 2).numpy(), np.array([3.0, -4.0, 1.0], dtype=np.float32))
    np.testing.assert_array_equal((10 // f).numpy(), (10 // torch.tensor([7.5, -7.5, 3.0])).numpy())
    with pytest.raises(RuntimeError, match="not implemented for 'Float'"):
        f << 1
    with pytest.raises(RuntimeError, match="not implemented for 'Float'"):
        1.5 >> u
    s = t.clone()
    s <<= 1                  # no in-place shift op: rebinds to a new tensor, as a // does
    np.testing.assert_array_equal(s.numpy(), a << 1)


def test_integer_division_by_zero_names_the_op(session):
    t = tensord.from_numpy(np.array([1, 2, 3], dtype=np.int64))
    out = tensord.div(t, 0, rounding_mode="trunc")    # meta cannot know: no error at the call
    assert out.shape == (3,)
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as e:
        out.numpy()
    assert "div" in str(e.value)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tensord.fmod(t, tensord.zeros(3, dtype=tensord.int64)).numpy()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (t // 0).numpy()


def test_extreme_integer_division_wraps(session):
    """INT64_MIN / -1 traps in PyTorch 1.13 (SIGFPE); here it wraps to INT64_MIN and fmod gives 0."""
    m = tensord.from_numpy(np.array([np.iinfo(np.int64).min, 7], dtype=np.int64))
    np.testing.assert_array_equal(tensord.div(m, -1, rounding_mode="floor").numpy(), [np.iinfo(np.int64).min, -7])
    np.testing.assert_array_equal(tensord.div(m, -1, rounding_mode="trunc").numpy(), [np.iinfo(np.int64).min, -7])
    np.testing.assert_array_equal(tensord.fmod(m, -1).numpy(), [0, 0])


def test_out_of_range_shift_counts(session):
    """Counts outside [0, bits): << gives 0, >> the sign fill (PyTorch >= 2.0's rule; 1.13 is undefined)."""
    a = tensord.from_numpy(np.array([1, -1, -8, 8], dtype=np.int64))
    n = tensord.from_numpy(np.array([64, -1, 100, 70], dtype=np.int64))
    np.testing.assert_array_equal(tensord.bitwise_left_shift(a, n).numpy(), [0, 0, 0, 0])
    np.testing.assert_array_equal(tensord.bitwise_right_shift(a, n).numpy(), [0, -1, -1, 0])
    u = tensord.from_numpy(np.array([200, 3], dtype=np.uint8))
    np.testing.assert_array_equal((u >> 9).numpy(), [0, 0])
    np.testing.assert_array_equal((u << 8).numpy(), [0, 0])


# ---------------------------------------------------------------- double backward

def _t(*shape, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
    return tensord.from_numpy(a).requires_grad_()


GRADGRAD = [
    ("exp2", lambda x: tensord.exp2(x), lambda: (_t(4),)),
    ("expm1", lambda x: tensord.expm1(x), lambda: (_t(4, seed=1),)),
    ("log2", lambda x: tensord.log2(x), lambda: (_t(4, seed=2, positive=True),)),
    ("log1p", lambda x: tensord.log1p(x), lambda: (_t(4, seed=3, positive=True),)),
    ("silu", lambda x: tensord.silu(x), lambda: (_t(5, seed=4),)),
    ("square", lambda x: tensord.square(x), lambda: (_t(3, seed=5),)),
    ("atan2", lambda a, b: tensord.atan2(a, b), lambda: (_t(3, seed=6), _t(3, seed=7))),
    ("fmod", lambda a, b: tensord.fmod(a, b), lambda: (_t(3, seed=8), _t(3, seed=9, positive=True))),
    ("lerp.Scalar", lambda a, b: tensord.lerp(a, b, 0.3), lambda: (_t(3, seed=10), _t(3, seed=11))),
    ("lerp.Tensor", lambda a, b, w: tensord.lerp(a, b, w),
     lambda: (_t(3, seed=12), _t(3, seed=13), _t(3, seed=14))),
    ("div.Tensor_mode", lambda a, b: tensord.div(a, b, rounding_mode=None),
     lambda: (_t(3, seed=15), _t(3, seed=16, positive=True))),
]


@pytest.mark.parametrize("name,fn,make", GRADGRAD, ids=[g[0] for g in GRADGRAD])
def test_gradgradcheck_pointwise(session, name, fn, make):
    assert gradgradcheck(fn, make())


def test_rounding_division_has_zero_gradient(session):
    a, b = _t(4, seed=1), _t(4, seed=2, positive=True)
    for mode in ("floor", "trunc"):
        ga, gb = tensord.autograd.grad(tensord.div(a, b, rounding_mode=mode).sum(), (a, b))
        np.testing.assert_array_equal(ga.numpy(), np.zeros(4))
        np.testing.assert_array_equal(gb.numpy(), np.zeros(4))


# ---------------------------------------------------------------- special values

_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, -2.0, 1e-7, 3.5], dtype=np.float32)
_DIVISORS = np.array([2.0, -3.0, 0.0, -0.0, np.inf, np.nan, 0.5, 0.0, -np.inf, 1.0], dtype=np.float32)

SPECIAL_CASES = [
    ("exp2", lambda x, y: tensord.exp2(x), lambda x, y: torch.exp2(x)),
    ("expm1", lambda x, y: tensord.expm1(x), lambda x, y: torch.expm1(x)),
    ("log2", lambda x, y: tensord.log2(x), lambda x, y: torch.log2(x)),
    ("log1p", lambda x, y: tensord.log1p(x), lambda x, y: torch.log1p(x)),
    ("silu", lambda x, y: tensord.silu(x), lambda x, y: torch.nn.functional.silu(x)),
    ("square", lambda x, y: tensord.square(x), lambda x, y: torch.square(x)),
    ("relu_", lambda x, y: x.clone().relu_(), lambda x, y: x.clone().relu_()),
    ("div_floor", lambda x, y: tensord.div(x, y, rounding_mode="floor"),
     lambda x, y: torch.div(x, y, rounding_mode="floor")),
    ("div_trunc", lambda x, y: tensord.div(x, y, rounding_mode="trunc"),
     lambda x, y: torch.div(x, y, rounding_mode="trunc")),
    ("floor_divide_scalar0", lambda x, y: tensord.floor_divide(x, 0.0), lambda x, y: torch.floor_divide(x, 0.0)),
    ("fmod", lambda x, y: tensord.fmod(x, y), lambda x, y: torch.fmod(x, y)),
    ("atan2", lambda x, y: tensord.atan2(x, y), lambda x, y: torch.atan2(x, y)),
    ("lerp", lambda x, y: tensord.lerp(x, y, 0.5), lambda x, y: torch.lerp(x, y, 0.5)),
]


@pytest.mark.parametrize("name,ours,ref", SPECIAL_CASES, ids=[c[0] for c in SPECIAL_CASES])
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_special_values_match_torch(session, name, ours, ref, dtype):
    x, y = _SPECIAL.astype(dtype), _DIVISORS.astype(dtype)
    got = ours(tensord.from_numpy(x), tensord.from_numpy(y)).numpy()
    want = ref(torch.from_numpy(x.copy()), torch.from_numpy(y.copy())).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, equal_nan=True)
    # signed zeros agree too (floor of -0.5 / inf is -0.0 in both)
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


def test_large_tensors_split_across_cores_match_numpy(session):
    """Above ~256K elements the kernels split contiguous runs and softmax rows
    across cores (OpenMP): every chunk boundary must still give NumPy's values,
    including a broadcast operand, a scalar and an in-place op."""
    rng = np.random.default_rng(5)
    n = 1_000_003                                     # not a multiple of the chunking
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ta, tb = tensord.from_numpy(a), tensord.from_numpy(b)
    np.testing.assert_array_equal((ta + tb).numpy(), a + b)
    np.testing.assert_array_equal((ta * 2.5).numpy(), a * np.float32(2.5))
    np.testing.assert_allclose(ta.exp().numpy(), np.exp(a), rtol=3e-7)
    np.testing.assert_array_equal(tensord.where(ta > 0, ta, tb).numpy(), np.where(a > 0, a, b))
    row = rng.standard_normal(1000).astype(np.float32)
    m = a[:1000 * 1000].reshape(1000, 1000)
    tm = tensord.from_numpy(m)
    np.testing.assert_array_equal((tm + tensord.from_numpy(row)).numpy(), m + row)
    want = torch.softmax(torch.from_numpy(m), -1).numpy()
    np.testing.assert_allclose(tm.softmax(-1).numpy(), want, rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(tm.log_softmax(-1).numpy(), torch.log_softmax(torch.from_numpy(m), -1).numpy(),
                               rtol=2e-6, atol=2e-6)
    ta.add_(tb)
    np.testing.assert_array_equal(ta.numpy(), a + b)
