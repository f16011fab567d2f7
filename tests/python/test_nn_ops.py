"""nn ops against PyTorch 1.13, beyond the OpInfo database (tests/python/opinfo_nn.py):

- conv2d / pooling metadata (sizes, every stride, storage_offset) on odd layouts
  (channels-last input or weight, transposed, sliced with steps and an offset,
  expanded, unbatched permuted), real and meta, compared with torch's;
- the OpInfo error inputs of the nn ops, on real and on meta tensors (same
  exception type, same message);
- max pooling with ties and NaN; padding='same'/'valid';
- the composites of tensord.nn.functional (rms_norm,
  scaled_dot_product_attention, cross_entropy with class indices or
  probabilities, nll_loss, mse_loss, dropout, layer_norm, embedding): values
  on real data, shapes and dtypes on meta, errors; torch 1.13 has no rms_norm
  or scaled_dot_product_attention, so their references are written here with
  torch ops;
- the modules Conv2d, MaxPool2d, AvgPool2d, RMSNorm (parameters, init bounds, repr).
"""
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensord
import tensord.nn as nn
import tensord.nn.functional as F
from tensord import _C

from opinfo_nn import OPINFOS as NN_OPINFOS

RNG = np.random.default_rng(1234)


def arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def up(a, meta=False):
    return tensord.tensor(a, device="meta") if meta else tensord.from_numpy(a)


def geometry(t):
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset())


def close(ours, ref, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(ours.detach().numpy().astype(np.float64), ref.detach().numpy().astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


# ---------------------------------------------------------------- layouts

# Each layout is applied the same way to a tensord and a torch tensor made from
# the same array (both APIs have permute/contiguous/transpose/slicing/expand).
LAYOUTS4 = {
    "contiguous": lambda t: t,
    "channels_last": lambda t: t.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    "transposed_hw": lambda t: t.transpose(2, 3).contiguous().transpose(2, 3),
    "sliced": lambda t: t[:, 1:, ::2, ::2],
    "expanded": lambda t: t[:1].expand(2, t.shape[1], t.shape[2], t.shape[3]),
    "permuted_nchw": lambda t: t.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3),
}
# Base shapes so that each layout gives [2, 3, H, W] inputs.
BASE4 = {"contiguous": (2, 3, 7, 6), "channels_last": (2, 3, 7, 6), "transposed_hw": (2, 3, 7, 6),
         "sliced": (2, 4, 13, 11), "expanded": (2, 3, 7, 6), "permuted_nchw": (2, 3, 7, 6)}


def run_both(fn_td, fn_torch, arrays, layouts):
    """(tensord real outputs, tensord meta outputs, torch outputs) of the same call."""
    def prep(mod_tensor, a, lay):
        return LAYOUTS4[lay](mod_tensor(a)) if lay else mod_tensor(a)
    real = fn_td(*[prep(lambda a: up(a), a, lay) for a, lay in zip(arrays, layouts)])
    meta = fn_td(*[prep(lambda a: up(a, True), a, lay) for a, lay in zip(arrays, layouts)])
    ref = fn_torch(*[prep(lambda a: torch.from_numpy(a.copy()), a, lay) for a, lay in zip(arrays, layouts)])
    as_tuple = (lambda x: x if isinstance(x, tuple) else (x,))
    return as_tuple(real), as_tuple(meta), as_tuple(ref)


def check_same(real, meta, ref, values=True):
    for r, m, t in zip(real, meta, ref):
        assert geometry(r) == geometry(m) == geometry(t), (geometry(r), geometry(m), geometry(t))
        assert r.dtype._name == m.dtype._name == str(t.dtype).replace("torch.", "")
        if values:
            close(r, t)


@pytest.mark.parametrize("in_layout", list(LAYOUTS4))
@pytest.mark.parametrize("w_layout", ["contiguous", "channels_last"])
def test_conv2d_layouts_match_torch(session, in_layout, w_layout):
    x, w, b = arr(*BASE4[in_layout]), arr(4, 3, 3, 2), arr(4)
    real, meta, ref = run_both(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1),
                               lambda x, w, b: TF.conv2d(x, w, b, stride=(2, 1), padding=1),
                               [x, w, b], [in_layout, w_layout, None])
    check_same(real, meta, ref)


