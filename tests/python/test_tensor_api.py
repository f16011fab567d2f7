"""The Tensor surface a PyTorch user reaches for, against a daemon: creation,
operators (and their reflected forms), indexing, conversions, reading data,
repr, the exception types of errors, isclose/allclose and randperm. References:
NumPy and PyTorch 1.13."""
import collections

import numpy as np
import pytest
import torch

import tensord
from tensord import _C

pytestmark = pytest.mark.usefixtures("session")


def rng():
    return np.random.default_rng(7)


# ---------------------------------------------------------------- creation

def test_tensor_infers_dtypes_like_pytorch():
    assert tensord.tensor([1, 2, 3]).dtype is tensord.int64
    assert tensord.tensor([1.0, 2]).dtype is tensord.float32
    assert tensord.tensor([True, False]).dtype is tensord.bool
    assert tensord.tensor(3).shape == () and tensord.tensor(3).item() == 3
    assert tensord.tensor(2.5).item() == 2.5
    assert tensord.tensor([]).dtype is tensord.float32 and tensord.tensor([]).shape == (0,)
    assert tensord.tensor([[1, 2], [3, 4]], dtype=tensord.float64).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    b = tensord.tensor([1.5, -2.25], dtype=tensord.bfloat16)
    assert b.dtype is tensord.bfloat16 and b.tolist() == [1.5, -2.25]
    with pytest.raises(ValueError):
        tensord.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        tensord.tensor(["a"])


def test_from_numpy_keeps_dtype_and_layout():
    for dt in (np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_):
        a = (rng().standard_normal((3, 4)) * 5).astype(dt)
        t = tensord.from_numpy(a)
        assert t.dtype.to_numpy() == a.dtype and t.shape == a.shape
        np.testing.assert_array_equal(t.numpy(), a)
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T     # non-contiguous source
    np.testing.assert_array_equal(tensord.from_numpy(a).numpy(), a)
    np.testing.assert_array_equal(tensord.from_numpy(np.array(3.5, dtype=np.float32)).numpy(), np.array(3.5))
    with pytest.raises(TypeError, match="uint16"):
        tensord.from_numpy(np.zeros(3, dtype=np.uint16))
    with pytest.raises(TypeError):
        tensord.from_numpy([1, 2])


def test_large_upload_roundtrip():
    a = rng().standard_normal((1500, 1000)).astype(np.float32)   # 6 MB: chunked, or shared memory
    before = tensord.stats()
    t = tensord.from_numpy(a)
    after = tensord.stats()
    if tensord.default_session().uses_shared_memory:
        assert after["shm_uploads"] - before["shm_uploads"] == 1
    else:
        assert after["messages_sent"] - before["messages_sent"] >= 2
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_allclose((t * 2).sum(0).numpy(), (a * 2).sum(0), rtol=1e-5, atol=1e-4)


def test_as_tensor_and_factories():
    t = tensord.ones(2, 3)
    assert tensord.as_tensor(t) is t
    assert tensord.as_tensor(t, dtype=tensord.float64).dtype is tensord.float64
    assert tensord.zeros((2, 3)).shape == (2, 3) and tensord.zeros([2, 3]).shape == (2, 3)
    assert tensord.zeros(tensord.Size([4])).shape == (4,)
    assert tensord.full((2,), 7).dtype is tensord.int64
    assert tensord.arange(0, 10, 3).tolist() == [0, 3, 6, 9]
    assert tensord.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    r = tensord.rand(1000)
    v = r.numpy()
    assert v.min() >= 0 and v.max() < 1 and 0.4 < v.mean() < 0.6


# ---------------------------------------------------------------- operators

def _pair():
    r = rng()
    a = r.standard_normal((3, 4)).astype(np.float32)
    b = r.uniform(0.5, 2, (3, 4)).astype(np.float32)
    return a, b, tensord.from_numpy(a), tensord.from_numpy(b)


