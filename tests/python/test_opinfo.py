"""Every op of the table, from Python, driven by the OpInfo database (opinfo.py):

- against NumPy (values) and PyTorch 1.13 (values and dtype), on random data,
  with contiguous and non-contiguous (transposed / strided) tensor inputs;
- the metadata the client predicted (sizes, strides, storage offset, dtype,
  device) equals what the daemon reports for each output;
- the same call on meta inputs gives the same metadata without any daemon;
- the database covers every op in the table.
"""
import numpy as np
import pytest
import torch

import tensord
from tensord import _C

from opinfo import OPINFOS, Cast, D, Sample

LAYOUTS = ("contiguous", "noncontiguous")


def _cases():
    cases = []
    for n, info in enumerate(OPINFOS):
        rng = np.random.default_rng(1000 + n)
        for i, sample in enumerate(info.samples(rng)):
            for layout in LAYOUTS:
                if layout == "noncontiguous" and not info.noncontig:
                    continue
                cases.append(pytest.param(info, sample, layout, id=f"{info.name}-{i}-{layout}"))
    return cases


CASES = _cases()


# ---------------------------------------------------------------- conversion

def _upload(arr, device):
    # Real tensors from NumPy; meta tensors of the same dtype/shape with no daemon.
    return tensord.from_numpy(arr) if device is None else tensord.tensor(arr, device=device)


def _noncontig(t, arr, device):
    """The same values as `arr` in a non-contiguous layout."""
    if arr.ndim >= 2:
        return _upload(np.ascontiguousarray(np.swapaxes(arr, -1, -2)), device).transpose(-1, -2)
    if arr.ndim == 1 and arr.size > 1:
        doubled = np.stack([arr, arr], 1).reshape(-1)
        return _upload(doubled, device)[::2]
    return t


def to_tensord(x, layout, device=None):
    if isinstance(x, np.ndarray):
        t = _upload(x, device)
        if layout == "noncontiguous":
            t = _noncontig(t, x, device)
        return t
    if isinstance(x, Cast):
        return to_tensord(x.array, layout, device).to(getattr(tensord, x.dtype))
    if isinstance(x, D):
        return getattr(tensord, x.name)
    if isinstance(x, list) and any(isinstance(e, (np.ndarray, Cast)) for e in x):
        return [None if e is None else to_tensord(e, layout, device) for e in x]
    return x


def to_torch(x):
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x.copy())
    if isinstance(x, Cast):
        return torch.from_numpy(x.array.copy()).to(getattr(torch, x.dtype))
    if isinstance(x, D):
        return getattr(torch, x.name)
    if isinstance(x, list) and any(isinstance(e, (np.ndarray, Cast)) for e in x):
        return [None if e is None else to_torch(e) for e in x]
    return x


def to_numpy(x):
    if isinstance(x, Cast):
        return x.array
    if isinstance(x, D):
        return x.name
    if isinstance(x, list) and any(isinstance(e, (np.ndarray, Cast)) for e in x):
        return [None if e is None else to_numpy(e) for e in x]
    return x


def run_tensord(info, sample, layout, device=None):
    args = [to_tensord(a, layout, device) for a in sample.args]
    kwargs = {k: to_tensord(v, layout, device) for k, v in sample.kwargs.items()}
    out = _C.call_any(info.name, *args, **kwargs)
    return out if isinstance(out, tuple) else (out,)


def host(t):
    """Values of a tensord or torch tensor as NumPy (bfloat16 via float32)."""
    if isinstance(t, torch.Tensor):
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    return t.float().numpy() if t.dtype in (tensord.bfloat16,) else t.numpy()


def _low_precision(sample):
    """True when an input is float16, bfloat16 or float8 (the result carries its rounding)."""
    def low(a):
        if isinstance(a, Cast):
            return True
        if isinstance(a, np.ndarray):
            return a.dtype == np.float16
        if isinstance(a, list):
            return any(low(e) for e in a)
        return False
    return any(low(a) for a in list(sample.args) + list(sample.kwargs.values()))


def tolerances(info, dtype_name, low_precision):
    if low_precision or dtype_name in ("float16", "bfloat16"):
        return max(info.rtol, 1e-2), max(info.atol, 1e-2)
    return info.rtol, info.atol