@pytest.mark.parametrize("perm", [(0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 2, 1)])
def test_conv2d_unbatched_permuted_matches_torch(session, perm):
    x, w = arr(3, 6, 5), arr(2, 3, 2, 2)
    inv = tuple(np.argsort(perm))

    def lay(t):
        return t.permute(*perm).contiguous().permute(*inv)
    real = F.conv2d(lay(up(x)), up(w))
    meta = F.conv2d(lay(up(x, True)), up(w, True))
    ref = TF.conv2d(lay(torch.from_numpy(x)), torch.from_numpy(w))
    check_same((real,), (meta,), (ref,))


@pytest.mark.parametrize("xs,ws", [((3, 6, 5), (2, 3, 2, 2)), ((2, 1, 5, 5), (3, 1, 2, 2)),
                                   ((2, 3, 1, 1), (4, 3, 1, 1))])
@pytest.mark.parametrize("x_cl,w_cl", [(False, True), (True, False), (True, True)])
def test_conv2d_channels_last_corner_cases_match_torch(session, xs, ws, x_cl, w_cl):
    # unbatched input with a channels-last weight, one channel, 1x1 spatial
    x, w = arr(*xs), arr(*ws)
    x_lay = LAYOUTS4["channels_last"] if x_cl and len(xs) == 4 else (lambda t: t)
    w_lay = LAYOUTS4["channels_last"] if w_cl else (lambda t: t)
    real = F.conv2d(x_lay(up(x)), w_lay(up(w)))
    meta = F.conv2d(x_lay(up(x, True)), w_lay(up(w, True)))
    ref = TF.conv2d(x_lay(torch.from_numpy(x)), w_lay(torch.from_numpy(w)))
    check_same((real,), (meta,), (ref,))


@pytest.mark.parametrize("in_layout", list(LAYOUTS4))
def test_pooling_layouts_match_torch(session, in_layout):
    x = arr(*BASE4[in_layout])
    real, meta, ref = run_both(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
                               lambda x: TF.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
                               [x], [in_layout])
    check_same(real, meta, ref)
    real, meta, ref = run_both(lambda x: F.avg_pool2d(x, (2, 3), 1, (1, 0), count_include_pad=False),
                               lambda x: TF.avg_pool2d(x, (2, 3), 1, (1, 0), count_include_pad=False),
                               [x], [in_layout])
    check_same(real, meta, ref)