@pytest.mark.parametrize("expr", [
    lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x / y, lambda x, y: x // y,
    lambda x, y: x % y, lambda x, y: abs(x) ** y, lambda x, y: -x, lambda x, y: abs(x), lambda x, y: +x,
    lambda x, y: x + 2, lambda x, y: 2 + x, lambda x, y: 1.5 - x, lambda x, y: x - 1.5, lambda x, y: 3 * x,
    lambda x, y: 2 / y, lambda x, y: y / 2, lambda x, y: 7 // y, lambda x, y: 5.5 % y, lambda x, y: 2 ** x,
    lambda x, y: x ** 2, lambda x, y: x @ y.T, lambda x, y: (x > y) & (x < 1), lambda x, y: (x > 0) | (y > 1),
    lambda x, y: (x > 0) ^ (y > 1), lambda x, y: ~(x > 0), lambda x, y: x == y, lambda x, y: x != 0.5,
    lambda x, y: x <= y, lambda x, y: x >= 0, lambda x, y: 0 < x, lambda x, y: x + np.float32(1.5),
])
def test_operators_match_numpy(expr):
    a, b, x, y = _pair()
    got = expr(x, y)
    ref = expr(a, b)
    assert tuple(got.shape) == np.shape(ref)
    np.testing.assert_allclose(got.numpy().astype(np.float64), np.asarray(ref, dtype=np.float64), rtol=1e-5, atol=1e-5)


def test_integer_operators_follow_pytorch():
    a = np.array([[-7, -3, 0, 4, 9]], dtype=np.int64)
    x, ta = tensord.from_numpy(a), torch.from_numpy(a)
    for expr in (lambda v: v // 2, lambda v: v // -2, lambda v: v % 3, lambda v: v % -3, lambda v: v / 2,
                 lambda v: 2 / (v + 10), lambda v: v & 6, lambda v: v | 1, lambda v: v ^ 5, lambda v: ~v,
                 lambda v: -v, lambda v: v * 2.5, lambda v: 10 // (v + 10), lambda v: 100 % (v + 10)):
        got, ref = expr(x), expr(ta)
        assert got.dtype._name == str(ref.dtype).replace("torch.", ""), (got.dtype, ref.dtype)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)
    i32 = tensord.tensor([1, 2], dtype=tensord.int32)
    assert (i32 + 1).dtype is tensord.int32 and (i32 + 1.5).dtype is tensord.float32
    assert (i32 + tensord.tensor(1)).dtype is tensord.int32      # 0-dim int64 does not widen


def test_method_surface_is_generated_from_the_op_table():
    ops = tensord._C.op_table()
    for e in ops:
        if e["is_method"]:
            assert callable(getattr(tensord.Tensor, e["name"])), e["name"]
        if e["is_function"]:
            assert callable(getattr(tensord, e["name"])), e["name"]
    x = tensord.tensor([[3.0, 1.0, 2.0]])
    assert x.max(dim=1).values.tolist() == [3.0] and x.max(dim=1).indices.tolist() == [0]
    v, i = x.topk(2)
    assert v.tolist() == [[3.0, 2.0]] and i.tolist() == [[0, 2]]
    assert type(x.topk(1)).__name__ == "topk"
    assert x.where(x > 1.5, 0.0).tolist() == [[3.0, 0.0, 2.0]]
    assert tensord.where(x > 1.5, x, -x).tolist() == [[3.0, -1.0, 2.0]]
    assert x.sum(1, keepdim=True).shape == (1, 1)
    assert x.float().dtype is tensord.float32 and x.double().dtype is tensord.float64
    assert x.long().tolist() == [[3, 1, 2]] and x.int().dtype is tensord.int32 and x.half().dtype is tensord.float16
    assert x.cpu().device == tensord.device("cpu") and x.to(tensord.float64).dtype is tensord.float64


# ---------------------------------------------------------------- indexing

@pytest.mark.parametrize("key", [
    0, -1, (1, 2), (slice(None), 1), (slice(1, None), slice(None, None, 2)), (slice(None, None, 3),),
    (None, 0), (Ellipsis, 1), (0, Ellipsis, None), (slice(-3, -1), None, slice(1, 3)), (Ellipsis,),
    [0, 2], ([0, 3], [1, 2]), (slice(None), [3, 0, 0]), (1, [0, 1]), (slice(0, 0),), (),
])
def test_indexing_matches_numpy(key):
    a = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)
    t = tensord.from_numpy(a)
    got = t[key]
    ref = a[key]
    assert tuple(got.shape) == ref.shape
    np.testing.assert_array_equal(got.numpy(), ref)
    assert got._daemon_meta()["strides"] == got.stride()


