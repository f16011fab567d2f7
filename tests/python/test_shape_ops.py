"""Shape ops beyond what the OpInfo database checks: ops that return a tuple
of views (split, chunk, unbind) end to end (tuple results, aliasing, meta,
autograd with unused pieces), errors that only data can reveal (scatter's
index range at the sync point), tensord.nn.functional.pad, double backward
of the shape formulas, and advanced indexing (integer tensors and boolean
masks, on the daemon and on meta) against PyTorch 1.13.
"""
import numpy as np
import pytest
import torch

import tensord
import tensord.nn.functional as F
from tensord.autograd import gradgradcheck


def _geometry(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


# ---------------------------------------------------------------- lists of views

def test_split_accepts_an_int_or_a_list_and_always_returns_a_tuple(session):
    a = np.arange(15, dtype=np.float32).reshape(5, 3)
    x, tx = tensord.from_numpy(a), torch.from_numpy(a.copy())
    for args in [(2,), ([2, 3],), (5,), ([5],), (1, 1), ([1, 2], 1)]:
        ours, ref = x.split(*args), tx.split(*args)
        assert isinstance(ours, tuple) and len(ours) == len(ref)
        assert [_geometry(o) for o in ours] == [_geometry(r) for r in ref]
        for o, r in zip(ours, ref):
            np.testing.assert_array_equal(o.numpy(), r.numpy())
    assert isinstance(tensord.split(x, [1, 4]), tuple)
    assert isinstance(x.unbind(0), tuple) and len(x.unbind(0)) == 5
    assert tensord.unbind(tensord.zeros(0, 3)) == ()


def test_split_outputs_alias_self(session):
    x = tensord.zeros(4, 3)
    first, second = x.split(2)
    second.fill_(1.0)
    np.testing.assert_array_equal(x.numpy(), np.array([[0] * 3] * 2 + [[1] * 3] * 2, dtype=np.float32))
    x.unbind(1)[2].fill_(5.0)
    assert x.numpy()[:, 2].tolist() == [5.0] * 4


def test_list_views_work_on_meta():
    # TensorPlay's meta device fails on chunk; here every list op runs on meta.
    x = tensord.empty(7, 4, 5, device="meta").permute(2, 0, 1)
    t = torch.empty(7, 4, 5, device="meta").permute(2, 0, 1)
    for f in [lambda v: v.chunk(3, 1), lambda v: v.split(2, -1), lambda v: v.split([1, 4]), lambda v: v.unbind(2),
              lambda v: v.split_with_sizes([3, 4], 1)]:
        ours, ref = f(x), f(t)
        assert all(o.is_meta for o in ours)
        assert [_geometry(o) for o in ours] == [_geometry(r) for r in ref]


def test_hostile_output_counts_are_refused_cleanly():
    x = tensord.zeros(1, device="meta").expand(1 << 40)
    with pytest.raises(RuntimeError, match="returns at most"):
        x.split(1)
    with pytest.raises(RuntimeError, match="returns at most"):
        x.unbind()
    with pytest.raises(RuntimeError, match="returns at most"):
        tensord.zeros(0, 2, device="meta").chunk(1 << 30)


def test_backward_through_some_views_of_a_split(session):
    a = np.arange(10, dtype=np.float64).reshape(5, 2)
    x = tensord.from_numpy(a).requires_grad_()
    tx = torch.from_numpy(a.copy()).requires_grad_()
    for lib, v in ((tensord, x), (torch, tx)):
        p = v.split([1, 3, 1])
        q = v.unbind(1)
        ((p[1] * 2).sum() + (q[0] ** 2).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("name,fn,shapes", [
    ("split", lambda x: x.split([1, 2], 1)[1] ** 2, [(2, 3)]),
    ("chunk", lambda x: x.chunk(2)[0] * x.chunk(2)[1], [(4, 2)]),
    ("unbind", lambda x: x.unbind(1)[0] * x.unbind(1)[2], [(3, 3)]),
    ("flip_roll", lambda x: x.flip([0]).roll(1, 1) * x, [(3, 4)]),
    ("repeat", lambda x: x.repeat(2, 1, 2) ** 2, [(2, 3)]),
    ("tril_triu", lambda x: x.tril(-1) * x.triu(), [(3, 3)]),
    ("pad", lambda x: F.pad(x, (1, -1, 2, 0)) ** 2, [(3, 4)]),
    ("scatter", lambda x, s: tensord.scatter(x, 0, tensord.tensor([[1, 0]]), s) ** 2, [(2, 2), (1, 3)]),
])
def test_shape_formulas_double_backward(session, name, fn, shapes):
    rng = np.random.default_rng(0)
    inputs = tuple(tensord.from_numpy(rng.standard_normal(s)).requires_grad_() for s in shapes)
    assert gradgradcheck(fn, inputs)


# ---------------------------------------------------------------- data-dependent errors

def test_scatter_index_out_of_range_fails_at_the_sync_point(session):
    x = tensord.zeros(3, 2)
    y = tensord.scatter(x, 0, tensord.tensor([[0, 3]]), 1.0)  # nothing can be known before the data
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 0 with size 3"):
        y.numpy()
    z = x.scatter(1, tensord.tensor([[-1]]), tensord.ones(1, 1))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 2"):
        z.numpy()
    assert x.numpy().sum() == 0  # self is untouched


# ---------------------------------------------------------------- nn.functional.pad

def test_functional_pad_constant(session):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x, tx = tensord.from_numpy(a), torch.from_numpy(a.copy())
    for pad, value in [((1, 1), None), ((1, 2, 0, 1), 2.5), ((-1, 1), None), ((0, 0), 3.0)]:
        np.testing.assert_array_equal(F.pad(x, pad, value=value).numpy(),
                                      torch.nn.functional.pad(tx, pad, value=value).numpy())
    cl = tensord.zeros(1, 4, 3, 2, device="meta").permute(0, 3, 1, 2)
    tcl = torch.zeros(1, 4, 3, 2).permute(0, 3, 1, 2)
    assert _geometry(F.pad(cl, (1, 1, 2, 2))) == _geometry(torch.nn.functional.pad(tcl, (1, 1, 2, 2)))


def test_functional_pad_errors():
    x = tensord.zeros(2, 3, device="meta")
    with pytest.raises(NotImplementedError, match='mode "reflect" is not implemented'):
        F.pad(x, (1, 1), mode="reflect")
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode wrap"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(RuntimeError, match="Padding length too large"):
        F.pad(x, (1, 1, 1, 1, 1, 1))


# ---------------------------------------------------------------- advanced indexing

_A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
_I = np.array([-1, 0, 2])
_J = np.array([[1], [2]])
_INDEXING = {
    "x[idx]": lambda x, L: x[L(_I)],
    "x[:, idx]": lambda x, L: x[:, L(_I)],
    "x[idx1, idx2]": lambda x, L: x[L(_J), L(_I)],
    "x[idx, :, idx]": lambda x, L: x[L(_I), :, L(_I)],
    "x[1:, idx2d, ::2]": lambda x, L: x[1:, L(_J), ::2],
    "x[None, ..., idx]": lambda x, L: x[None, ..., L(_I)],
    "x[list]": lambda x, L: x[[0, 2]],
    "x[mask]": lambda x, L: x[L(_A[:, 0, 0] > 20)],
    "x[:, mask2d]": lambda x, L: x[:, L(_A[0] % 3 == 0)],
    "x[mask3d]": lambda x, L: x[L(_A % 7 == 0)],
}


def _permuted(lib, device=None):
    if lib is torch:
        return torch.from_numpy(np.ascontiguousarray(_A.transpose(1, 2, 0))).permute(2, 0, 1)
    base = np.ascontiguousarray(_A.transpose(1, 2, 0))
    t = tensord.from_numpy(base) if device is None else tensord.tensor(base, device="meta")
    return t.permute(2, 0, 1)


@pytest.mark.parametrize("case", list(_INDEXING))
def test_advanced_indexing_matches_pytorch(session, case):
    f = _INDEXING[case]
    ref = f(_permuted(torch), lambda v: torch.from_numpy(np.ascontiguousarray(v)))
    ours = f(_permuted(tensord), lambda v: tensord.from_numpy(np.ascontiguousarray(v)))
    assert _geometry(ours) == _geometry(ref)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@pytest.mark.parametrize("case", list(_INDEXING))
def test_advanced_indexing_on_meta(case):
    f = _INDEXING[case]
    ref = f(_permuted(torch), lambda v: torch.from_numpy(np.ascontiguousarray(v)))
    x = _permuted(tensord, "meta")
    L = lambda v: tensord.tensor(np.ascontiguousarray(v), device="meta")  # noqa: E731
    if "mask" in case:
        # Which elements a mask selects is data: meta refuses clearly, naming the reason.
        with pytest.raises(NotImplementedError, match="depends on the data"):
            f(x, L)
        return
    ours = f(x, L)
    assert ours.is_meta and _geometry(ours) == _geometry(ref)


def test_indexing_errors_match_pytorch():
    x = tensord.zeros(4, 6, device="meta")
    with pytest.raises(IndexError, match="tensors used as indices must be long, byte or bool tensors"):
        x[tensord.tensor([0, 1], dtype=tensord.int32, device="meta")]
    with pytest.raises(IndexError, match=r"The shape of the mask \[2\] at index 0 does not match"):
        x[tensord.tensor([True, False], device="meta")]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[0, 0, 0]
    import torch
    for key, msg in ((slice(None, None, -1), "step must be greater than zero"),
                     (slice(0, 4, 0), "slice step cannot be zero")):
        with pytest.raises(ValueError, match=msg):
            torch.zeros(4, 6)[key]
        with pytest.raises(ValueError, match=msg):
            x[key]
    for mod, t in ((torch, torch.zeros(2)), (tensord, x)):
        with pytest.raises(TypeError, match=r"~ \(operator.invert\) is only implemented on integer and Boolean"):
            ~t


def test_indexing_out_of_range_fails_at_the_sync_point(session):
    x = tensord.zeros(4, 6)
    y = x[tensord.tensor([7])]
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 4"):
        y.numpy()