@pytest.mark.parametrize("in_layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("w_layout", ["contiguous", "channels_last"])
def test_backward_ops_layouts_match_torch(session, in_layout, w_layout):
    x, w = arr(2, 3, 7, 6), arr(4, 3, 3, 2)
    g = arr(2, 4, 5, 5)
    args = ([4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    real, meta, ref = run_both(lambda g, x, w: _C.call_any("convolution_backward", g, x, w, *args),
                               lambda g, x, w: torch.ops.aten.convolution_backward(g, x, w, *args, [True] * 3),
                               [g, x, w], [None, in_layout, w_layout])
    check_same(real, meta, ref)
    xt = LAYOUTS4[in_layout](torch.from_numpy(x))
    _, idx = TF.max_pool2d(xt, 2, return_indices=True)
    gp = arr(*idx.shape)
    margs = ([2, 2], [2, 2], [0, 0], [1, 1], False)
    real, meta, ref = run_both(
        lambda g, x, i: _C.call_any("max_pool2d_with_indices_backward", g, x, *margs, i),
        lambda g, x, i: torch.ops.aten.max_pool2d_with_indices_backward(g, x, *margs, i),
        [gp, x, idx.contiguous().numpy()], [None, in_layout, None])
    check_same(real, meta, ref)
    aargs = ([2, 2], [2, 2], [0, 0], False, True, None)
    real, meta, ref = run_both(lambda g, x: _C.call_any("avg_pool2d_backward", g, x, *aargs),
                               lambda g, x: torch.ops.aten.avg_pool2d_backward(g, x, *aargs),
                               [gp, x], [None, in_layout])
    check_same(real, meta, ref)


# Error inputs of the nn ops run on real, meta and torch in test_opinfo.py.


def test_hostile_pooling_and_conv_arguments_are_clean_errors():
    x = up(arr(1, 1, 4, 4), meta=True)
    with pytest.raises(RuntimeError):
        F.max_pool2d(x, 2**62, 1, 0)
    assert tuple(F.avg_pool2d(x, 2, 2**62).shape) == (1, 1, 1, 1)   # one window; no overflow
    with pytest.raises(RuntimeError):
        F.max_pool2d(x, 3, 1, 1, dilation=2**62)
    with pytest.raises(RuntimeError):
        F.conv2d(x, up(arr(1, 1, 2, 2), meta=True), None, 1, 2**62)
    with pytest.raises(RuntimeError):
        F.conv2d(x, up(arr(1, 1, 2, 2), meta=True), None, 1, 0, 2**62)
    with pytest.raises(RuntimeError):
        F.conv2d(x, up(arr(1, 1, 2, 2), meta=True), None, 1, 0, 1, -3)


# ---------------------------------------------------------------- values

def test_max_pool_ties_and_nan_match_torch(session):
    x = RNG.integers(-2, 3, (2, 2, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1] = np.nan
    x[1, 1, 4, 5] = np.nan
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
               dict(kernel_size=3, stride=1, dilation=2)):
        v, i = F.max_pool2d(up(x), return_indices=True, **kw)
        rv, ri = TF.max_pool2d(torch.from_numpy(x), return_indices=True, **kw)
        close(v, rv)
        np.testing.assert_array_equal(i.numpy(), ri.numpy())


@pytest.mark.parametrize("kw", [dict(padding="same"), dict(padding="valid"), dict(padding="same", dilation=2),
                                dict(padding="same", dilation=(1, 3)), dict(padding="same", groups=3)])
@pytest.mark.parametrize("kshape", [(3, 3), (2, 4), (1, 2)])
def test_conv2d_padding_strings_match_torch(session, kw, kshape):
    x, w = arr(2, 3, 7, 8), arr(6, 3 // kw.get("groups", 1), *kshape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = TF.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw)
    out = F.conv2d(up(x), up(w), **kw)
    assert tuple(out.shape) == tuple(ref.shape)
    close(out, ref)
    meta = F.conv2d(up(x, True), up(w, True), **kw)
    assert tuple(meta.shape) == tuple(ref.shape)


def test_conv2d_padding_string_errors():
    x, w = up(arr(1, 3, 5, 5), True), up(arr(2, 3, 3, 3), True)
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Invalid padding string: 'foo'"):
        F.conv2d(x, w, padding="foo")


def test_tensord_conv2d_function_is_the_op(session):
    x, w = arr(1, 2, 5, 5), arr(3, 2, 3, 3)
    close(tensord.conv2d(up(x), up(w), None, 1, 1), TF.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, 1, 1))


# ---- rms_norm

def _rms_ref(x, shape, weight=None, eps=None):
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    dims = tuple(range(x.dim() - len(shape), x.dim()))
    out = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return out * weight if weight is not None else out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,norm,use_w,eps", [((4, 6), (6,), True, None), ((2, 3, 4), (3, 4), False, 1e-3),
                                                  ((5,), 5, True, 0.1), ((2, 0, 3), (3,), True, None)])
def test_rms_norm_matches_reference(session, dtype, shape, norm, use_w, eps):
    x = arr(*shape, dtype=dtype)
    nshape = (norm,) if isinstance(norm, int) else norm
    w = arr(*nshape, dtype=dtype) if use_w else None
    ours = F.rms_norm(up(x), norm, up(w) if use_w else None, eps)
    ref = _rms_ref(torch.from_numpy(x), nshape, torch.from_numpy(w) if use_w else None, eps)
    assert ours.dtype._name == str(ref.dtype).replace("torch.", "")
    close(ours, ref, rtol=1e-5, atol=1e-6)
    meta = F.rms_norm(up(x, True), norm, up(w, True) if use_w else None, eps)
    assert tuple(meta.shape) == tuple(ref.shape) and meta.is_meta


def test_rms_norm_errors():
    x = up(arr(2, 3), True)
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\]"):
        F.rms_norm(x, (4,))
    with pytest.raises(RuntimeError, match="expected a floating input"):
        F.rms_norm(up(np.ones((2, 3), dtype=np.int64), True), (3,))