def test_tensor_and_mask_indexing():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tensord.from_numpy(a)
    idx = tensord.tensor([[2, 0], [1, 1]])
    np.testing.assert_array_equal(t[idx].numpy(), a[np.array([[2, 0], [1, 1]])])
    np.testing.assert_array_equal(t[:, tensord.tensor([3, 1])].numpy(), a[:, [3, 1]])
    mask = a % 3 == 0
    np.testing.assert_array_equal(t[tensord.from_numpy(mask)].numpy(), a[mask])
    np.testing.assert_array_equal(t[t > 5].numpy(), a[a > 5])
    rows = np.array([True, False, True])
    np.testing.assert_array_equal(t[tensord.from_numpy(rows)].numpy(), a[rows])
    with pytest.raises(IndexError, match="does not match the shape"):
        t[tensord.tensor([True, False])]
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="only integers"):
        t["x"]
    # Basic-index assignment writes in place (copy_/fill_ on the view).
    t[0] = 1
    a[0] = 1
    np.testing.assert_array_equal(t.numpy(), a)
    t[[0, 1]] = 2
    a[[0, 1]] = 2
    np.testing.assert_array_equal(t.numpy(), a)
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, tensord.tensor([0])] = 1


def _assign_both(shape, assign):
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    ours, theirs = tensord.from_numpy(a.copy()), torch.from_numpy(a.copy())
    assign(ours, tensord)
    assign(theirs, torch)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("assign", [
    lambda x, L: x.__setitem__(x > 0, 0.0),                                          # bool mask
    lambda x, L: x.__setitem__((slice(None), L.tensor([0, 2])), 7.0),                # x[:, idx]
    lambda x, L: x.__setitem__(L.tensor([2, 0]), L.tensor([1.0, 2.0, 3.0, 4.0, 5.0])),  # rows from a tensor
    lambda x, L: x.__setitem__((1, L.tensor([0, 3])), 9),                            # an int number
    lambda x, L: x.__setitem__((Ellipsis, L.tensor([1, 3])), -1.0),                  # x[..., idx]
    lambda x, L: x.__setitem__((slice(1, 3), L.tensor([0, 1]), L.tensor([2, 3])), 5.0),  # basic + two tensors
    lambda x, L: x.__setitem__((x[:, 0, 0] > 0,), 3.0),                              # a mask over dim 0
], ids=["mask", "col-idx", "rows", "int-value", "ellipsis", "mixed", "row-mask"])
def test_advanced_index_assignment_matches_torch(session, assign):
    _assign_both((3, 4, 5), assign)


def test_advanced_index_assignment_writes_through_views_and_on_meta(session):
    t = tensord.zeros(3, 4)
    v = t[1:]
    t[t == 0] = 4.0
    np.testing.assert_array_equal(v.numpy(), np.full((2, 4), 4.0, np.float32))
    m = tensord.zeros(3, 4, device="meta")
    m[m > 0] = 1.0                         # needs no data: index_put's output has self's shape
    m[:, tensord.tensor([0, 1], device="meta")] = 2.0
    assert m.is_meta and m.shape == (3, 4)
    # A tensor value of another dtype is refused for index tensors, as PyTorch's
    # index_put does; one mask with one value is PyTorch's masked_fill, which casts.
    with pytest.raises(RuntimeError, match="dtype"):
        t[tensord.tensor([0])] = tensord.tensor(1, dtype=tensord.int64)
    u = t.clone()
    u[u > 0] = tensord.tensor([[7]], dtype=tensord.int64)   # leading 1s dropped, as PyTorch
    assert u.dtype == t.dtype and u.max().item() == 7


def test_views_alias_and_report_daemon_strides():
    t = tensord.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for v in (t.T, t.permute(2, 0, 1), t[1], t[:, 1:, ::2], t.transpose(0, 2), t.unsqueeze(1), t.expand(5, 2, 3, 4),
              t.view(6, 4), t.narrow(2, 1, 2), t.flatten(1)):
        m = v._daemon_meta()
        assert m["sizes"] == v.shape and m["strides"] == v.stride() and m["storage_offset"] == v.storage_offset()
    assert not t.T.is_contiguous() and t.T.contiguous().is_contiguous()
    with pytest.raises(RuntimeError, match="view"):
        t.T.view(24)
    assert t.T.reshape(24).shape == (24,)


