"""The matmul family (matmul, mm, bmm, addmm, baddbmm, dot, outer, linear)
against PyTorch 1.13 on metadata: for every sample of opinfo_matmul.py in
several layouts (contiguous, transposed, permuted, sliced with steps and an
offset, expanded with stride 0), the output's dtype, sizes, every stride and
storage_offset equal torch's, on the daemon and on meta. The error inputs
raise the same exception type with the same message on the daemon and on
meta, and PyTorch raises too.
"""
import numpy as np
import pytest
import torch

import tensord
from tensord import _C

from opinfo import BY_NAME
from opinfo_base import Cast, D
from opinfo_matmul import OPINFOS as _FAMILY

# This family's entries plus the original matmul/mm/bmm samples of opinfo.py.
OPINFOS = [i for i in BY_NAME["matmul"] + BY_NAME["mm"] + BY_NAME["bmm"] if i not in _FAMILY] + _FAMILY

LAYOUTS = ("contiguous", "transposed", "permuted", "sliced", "expanded")


def _make(arr, layout, lib, device=None):
    """`arr`'s values in `layout`, built with the same calls in tensord and torch."""
    def up(a):
        a = np.array(a, order="C")
        if lib == "torch":
            # clone: NumPy gives empty arrays other strides than PyTorch's contiguous ones.
            return torch.from_numpy(a).clone(memory_format=torch.contiguous_format)
        return tensord.from_numpy(a) if device is None else tensord.tensor(a, device=device)

    nd = arr.ndim
    if layout == "transposed" and nd >= 2:
        return up(np.swapaxes(arr, -1, -2)).transpose(-1, -2)
    if layout == "permuted" and nd >= 2:
        perm = list(range(nd))[::-1]
        return up(np.transpose(arr, perm)).permute(*perm)
    if layout == "sliced" and nd >= 1 and arr.size > 0:
        # (An empty tensor is left alone: the daemon refuses a size-0 view at
        # an offset past its empty storage.)
        # Every other element of a bigger buffer along the last dim, after an offset.
        big = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1] + 1,), dtype=arr.dtype)
        big[..., 1::2] = arr
        t = up(big)
        return t[..., 1::2] if nd > 1 else t[1::2]
    if layout == "expanded" and nd >= 1 and arr.shape[0] > 1 and np.all(arr == arr[:1]):
        return up(arr[:1]).expand(*arr.shape)
    return up(arr)


def _convert(x, layout, lib, device=None):
    if isinstance(x, np.ndarray):
        return _make(x, layout, lib, device)
    if isinstance(x, Cast):
        t = _make(x.array, layout, lib, device)
        return t.to(getattr(torch if lib == "torch" else tensord, x.dtype))
    if isinstance(x, D):
        return getattr(torch if lib == "torch" else tensord, x.name)
    return x


def _expandable(sample):
    """For the "expanded" layout: every first row repeated, so expand() can build it."""
    def rep(x):
        if isinstance(x, np.ndarray) and x.ndim >= 1 and x.shape[0] > 1:
            return np.repeat(x[:1], x.shape[0], axis=0)
        if isinstance(x, Cast):
            return Cast(rep(x.array), x.dtype)
        return x
    return [rep(a) for a in sample.args], {k: rep(v) for k, v in sample.kwargs.items()}


def _call(name, args, kwargs, layout, lib, device=None):
    a = [_convert(x, layout, lib, device) for x in args]
    kw = {k: _convert(v, layout, lib, device) for k, v in kwargs.items()}
    if lib == "torch":
        base = name.split(".")[0]
        if base == "linear":
            return torch.nn.functional.linear(*a, **kw)
        return getattr(torch, base)(*a, **kw)
    return _C.call_any(name, *a, **kw)


def _torch_meta(t):
    return list(t.shape), list(t.stride()), t.storage_offset(), str(t.dtype).replace("torch.", "")


def _our_meta(t):
    m = _C._client_meta(t)
    return list(m["sizes"]), list(m["strides"]), m["storage_offset"], t.dtype._name