# ---- scaled_dot_product_attention

def _sdpa_ref(q, k, v, attn_mask=None, is_causal=False, scale=None):
    s = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * s
    if is_causal:
        attn_mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask.expand(scores.shape), float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, -1) @ v


SDPA_CASES = [
    dict(q=(2, 3, 4, 8), k=(2, 3, 5, 8), v=(2, 3, 5, 6)),
    dict(q=(2, 3, 4, 8), k=(2, 3, 5, 8), v=(2, 3, 5, 6), mask="bool"),
    dict(q=(2, 3, 4, 8), k=(2, 3, 5, 8), v=(2, 3, 5, 6), mask="float"),
    dict(q=(3, 5, 4), k=(3, 5, 4), v=(3, 5, 4), is_causal=True),
    dict(q=(2, 4, 6), k=(2, 7, 6), v=(2, 7, 3), is_causal=True),
    dict(q=(4, 8), k=(6, 8), v=(6, 2), scale=0.3, mask="float"),
    dict(q=(1, 2, 3, 4), k=(1, 1, 5, 4), v=(1, 1, 5, 4), mask="bool"),   # broadcast batch dims
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", SDPA_CASES)
def test_sdpa_matches_reference(session, case, dtype):
    q, k, v = arr(*case["q"], dtype=dtype), arr(*case["k"], dtype=dtype), arr(*case["v"], dtype=dtype)
    mask = None
    lshape = (case["q"][-2], case["k"][-2])
    if case.get("mask") == "bool":
        mask = RNG.random(lshape) < 0.7
        mask[:, 0] = True   # every row keeps a position
    elif case.get("mask") == "float":
        mask = arr(*lshape, dtype=dtype)
    kw = dict(is_causal=case.get("is_causal", False), scale=case.get("scale"))
    ours = F.scaled_dot_product_attention(up(q), up(k), up(v), None if mask is None else up(mask), **kw)
    ref = _sdpa_ref(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                    None if mask is None else torch.from_numpy(mask), **kw)
    close(ours, ref, rtol=1e-5, atol=1e-6)
    meta = F.scaled_dot_product_attention(up(q, True), up(k, True), up(v, True),
                                          None if mask is None else up(mask, True), **kw)
    assert tuple(meta.shape) == tuple(ref.shape) and meta.dtype._name == str(ref.dtype)[6:]


def test_sdpa_errors_and_dropout(session):
    q = up(arr(2, 3, 4), True)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=up(np.ones((3, 3), dtype=bool), True), is_causal=True)
    with pytest.raises(RuntimeError, match="size mismatch|match|broadcast|Expected"):
        F.scaled_dot_product_attention(q, up(arr(2, 3, 5), True), q)
    tensord.manual_seed(0)
    x = up(arr(2, 4, 4))
    out = F.scaled_dot_product_attention(x, x, x, dropout_p=0.5)
    assert tuple(out.shape) == (2, 4, 4) and np.all(np.isfinite(out.numpy()))


# ---- cross_entropy, nll_loss