# ---------------------------------------------------------------- reading data

def test_reading_values():
    t = tensord.tensor([[1.5, 2.0], [3.0, 4.0]])
    assert t.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert t[0, 0].item() == 1.5 and float(t[0, 1]) == 2.0 and int(t[1, 1]) == 4
    assert bool(tensord.tensor([True])) and not bool(tensord.tensor(0.0))
    assert len(t) == 2 and [r.tolist() for r in t] == [[1.5, 2.0], [3.0, 4.0]]
    np.testing.assert_array_equal(np.asarray(t), t.numpy())
    assert [1, 2, 3][tensord.tensor(1)] == 2                   # __index__
    assert f"{t.sum():.1f}" == "10.5"
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t)
    with pytest.raises(RuntimeError, match="4 elements cannot be converted to Scalar"):
        t.item()
    b = tensord.tensor([1.0, 2.0], dtype=tensord.bfloat16)
    with pytest.raises(TypeError, match="BFloat16"):
        b.numpy()
    assert b.float().numpy().tolist() == [1.0, 2.0]


@pytest.mark.parametrize("make", [
    lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]),
    lambda m: m.tensor([1.5, 2e-5]),
    lambda m: m.tensor([1, 2, 3]),
    lambda m: m.tensor([True, False]),
    lambda m: m.tensor(3.5),
    lambda m: m.tensor([1, 2], dtype=m.int32),
    lambda m: m.tensor([0.0, 0.0]),
    lambda m: m.tensor([1.0, 2.0], dtype=m.float64),
    lambda m: m.tensor([1e10, 1.0]),
    lambda m: m.tensor([[1.0, -2.5, 3.25]] * 4),
    lambda m: m.zeros(0, 3),
    lambda m: m.zeros(0),
    lambda m: m.zeros(0, dtype=m.int64),
    lambda m: m.arange(2000),
    lambda m: m.arange(3000, dtype=m.float32).reshape(30, 100) / 7,
    lambda m: m.arange(24).reshape(2, 3, 4),
    lambda m: m.tensor([float("nan"), float("inf"), 1.0]),
    lambda m: m.tensor([1.0, 2.0], dtype=m.bfloat16),
    lambda m: m.tensor([1.0, 2.0], dtype=m.float16),
    lambda m: m.arange(100, dtype=m.float32) * 1.5,
])
def test_repr_matches_pytorch(make):
    ours = repr(make(tensord))
    ref = repr(make(torch)).replace("torch.", "tensord.")
    assert ours == ref


# ---------------------------------------------------------------- errors