def _cases():
    out = []
    for n, info in enumerate(OPINFOS):
        for i, sample in enumerate(info.samples(np.random.default_rng(500 + n))):
            for layout in LAYOUTS:
                out.append(pytest.param(info.name, sample, layout, id=f"{info.name}-{n}.{i}-{layout}"))
    return out


def _error_cases():
    out = []
    for n, info in enumerate(OPINFOS):
        for i, err in enumerate(info.errors(np.random.default_rng(700 + n))):
            out.append(pytest.param(info.name, err, id=f"{info.name}-{n}.{i}"))
    return out


@pytest.mark.parametrize("name,sample,layout", _cases())
def test_metadata_equals_torch(session, name, sample, layout):
    args, kwargs = (_expandable(sample) if layout == "expanded" else (sample.args, sample.kwargs))
    ref = _call(name, args, kwargs, layout, "torch")
    real = _call(name, args, kwargs, layout, "tensord")
    meta = _call(name, args, kwargs, layout, "tensord", device="meta")
    assert _our_meta(real) == _torch_meta(ref)
    assert _C._client_meta(real) == _C._daemon_meta(real)
    assert _our_meta(meta) == _torch_meta(ref)


@pytest.mark.parametrize("name,err", _error_cases())
def test_errors_match_on_real_and_meta(session, name, err):
    s = err.sample
    with pytest.raises(Exception):
        _call(name, s.args, s.kwargs, "contiguous", "torch")
    messages = []
    for device in (None, "meta"):
        with pytest.raises(err.error) as e:
            _call(name, s.args, s.kwargs, "contiguous", "tensord", device=device)
        assert err.match in str(e.value)
        assert name.split(".")[0] in str(e.value), "the message names the op"
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def test_baddbmm_integer_self_with_float_batches_gives_float32(session):
    # A known disagreement in other systems: PyTorch 1.13 gives the batches' dtype.
    self_ = tensord.ones(2, 3, 5, dtype=tensord.int64)
    out = tensord.baddbmm(self_, tensord.ones(2, 3, 4), tensord.ones(2, 4, 5), beta=2)
    assert out.dtype == tensord.float32
    np.testing.assert_allclose(out.numpy(), np.full((2, 3, 5), 6.0))
    with tensord.device("meta"):
        m = tensord.baddbmm(tensord.ones(2, 3, 5, dtype=tensord.int64), tensord.ones(2, 3, 4), tensord.ones(2, 4, 5))
    assert m.dtype == tensord.float32 and list(m.shape) == [2, 3, 5]


def test_bmm_float16_with_float32_is_an_error_on_real_and_meta(session):
    for device in (None, "meta"):
        a = tensord.ones(2, 3, 4, dtype=tensord.float16, device=device)
        b = tensord.ones(2, 4, 5, device=device)
        with pytest.raises(RuntimeError, match="float16.*float32"):
            tensord.bmm(a, b)


def test_beta_zero_ignores_nan_and_alpha_zero_keeps_inf_nan(session):
    nan = tensord.full([2, 2], float("nan"))
    out = tensord.addmm(nan, tensord.ones(2, 3), tensord.ones(3, 2), beta=0, alpha=2)
    np.testing.assert_allclose(out.numpy(), np.full((2, 2), 6.0))
    inf = tensord.full([1, 2, 3], float("inf"))
    out = tensord.baddbmm(tensord.ones(1, 2, 2), inf, tensord.ones(1, 3, 2), alpha=0)
    assert np.all(np.isnan(out.numpy()))   # 0 * inf, as PyTorch


def test_nn_functional_linear_uses_the_table_op(session):
    x, w, b = tensord.randn(4, 3), tensord.randn(2, 3), tensord.randn(2)
    out = tensord.nn.functional.linear(x, w, b)
    ref = x.numpy() @ w.numpy().T + b.numpy()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="linear"):
        tensord.nn.functional.linear(x, tensord.randn(2, 4))