CE_CASES = [
    dict(shape=(5, 4)),
    dict(shape=(5, 4), weight=True),
    dict(shape=(5, 4), label_smoothing=0.2),
    dict(shape=(5, 4), weight=True, label_smoothing=0.3),
    dict(shape=(5, 4), ignore=True),
    dict(shape=(5, 4), ignore=True, weight=True, label_smoothing=0.1),
    dict(shape=(2, 3, 4, 2), ignore=True, weight=True, label_smoothing=0.25),
    dict(shape=(4,), label_smoothing=0.1),
    dict(shape=(4,), weight=True),
]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", CE_CASES)
def test_cross_entropy_class_indices_matches_torch(session, case, reduction):
    shape = case["shape"]
    c = shape[1] if len(shape) >= 2 else shape[0]
    x = arr(*shape, dtype=np.float64)
    tshape = (shape[0],) + shape[2:] if len(shape) >= 2 else ()
    t = RNG.integers(0, c, tshape).astype(np.int64)
    if case.get("ignore") and t.ndim:
        t.reshape(-1)[::3] = 1
    w = RNG.uniform(0.5, 2.0, c) if case.get("weight") else None
    kw = dict(reduction=reduction, label_smoothing=case.get("label_smoothing", 0.0),
              ignore_index=1 if case.get("ignore") else -100)
    ours = F.cross_entropy(up(x), up(t), None if w is None else up(w), **kw)
    ref = TF.cross_entropy(torch.from_numpy(x), torch.from_numpy(t), None if w is None else torch.from_numpy(w), **kw)
    close(ours, ref, rtol=1e-10, atol=1e-12)
    meta = F.cross_entropy(up(x, True), up(t, True), None if w is None else up(w, True), **kw)
    assert tuple(meta.shape) == tuple(ref.shape)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape,weight,ls", [((5, 4), False, 0.0), ((5, 4), True, 0.0), ((5, 4), False, 0.2),
                                             ((5, 4), True, 0.3), ((2, 3, 4, 2), True, 0.1), ((4,), False, 0.1),
                                             ((3, 0), False, 0.0)])
def test_cross_entropy_probability_targets_matches_torch(session, shape, weight, ls, reduction):
    x = arr(*shape, dtype=np.float64)
    cdim = 1 if len(shape) >= 2 else 0
    p = RNG.uniform(0.0, 1.0, shape)
    p = p / np.maximum(p.sum(axis=cdim, keepdims=True), 1e-12)
    c = shape[cdim]
    w = RNG.uniform(0.5, 2.0, c) if weight else None
    ours = F.cross_entropy(up(x), up(p), None if w is None else up(w), reduction=reduction, label_smoothing=ls)
    ref = TF.cross_entropy(torch.from_numpy(x), torch.from_numpy(p), None if w is None else torch.from_numpy(w),
                           reduction=reduction, label_smoothing=ls)
    close(ours, ref, rtol=1e-10, atol=1e-12)
    meta = F.cross_entropy(up(x, True), up(p, True), None if w is None else up(w, True), reduction=reduction,
                           label_smoothing=ls)
    assert tuple(meta.shape) == tuple(ref.shape)


def test_cross_entropy_probability_target_errors():
    x = up(arr(3, 4), True)
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point target"):
        F.cross_entropy(x, up(arr(3, 4), True), ignore_index=0)
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4 classes"):
        F.cross_entropy(x, up(arr(3, 4), True), weight=up(arr(3), True))
    with pytest.raises(RuntimeError, match="Expected floating point type for target with class probabilities"):
        F.cross_entropy(x, up(np.zeros((3, 4), dtype=np.int64), True))
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(x, up(arr(3, 4), True), label_smoothing=1.5)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.cross_entropy(x, up(arr(3, 4), True), reduction="avg")


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape,weight,ignore", [((5, 4), False, False), ((5, 4), True, True), ((4,), False, False),
                                                 ((2, 3, 4), True, True)])
def test_nll_loss_matches_torch(session, shape, weight, ignore, reduction):
    x = arr(*shape, dtype=np.float64)
    c = shape[1] if len(shape) >= 2 else shape[0]
    tshape = (shape[0],) + shape[2:] if len(shape) >= 2 else ()
    t = RNG.integers(0, c, tshape).astype(np.int64)
    if ignore:
        t.reshape(-1)[::2] = 2
    w = RNG.uniform(0.5, 2.0, c) if weight else None
    kw = dict(reduction=reduction, ignore_index=2 if ignore else -100)
    ours = F.nll_loss(up(x), up(t), None if w is None else up(w), **kw)
    ref = TF.nll_loss(torch.from_numpy(x), torch.from_numpy(t), None if w is None else torch.from_numpy(w), **kw)
    close(ours, ref, rtol=1e-10, atol=1e-12)
    assert tuple(F.nll_loss(up(x, True), up(t, True), **kw).shape) == tuple(ref.shape)