def test_error_types_and_messages():
    a = tensord.ones(8, 4)
    b = tensord.ones(3, 2)
    with pytest.raises(RuntimeError, match=r"matmul: size mismatch, self is \[8, 4\], other is \[3, 2\] \(4 != 3\)"):
        a @ b
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        a.add("x")
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        a.sum(bogus=1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        a.sum(2)
    with pytest.raises(RuntimeError, match="must match the size"):
        a + tensord.ones(3)
    with pytest.raises(TypeError, match="cannot pass an object of type object"):
        a.add(object())
    with pytest.raises(RuntimeError, match="Promotion for Float8"):
        a.to(tensord.float8_e5m2) + a
    assert a.__add__("x") is NotImplemented
    with pytest.raises(TypeError):
        a + "x"


def test_to_another_tensor_takes_its_device_and_dtype(session):
    a = tensord.ones(3)
    b = tensord.zeros(2, dtype=tensord.float64)
    assert a.to(b).dtype == tensord.float64 and a.to(b).tolist() == [1.0, 1.0, 1.0]
    assert a.to(other=b).dtype == tensord.float64
    same = a.to(tensord.zeros(1))
    assert same is a or _C._storage_id(same) == _C._storage_id(a)   # no conversion needed: a itself, as torch
    m = tensord.zeros(2, device="meta")
    assert m.to(tensord.empty(1, dtype=tensord.int32, device="meta")).dtype == tensord.int32


def test_repeated_daemon_calls_come_from_the_meta_cache_and_stay_exact():
    """A repeated call on daemon tensors skips resolution and the meta
    function (the meta cache keeps its bound arguments) and streams this
    call's tensors: values, views, in-place writes, lists and autograd are as
    on a first call."""
    C = _C
    C._clear_meta_cache()
    a_np = rng().standard_normal((4, 6)).astype(np.float32)
    b_np = rng().standard_normal((4, 6)).astype(np.float32) + 3
    a, b = tensord.tensor(a_np), tensord.tensor(b_np)
    first = (a + b).numpy()
    before = C._meta_cache_info()
    # Same metadata, other tensors: a hit that must read the new operands.
    c = tensord.tensor(b_np) + tensord.tensor(a_np * 2)
    assert C._meta_cache_info()["hits"] == before["hits"] + 1
    np.testing.assert_allclose(first, a_np + b_np, rtol=1e-6)
    np.testing.assert_allclose(c.numpy(), b_np + a_np * 2, rtol=1e-6)
    # The same tensor twice, and in either position.
    np.testing.assert_allclose((b + b).numpy(), 2 * b_np, rtol=1e-6)
    np.testing.assert_allclose((a + a).numpy(), 2 * a_np, rtol=1e-6)
    # Views alias their base on a hit too; in-place ops write the given tensor.
    for _ in range(2):
        x = tensord.tensor(a_np.copy())
        v = x.t()
        assert v.stride() == (1, 6)
        v.mul_(2)
        x.add_(1)
        np.testing.assert_allclose(x.numpy(), a_np * 2 + 1, rtol=1e-6)
    # Tensor lists (cat) and optional tensor lists (x[idx]).
    for k in range(2):
        np.testing.assert_allclose(tensord.cat([a, b, a * k]).numpy(), np.concatenate([a_np, b_np, a_np * k]),
                                   rtol=1e-6)
        idx = tensord.tensor([3, 0, k])
        np.testing.assert_allclose(a[idx].numpy(), a_np[[3, 0, k]])
    # Autograd records hits as misses: the gradient of a repeated expression.
    for k in (1.0, 2.0):
        w = tensord.tensor(a_np, requires_grad=True)
        loss = (w * b * k).sum()
        assert loss.grad_fn is not None
        loss.backward()
        np.testing.assert_allclose(w.grad.numpy(), b_np * k, rtol=1e-6)
    # An error is never cached: the same bad call raises every time.
    for _ in range(2):
        with pytest.raises(RuntimeError, match="size mismatch"):
            a @ b
    # Off: the same results without the cache.
    C._set_meta_cache_enabled(False)
    try:
        hits = C._meta_cache_info()["hits"]
        np.testing.assert_allclose((a + b).numpy(), a_np + b_np, rtol=1e-6)
        assert C._meta_cache_info()["hits"] == hits
    finally:
        C._set_meta_cache_enabled(True)


def test_non_native_byte_order_is_refused_as_pytorch_does():
    big = np.arange(3, dtype=">f4")
    for make in (tensord.from_numpy, tensord.tensor):
        with pytest.raises(ValueError, match="byte order different from the native byte order"):
            make(big)
        with pytest.raises(ValueError) as theirs:
            getattr(torch, make.__name__)(big)
        assert "byte order" in str(theirs.value)
    np.testing.assert_array_equal(tensord.from_numpy(big.astype("<f4")).numpy(), [0, 1, 2])


def test_mT_and_is_tensor_as_in_pytorch():
    with tensord.device("meta"):
        x = tensord.empty(2, 3, 4)
        assert x.mT.shape == (2, 4, 3) and x.mT.stride() == (12, 1, 4)
        assert tensord.empty(5, 6).mT.shape == (6, 5)
        with pytest.raises(RuntimeError, match="only supported on matrices or batches of matrices. Got 1-D tensor"):
            tensord.empty(3).mT
        assert tensord.is_tensor(x) and not tensord.is_tensor(np.zeros(3)) and not tensord.is_tensor([1])
        assert tensord.empty(()).mT.shape == ()  # torch 1.13 allows 0-dim
    t = torch.empty(2, 3, 4)
    assert tuple(t.mT.shape) == (2, 4, 3) and t.mT.stride() == (12, 1, 4) and torch.empty(()).mT.shape == ()


# ---------------------------------------------------------------- isclose, allclose

_NAN, _INF = float("nan"), float("inf")


@pytest.mark.parametrize("a, b, dtype, kw", [
    ([1.0, 2.0, _NAN, _INF, -_INF, 1e-9, 0.0, 100.0], [1.0 + 1e-6, 2.1, _NAN, _INF, _INF, 0.0, -0.0, 100.001],
     "float32", {}),
    ([1.0, 2.0, _NAN, _INF, -_INF, 1e-9, 0.0, 100.0], [1.0 + 1e-6, 2.1, _NAN, _INF, _INF, 0.0, -0.0, 100.001],
     "float32", dict(equal_nan=True)),
    ([1.0, 2.0, _NAN, 3.0], [1.05, 2.0, 1.0, 3.3], "float64", dict(rtol=0.1, atol=0.0)),
    ([1.0, 2.0, _NAN, 3.0], [1.0, 2.0 + 1e-12, _NAN, 3.0], "float64", dict(rtol=0.0, atol=0.0, equal_nan=True)),
    ([1.0, 2.0, 3.0], [1.5, 2.0, 2.0], "float32", dict(rtol=0.0, atol=0.5)),
    ([0, 5, -7, 100], [1, 5, -5, 103], "int64", dict(atol=2)),
    ([0, 5, -7, 100], [1, 5, -5, 103], "int64", dict(rtol=0.02, atol=0)),
    ([True, False, True], [True, True, False], "bool", {}),
    ([True, False], [True, True], "bool", dict(atol=1.0)),
    # Integers are compared in float32, as PyTorch: no wrap-around.
    ([5, 0, 7], [6, 255, 7], "uint8", dict(atol=1)),
    ([5, 0], [6, 255], "uint8", dict(atol=2, rtol=0)),
    ([2 ** 62, 3], [-2 ** 62, 3], "int64", {}),
])
def test_isclose_matches_pytorch(a, b, dtype, kw):
    ours = tensord.isclose(tensord.tensor(a, dtype=getattr(tensord, dtype)),
                           tensord.tensor(b, dtype=getattr(tensord, dtype)), **kw)
    ref = torch.isclose(torch.tensor(a, dtype=getattr(torch, dtype)), torch.tensor(b, dtype=getattr(torch, dtype)),
                        **kw)
    assert ours.dtype is tensord.bool
    assert ours.tolist() == ref.tolist()
    one = tensord.tensor(a, dtype=getattr(tensord, dtype))
    assert one.isclose(tensord.tensor(b, dtype=getattr(tensord, dtype)), **kw).tolist() == ref.tolist()
    want_all = torch.allclose(torch.tensor(a, dtype=getattr(torch, dtype)), torch.tensor(b, dtype=getattr(torch, dtype)),
                              **kw)
    got_all = tensord.allclose(one, tensord.tensor(b, dtype=getattr(tensord, dtype)), **kw)
    assert type(got_all) is bool and got_all == want_all


def test_isclose_broadcasts_and_allclose_is_one_round_trip(session):
    r = rng()
    a = r.standard_normal((3, 4)).astype(np.float32)
    b = (a[1] * (1 + 3e-6)).astype(np.float32)                   # close to row 1 only
    ta, tb = tensord.from_numpy(a), tensord.from_numpy(b)
    tensord.synchronize()
    before = tensord.stats()["round_trips"]
    close = tensord.isclose(ta, tb)
    assert tensord.stats()["round_trips"] == before              # streamed, no wait
    assert close.shape == (3, 4)
    np.testing.assert_array_equal(close.numpy(), torch.isclose(torch.from_numpy(a), torch.from_numpy(b)).numpy())
    before = tensord.stats()["round_trips"]
    assert ta[1].allclose(tb) is True and ta.allclose(tb) is False
    assert tensord.stats()["round_trips"] - before == 2         # one per allclose
    assert tensord.allclose(ta, ta + 1e-3, atol=1e-2) and not tensord.allclose(ta, ta + 1e-3)


def test_isclose_errors_as_pytorch():
    f32, f64 = tensord.ones(2), tensord.ones(2, dtype=tensord.float64)
    with pytest.raises(RuntimeError, match="^Float did not match Double$"):
        tensord.isclose(f32, f64)
    with pytest.raises(RuntimeError, match="rtol must be greater than or equal to zero, but got -1"):
        tensord.isclose(f32, f32, rtol=-1)
    with pytest.raises(RuntimeError, match="atol must be greater than or equal to zero, but got -0.5"):
        f32.allclose(f32, atol=-0.5)
    with pytest.raises(TypeError, match=r"isclose\(\): argument 'other' \(position 2\) must be Tensor, not float"):
        tensord.isclose(f32, 1.0)
    with pytest.raises(TypeError, match=r"allclose\(\): argument 'input' \(position 1\) must be Tensor, not list"):
        tensord.allclose([1.0], f32)
    with pytest.raises(RuntimeError):
        tensord.isclose(tensord.ones(2, 3), tensord.ones(2))
    with tensord.device("meta"):
        m = tensord.isclose(tensord.ones(2, 3), tensord.ones(3))     # shapes only: no daemon
        assert m.is_meta and m.shape == (2, 3) and m.dtype is tensord.bool
        with pytest.raises(NotImplementedError, match="meta"):
            tensord.allclose(tensord.ones(3), tensord.ones(3))    # a meta tensor has no value to read


# ---------------------------------------------------------------- randperm

def test_randperm_is_a_seeded_permutation(session):
    for n in (0, 1, 2, 7, 1000):
        p = tensord.randperm(n)
        assert p.dtype is tensord.int64 and p.shape == (n,)
        assert sorted(p.tolist()) == list(range(n))
    tensord.manual_seed(5)
    first = tensord.randperm(50).tolist()
    tensord.manual_seed(5)
    assert tensord.randperm(50).tolist() == first
    assert tensord.randperm(50).tolist() != first                # the generator moved on
    f = tensord.randperm(6, dtype=tensord.float32, requires_grad=True)
    assert f.dtype is tensord.float32 and f.requires_grad and f.is_leaf
    assert sorted(f.tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert sorted(tensord.randperm(100, dtype=tensord.int8).tolist()) == list(range(100))
    assert sorted(tensord.randperm(128, dtype=tensord.int8).tolist()) == list(range(128))   # 127 fits, as torch
    m = tensord.randperm(4, device="meta")
    assert m.is_meta and m.shape == (4,) and m.dtype is tensord.int64
    before = tensord.stats()["round_trips"]
    tensord.randperm(10)
    assert tensord.stats()["round_trips"] == before


def test_randperm_orders_are_uniform(session):
    # Every order of 3 elements about equally often (a chi-square test with
    # 5 degrees of freedom at p = 0.001: 20.5), and every value at every
    # position of a permutation of 5 (20 degrees of freedom: 45.3). Seeded,
    # so it cannot flake; an order biased toward index order (say, ties kept
    # in place, or a sort of keys that are not random) fails.
    tensord.manual_seed(1234)
    draws = 3000
    perms = tensord.stack([tensord.randperm(3) for _ in range(draws)]).tolist()
    counts = collections.Counter(tuple(p) for p in perms)
    assert len(counts) == 6
    expected = draws / 6
    assert sum((c - expected) ** 2 / expected for c in counts.values()) < 20.5, counts
    five = np.array(tensord.stack([tensord.randperm(5) for _ in range(draws)]).tolist())
    table = np.stack([(five == v).sum(0) for v in range(5)])     # [value, position] counts
    expected = draws / 5
    assert ((table - expected) ** 2 / expected).sum() < 45.3, table


def test_randperm_errors_as_pytorch():
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension -1: \[-1\]"):
        tensord.randperm(-1)
    with pytest.raises(TypeError, match="must be int, not float"):
        tensord.randperm(2.5)
    with pytest.raises(RuntimeError, match="\"randperm\" not implemented for 'Bool'"):
        tensord.randperm(3, dtype=tensord.bool)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        tensord.randperm(200, dtype=tensord.int8)
    with pytest.raises(RuntimeError, match="n cannot be greater than 2049 for Half type"):
        tensord.randperm(3000, dtype=tensord.float16)
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        tensord.randperm(3, requires_grad=True)
    with pytest.raises(TypeError):
        tensord.randperm(3, generator=None)                      # PyTorch's generator= is not accepted
    for args, kw in [((-1,), {}), ((200,), dict(dtype=torch.int8)), ((3000,), dict(dtype=torch.float16)),
                     ((3,), dict(requires_grad=True))]:
        with pytest.raises(RuntimeError):
            torch.randperm(*args, **kw)                          # the same cases fail in PyTorch 1.13