def assert_values(ours, ref, info, low_precision=False):
    ref = np.asarray(ref)
    assert tuple(ours.shape) == ref.shape, f"shape {tuple(ours.shape)} != reference {ref.shape}"
    if info.shape_only:
        return
    got = host(ours)
    if got.dtype.kind in "biu" and ref.dtype.kind in "biu":
        np.testing.assert_array_equal(got, ref)
    else:
        rtol, atol = tolerances(info, ours.dtype._name, low_precision)
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("info,sample,layout", CASES)
def test_op_matches_references(session, info, sample, layout):
    outs = run_tensord(info, sample, layout)
    if info.torch_ref is not None:
        ref = info.torch_ref(*[to_torch(a) for a in sample.args], **{k: to_torch(v) for k, v in sample.kwargs.items()})
        refs = tuple(ref) if isinstance(ref, (tuple, list)) else (ref,)
        assert len(refs) == len(outs)
        for o, r in zip(outs, refs):
            assert o.dtype._name == str(r.dtype).replace("torch.", ""), f"dtype {o.dtype} != torch's {r.dtype}"
            assert_values(o, host(r), info, _low_precision(sample))
    if info.np_ref is not None:
        ref = info.np_ref(*[to_numpy(a) for a in sample.args], **{k: to_numpy(v) for k, v in sample.kwargs.items()})
        refs = ref if isinstance(ref, tuple) else (ref,)
        for o, r in zip(outs, refs):
            assert_values(o, r, info, _low_precision(sample))
    if info.random:
        for o in outs:
            if info.name.startswith("rand") and not info.name.startswith("randn"):
                v = o.numpy()
                assert np.all((v >= 0) & (v < 1)), "rand values must lie in [0, 1)"
            assert np.all(np.isfinite(o.numpy()))


@pytest.mark.parametrize("info,sample,layout", CASES)
def test_predicted_meta_equals_daemon_meta(session, info, sample, layout):
    outs = run_tensord(info, sample, layout)
    for o in outs:
        assert _C._client_meta(o) == _C._daemon_meta(o)


def _meta_of(t):
    m = _C._client_meta(t)
    return m["sizes"], m["strides"], m["storage_offset"], m["dtype"]


@pytest.mark.parametrize("info,sample,layout", CASES)
def test_meta_mode_predicts_the_same(session, info, sample, layout):
    """The same call on meta copies of the inputs (same strides) gives the same
    metadata with no daemon involved; data-dependent ops refuse."""
    entry = [e for e in _C.op_table() if e["full_name"] == info.name][0]
    real = run_tensord(info, sample, layout)
    before = session.stats()["ops_issued"]
    before_uploads = session.stats()["uploads"]
    if entry["is_factory"]:
        with tensord.device("meta"):
            meta = run_tensord(info, sample, layout)
    else:
        if not any(isinstance(a, (np.ndarray, Cast, list)) for a in list(sample.args) + list(sample.kwargs.values())):
            pytest.skip("no tensor inputs")
        try:
            meta = run_tensord(info, sample, layout, device="meta")
        except NotImplementedError as e:
            if info.name == "to.device":   # meta -> cpu: there is no data to copy
                assert 'empty_like(t, device="cpu")' in str(e)
                return
            assert entry["data_dependent"], f"only data-dependent ops may refuse meta: {e}"
            assert info.name.split(".")[0] in str(e) and "depends on the data" in str(e)
            return
        assert not entry["data_dependent"]
    stats = session.stats()
    assert stats["ops_issued"] == before, "meta mode must not send anything to the daemon"
    assert stats["uploads"] == before_uploads
    for r, m in zip(real, meta):
        assert m.is_meta
        if info.random or entry["is_factory"]:
            assert _meta_of(r)[0] == _meta_of(m)[0] and _meta_of(r)[3] == _meta_of(m)[3]
        else:
            assert _meta_of(r) == _meta_of(m)


def test_opinfo_completeness():
    """Every op in the table has samples in the OpInfo database."""
    covered = {info.name for info in OPINFOS}
    missing = [e["full_name"] for e in _C.op_table() if e["full_name"] not in covered]
    assert not missing, f"ops without OpInfo samples (add them to tests/python/opinfo.py): {missing}"
    unknown = covered - {e["full_name"] for e in _C.op_table()}
    assert not unknown, f"OpInfo entries for ops not in the table: {sorted(unknown)}"


def test_opinfo_samples_are_well_formed():
    for n, info in enumerate(OPINFOS):
        samples = info.samples(np.random.default_rng(n))
        assert samples, info.name
        assert all(isinstance(s, Sample) for s in samples), info.name