def test_nll_loss_errors(session):
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.nll_loss(up(arr(3, 4), True), up(np.zeros(2, dtype=np.int64), True))
    with pytest.raises(RuntimeError, match="expected target of dtype int64"):
        F.nll_loss(up(arr(3, 4), True), up(np.zeros(3, dtype=np.int32), True))
    # a class weight of the wrong length is refused before any target is read (meta and real alike)
    t = np.array([0, 1, 2], dtype=np.int64)
    for meta in (True, False):
        for fn in (F.nll_loss, F.cross_entropy):
            with pytest.raises(RuntimeError, match=r"weight tensor should be defined either for all 4 classes or no "
                                                   r"classes but got weight tensor of shape: \[3\]"):
                fn(up(arr(3, 4), meta), up(t, meta), weight=up(np.ones(3), meta))
        with pytest.raises(RuntimeError, match=r"got weight tensor of shape: \[2, 2\]"):
            F.cross_entropy(up(arr(3, 4), meta), up(t, meta), weight=up(np.ones((2, 2)), meta))


# ---- mse_loss, dropout, layer_norm, embedding

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss_matches_torch(session, reduction):
    a, b = arr(3, 4), arr(3, 4)
    close(F.mse_loss(up(a), up(b), reduction=reduction),
          TF.mse_loss(torch.from_numpy(a), torch.from_numpy(b), reduction=reduction))
    with pytest.warns(UserWarning, match="target size"):
        out = F.mse_loss(up(a, True), up(arr(1, 4), True), reduction=reduction)
    assert tuple(out.shape) == ((3, 4) if reduction == "none" else ())


def test_dropout_semantics(session):
    x = arr(50, 40) + 3.0
    assert F.dropout(up(x), 0.3, training=False).numpy().tolist() == x.tolist()
    assert np.all(F.dropout(up(x), 1.0).numpy() == 0)
    tensord.manual_seed(3)
    y = F.dropout(up(x), 0.25).numpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=1e-6)
    assert 0 < kept.mean() < 1
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout(up(x, True), 1.5)
    m = F.dropout(up(x, True), 0.5)
    assert m.is_meta and tuple(m.shape) == (50, 40)


@pytest.mark.parametrize("shape,norm,affine", [((4, 6), (6,), True), ((2, 3, 4), (3, 4), False), ((5,), 5, True)])
def test_layer_norm_matches_torch(session, shape, norm, affine):
    x = arr(*shape, dtype=np.float64)
    nshape = (norm,) if isinstance(norm, int) else norm
    w, b = (arr(*nshape, dtype=np.float64), arr(*nshape, dtype=np.float64)) if affine else (None, None)
    tw = (lambda a: None if a is None else torch.from_numpy(a))
    ours = F.layer_norm(up(x), norm, None if w is None else up(w), None if b is None else up(b))
    ref = TF.layer_norm(torch.from_numpy(x), nshape, tw(w), tw(b))
    close(ours, ref, rtol=1e-10, atol=1e-10)
    assert tuple(F.layer_norm(up(x, True), norm).shape) == tuple(ref.shape)
    with pytest.raises(RuntimeError, match="Given normalized_shape"):
        F.layer_norm(up(x, True), (7,))
    bad = up(arr(7), True)
    for kw in ({"weight": bad}, {"bias": bad}):
        name = next(iter(kw))
        with pytest.raises(RuntimeError, match=rf"Expected {name} to be of same shape as normalized_shape, but got "
                                               rf"{name} of shape \[7\] and normalized_shape = \["):
            F.layer_norm(up(x, True), norm, **kw)


