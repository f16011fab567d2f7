"""Reductions and scans (opinfo_reduction.py) against PyTorch 1.13's metadata
and errors: for every sample and layout, tensord's sizes, strides,
storage_offset and dtype equal torch's for the same call on a tensor of the
same layout; every ErrorInput raises the expected error with the expected
words on real tensors and on meta tensors, and torch raises the same error
type for it."""
import numpy as np
import pytest
import torch

import tensord
from tensord import _C

import test_opinfo as T
from opinfo_reduction import OPINFOS


def _torch_layout(t, layout):
    """The torch tensor with test_opinfo's non-contiguous layout."""
    if not isinstance(t, torch.Tensor) or layout == "contiguous":
        return t
    if t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if t.dim() == 1 and t.numel() > 1:
        return torch.stack([t, t], 1).reshape(-1)[::2]
    return t


def _cases():
    out = []
    for n, info in enumerate(OPINFOS):
        for i, s in enumerate(info.samples(np.random.default_rng(500 + n))):
            for layout in T.LAYOUTS:
                out.append(pytest.param(info, s, layout, id=f"{info.name}-{i}-{layout}"))
    return out


def _error_cases():
    out = []
    for n, info in enumerate(OPINFOS):
        for i, e in enumerate(info.errors(np.random.default_rng(900 + n))):
            out.append(pytest.param(info, e, id=f"{info.name}-{i}"))
    return out


@pytest.mark.parametrize("info,sample,layout", _cases())
def test_metadata_equals_torch(session, info, sample, layout):
    outs = T.run_tensord(info, sample, layout)
    targs = [_torch_layout(T.to_torch(a), layout) for a in sample.args]
    ref = info.torch_ref(*targs, **{k: T.to_torch(v) for k, v in sample.kwargs.items()})
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, r in zip(outs, refs):
        m = _C._client_meta(o)
        assert (list(m["sizes"]), list(m["strides"]), m["storage_offset"]) == \
            (list(r.shape), list(r.stride()), r.storage_offset())
        assert o.dtype._name == str(r.dtype).replace("torch.", "")


@pytest.mark.parametrize("info,err", _error_cases())
def test_errors_match_torch(session, info, err):
    for device in (None, "meta"):
        args = [T.to_tensord(a, "contiguous", device) for a in err.sample.args]
        kwargs = {k: T.to_tensord(v, "contiguous", device) for k, v in err.sample.kwargs.items()}
        with pytest.raises(err.error, match=None) as caught:
            r = _C.call_any(info.name, *args, **kwargs)
            (r[0] if isinstance(r, tuple) else r).numpy()
        assert err.match in str(caught.value)
    with pytest.raises(err.error):
        info.torch_ref(*[T.to_torch(a) for a in err.sample.args],
                       **{k: T.to_torch(v) for k, v in err.sample.kwargs.items()})