def test_embedding_matches_torch(session):
    w = arr(6, 3, dtype=np.float64)
    idx = RNG.integers(0, 6, (2, 4)).astype(np.int64)
    close(F.embedding(up(idx), up(w)), TF.embedding(torch.from_numpy(idx), torch.from_numpy(w)))
    tw = tensord.from_numpy(w).requires_grad_()
    F.embedding(up(idx), tw, padding_idx=idx[0, 0]).sum().backward()
    rw = torch.from_numpy(w).requires_grad_()
    TF.embedding(torch.from_numpy(idx), rw, padding_idx=int(idx[0, 0])).sum().backward()
    close(tw.grad, rw.grad)
    assert tuple(F.embedding(up(idx, True), up(w, True)).shape) == (2, 4, 3)
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices'"):
        F.embedding(up(arr(2), True), up(w, True))


# ---------------------------------------------------------------- gradients of the composites

def test_composite_gradients_match_torch(session):
    x = arr(2, 3, 6, 6, dtype=np.float64)
    w = arr(4, 3, 3, 3, dtype=np.float64)
    tx, tw = tensord.from_numpy(x).requires_grad_(), tensord.from_numpy(w).requires_grad_()
    rx, rw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    loss = F.avg_pool2d(F.max_pool2d(F.conv2d(tx, tw, padding="same"), 2, 1), 2).sum()
    loss.backward()
    TF.avg_pool2d(TF.max_pool2d(TF.conv2d(rx, rw, padding="same"), 2, 1), 2).sum().backward()
    close(tx.grad, rx.grad, rtol=1e-10, atol=1e-10)
    close(tw.grad, rw.grad, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- modules

def test_conv2d_module_parameters_init_and_repr(session):
    m = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
    assert tuple(m.weight.shape) == (6, 2, 3, 3) and tuple(m.bias.shape) == (6,)
    bound = 1 / math.sqrt(2 * 9)
    assert np.all(np.abs(m.weight.detach().numpy()) <= bound + 1e-7)
    assert np.all(np.abs(m.bias.detach().numpy()) <= bound + 1e-7)
    for args, kw in [((4, 6, 3), dict(stride=2, padding=1, groups=2)), ((3, 8, (3, 5)), dict(bias=False)),
                     ((3, 8, 3), dict(padding="same", dilation=2)), ((3, 8, 1), dict(padding="valid"))]:
        assert repr(nn.Conv2d(*args, **kw)) == repr(torch.nn.Conv2d(*args, **kw))
    y = m(up(arr(2, 4, 8, 8)))
    assert tuple(y.shape) == (2, 6, 4, 4)
    with tensord.device("meta"):
        mm = nn.Conv2d(3, 5, 3)
        assert tuple(mm(tensord.empty(1, 3, 10, 10)).shape) == (1, 5, 8, 8)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 6, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv2d(3, 6, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string"):
        nn.Conv2d(3, 6, 3, padding="full")


def test_pooling_and_rmsnorm_modules(session):
    pairs = [(nn.MaxPool2d(2), torch.nn.MaxPool2d(2)),
             (nn.MaxPool2d(3, 2, 1, ceil_mode=True), torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)),
             (nn.AvgPool2d(2), torch.nn.AvgPool2d(2)),
             (nn.AvgPool2d((3, 2), 1, 1), torch.nn.AvgPool2d((3, 2), 1, 1))]
    for mod, ref in pairs:
        assert repr(mod) == repr(ref)
        x = arr(2, 3, 7, 6)
        close(mod(up(x)), ref(torch.from_numpy(x)))
    v, i = nn.MaxPool2d(2, return_indices=True)(up(arr(1, 2, 4, 4)))
    assert i.dtype._name == "int64"
    r = nn.RMSNorm(8)
    assert repr(r) == "RMSNorm((8,), eps=None, elementwise_affine=True)"
    assert r.weight.detach().numpy().tolist() == [1.0] * 8
    assert repr(nn.RMSNorm([2, 3], eps=1e-6, elementwise_affine=False)) == \
        "RMSNorm((2, 3), eps=1e-06, elementwise_affine=False)"
    x = arr(3, 8)
    close(r(up(x)), _rms_ref(torch.from_numpy(x), (8,)), rtol=1e-5, atol=1e-6)
