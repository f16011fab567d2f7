"""Every op of the table, from Python, driven by the OpInfo database (opinfo.py),
run three ways over every sample in every layout of its tensor inputs:

- meta equals real: the metadata the client predicted (dtype, sizes, every
  stride, storage_offset) equals what the daemon reports for each output;
  which outputs alias which inputs agrees with the daemon's storages; the
  same call on meta inputs (no daemon) gives the same metadata and aliasing;
  error inputs raise the same exception with the same message on both;
- real equals reference: values agree with NumPy and PyTorch 1.13;
- tensord equals PyTorch on metadata: sizes, strides, storage_offset, dtype
  and aliasing agree with PyTorch's CPU results on inputs of the same layout,
  except the cases listed in meta_deviations.txt, each with its reason; the
  list must be exact (a listed case that agrees fails too).

Layouts (applied to every NumPy array of a sample, the same way in tensord
and in torch): contiguous; transposed (last two dims, or a stride-2 slice of
a 1-D array); permuted (3-D, 5-D and up); channels_last (4-D, so sizes
(N, C, 1, 1) get strides (C, 1, C, C)); sliced (an offset and a step in the
last dim); expanded (floating inputs: stride 0 in the last dim, the values
repeated).
"""
import os
import zlib

import numpy as np
import pytest

import tensord
from tensord import _C

from opinfo import OPINFOS, Cast, D, Sample
from opinfo_base import torch  # None without PyTorch: then only the device suites, which import this file, run

LAYOUTS = ("contiguous", "transposed", "permuted", "channels_last", "sliced", "expanded")
DEVIATIONS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "meta_deviations.txt")


# ---------------------------------------------------------------- layouts

class Laid:
    """An array in a layout: ``values`` is what the tensor holds (for
    "expanded" the last dim repeats its first element)."""

    def __init__(self, values, layout):
        self.values = values
        self.layout = layout


def _inplace(info):
    return info.name.split(".")[0].endswith("_")


def _applies(arr, layout, expandable):
    if layout == "contiguous":
        return True
    if layout == "transposed":
        return arr.ndim >= 2 or (arr.ndim == 1 and arr.size > 1)
    if layout == "permuted":
        return arr.ndim == 3 or arr.ndim >= 5
    if layout == "channels_last":
        return arr.ndim == 4
    if layout == "sliced":
        return arr.ndim >= 1 and arr.size > 0
    if layout == "expanded":
        return expandable and arr.dtype.kind == "f" and arr.ndim >= 1 and arr.size > 0 and arr.shape[-1] > 1
    raise AssertionError(layout)


def _lay_out_value(x, layout, expandable):
    """(value in `layout`, whether the layout changed it)."""
    if isinstance(x, np.ndarray):
        if not _applies(x, layout, expandable):
            return Laid(x, "contiguous"), False
        if layout == "expanded":
            vals = np.ascontiguousarray(np.broadcast_to(x[..., :1], x.shape))
            return Laid(vals, layout), True
        return Laid(x, layout), layout != "contiguous"
    if isinstance(x, Cast):
        inner, changed = _lay_out_value(x.array, layout, expandable)
        return Cast(inner, x.dtype), changed
    if isinstance(x, list) and any(isinstance(e, (np.ndarray, Cast)) for e in x):
        out, changed = [], False
        for e in x:
            v, c = (None, False) if e is None else _lay_out_value(e, layout, expandable)
            out.append(v)
            changed |= c
        return out, changed
    return x, False


def lay_out(info, sample, layout):
    """The sample with its arrays in `layout`, or None when the layout changes nothing."""
    args, changed = [], False
    for i, a in enumerate(sample.args):
        v, c = _lay_out_value(a, layout, expandable=not (i == 0 and _inplace(info)))
        args.append(v)
        changed |= c
    kwargs = {}
    for k, a in sample.kwargs.items():
        v, c = _lay_out_value(a, layout, expandable=True)
        kwargs[k] = v
        changed |= c
    if layout != "contiguous" and not changed:
        return None
    return Sample(*args, **kwargs)


def _inverse(perm):
    return tuple(int(i) for i in np.argsort(perm))


def make_layout(laid, upload):
    """A tensor (tensord or torch, by `upload`) holding laid.values in laid.layout,
    built with view ops only (so it works the same on meta)."""
    arr, layout = laid.values, laid.layout
    if layout == "contiguous":
        return upload(arr)
    if layout == "transposed":
        if arr.ndim >= 2:
            return upload(np.ascontiguousarray(np.swapaxes(arr, -1, -2))).transpose(-1, -2)
        return upload(np.ascontiguousarray(np.stack([arr, arr], 1).reshape(-1)))[::2]
    if layout in ("permuted", "channels_last"):
        perm = (0, 2, 3, 1) if layout == "channels_last" else tuple(reversed(range(arr.ndim)))
        if layout == "permuted" and arr.ndim == 3:
            perm = (2, 0, 1)
        return upload(np.ascontiguousarray(arr.transpose(perm))).permute(*_inverse(perm))
    if layout == "sliced":
        shape = list(arr.shape)
        big_shape = shape[:-1] + [2 * shape[-1] + 1]
        if arr.ndim >= 2:
            big_shape[0] += 1
        big = np.zeros(big_shape, dtype=arr.dtype)
        if arr.ndim >= 2:
            big[1:, ..., 1::2] = arr
            return upload(big)[1:][..., 1::2]
        big[1::2] = arr
        return upload(big)[1::2]
    if layout == "expanded":
        return upload(np.ascontiguousarray(arr[..., :1])).expand(*arr.shape)
    raise AssertionError(layout)


# ---------------------------------------------------------------- cases

def _seeded(purpose):
    """(info, rng) for every OpInfo, each rng seeded by the op's name, the
    OpInfo's place among that op's, and `purpose`: adding or moving an OpInfo
    changes no other op's samples."""
    seen = {}
    for info in OPINFOS:
        k = seen[info.name] = seen.get(info.name, -1) + 1
        yield info, np.random.default_rng(zlib.crc32(f"{purpose}/{info.name}/{k}".encode()))


def _cases():
    cases = []
    counts = {}   # samples per op so far: ids stay unique when one op has several OpInfos
    for info, rng in _seeded("samples"):
        for sample in info.samples(rng):
            i = counts[info.name] = counts.get(info.name, -1) + 1
            for layout in LAYOUTS:
                if layout != "contiguous" and (not info.noncontig or layout in info.skip_layouts):
                    continue
                laid = lay_out(info, sample, layout)
                if laid is None:
                    continue
                cases.append(pytest.param(info, laid, layout, id=f"{info.name}-{i}-{layout}"))
    return cases


def _error_cases():
    cases = []
    counts = {}
    for info, rng in _seeded("errors"):
        for err in info.errors(rng):
            i = counts[info.name] = counts.get(info.name, -1) + 1
            cases.append(pytest.param(info, err, id=f"{info.name}-err{i}"))
    return cases


CASES = _cases()
ERROR_CASES = _error_cases()


# ---------------------------------------------------------------- conversion

def _upload(arr, device):
    # Real tensors from NumPy; meta tensors of the same dtype/shape with no daemon.
    return tensord.from_numpy(arr.copy(order="C")) if device is None else tensord.tensor(arr, device=device)


def to_tensord(x, device=None):
    if isinstance(x, Laid):
        return make_layout(x, lambda a: _upload(a, device))
    if isinstance(x, np.ndarray):
        return _upload(x, device)
    if isinstance(x, Cast):
        return to_tensord(x.array, device).to(getattr(tensord, x.dtype))
    if isinstance(x, D):
        return getattr(tensord, x.name)
    if isinstance(x, list) and any(isinstance(e, (np.ndarray, Cast, Laid)) for e in x):
        return [None if e is None else to_tensord(e, device) for e in x]
    return x


def _torch_upload(a, device="cpu"):
    # torch.from_numpy keeps NumPy's strides (0 for size-0 arrays); a fresh
    # torch.empty has PyTorch's contiguous strides, as tensord's upload.
    src = torch.from_numpy(a.copy(order="C"))
    return torch.empty(src.shape, dtype=src.dtype, device=device).copy_(src)


def to_torch(x, device="cpu"):
    if isinstance(x, Laid):
        return make_layout(x, lambda a: _torch_upload(a, device))
    if isinstance(x, np.ndarray):
        return _torch_upload(x, device)
    if isinstance(x, Cast):
        return to_torch(x.array, device).to(getattr(torch, x.dtype))
    if isinstance(x, D):
        return getattr(torch, x.name)
    if isinstance(x, list) and any(isinstance(e, (np.ndarray, Cast, Laid)) for e in x):
        return [None if e is None else to_torch(e, device) for e in x]
    return x


def to_numpy(x):
    if isinstance(x, Laid):
        return x.values
    if isinstance(x, Cast):
        return to_numpy(x.array)
    if isinstance(x, D):
        return x.name
    if isinstance(x, list) and any(isinstance(e, (np.ndarray, Cast, Laid)) for e in x):
        return [None if e is None else to_numpy(e) for e in x]
    return x


def _flat_tensors(values, cls):
    out = []
    for v in values:
        if isinstance(v, cls):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(e for e in v if isinstance(e, cls))
    return out


def run_tensord(info, sample, device=None):
    """(outputs, tensor inputs in argument order)."""
    args = [to_tensord(a, device) for a in sample.args]
    kwargs = {k: to_tensord(v, device) for k, v in sample.kwargs.items()}
    out = _C.call_any(info.name, *args, **kwargs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return tuple(outs), _flat_tensors(args + list(kwargs.values()), tensord.Tensor)


def run_torch(info, sample, device="cpu"):
    args = [to_torch(a, device) for a in sample.args]
    kwargs = {k: to_torch(v, device) for k, v in sample.kwargs.items()}
    ref = info.torch_ref(*args, **kwargs)
    refs = tuple(ref) if isinstance(ref, (tuple, list)) else (ref,)
    return refs, _flat_tensors(args + list(kwargs.values()), torch.Tensor)


def host(t):
    """Values of a tensord or torch tensor as NumPy (bfloat16 via float32)."""
    if torch is not None and isinstance(t, torch.Tensor):
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    return t.float().numpy() if t.dtype in (tensord.bfloat16,) else t.numpy()


def _low_precision(sample):
    """True when an input is float16, bfloat16 or float8 (the result carries its rounding)."""
    def low(a):
        if isinstance(a, Cast):
            return True
        if isinstance(a, Laid):
            return a.values.dtype == np.float16
        if isinstance(a, np.ndarray):
            return a.dtype == np.float16
        if isinstance(a, list):
            return any(low(e) for e in a)
        return False
    return any(low(a) for a in list(sample.args) + list(sample.kwargs.values()))


def tolerances(info, dtype_name, low_precision):
    if dtype_name == "bfloat16":
        # bfloat16's epsilon is 2**-7: results of sums of products of ~N(0, 1)
        # inputs that cancel carry an absolute error of about one ulp of the
        # terms (0.03 at magnitude 4; torch 1.13 itself is 0.017 off on one
        # baddbmm sample of this database).
        return max(info.rtol, 2e-2), max(info.atol, 3e-2)
    if low_precision or dtype_name in ("float16",):
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


def _entry(info):
    return _ENTRIES[info.name]


_ENTRIES = {e["full_name"]: e for e in _C.op_table()}


# ---------------------------------------------------------------- aliasing

def _alias_pattern(outs, inputs, same):
    """For each output, the positions of the inputs it shares storage with."""
    return [tuple(k for k, x in enumerate(inputs) if same(o, x)) for o in outs]


def _client_same(a, b):
    return _C._storage_id(a) == _C._storage_id(b)


def _torch_same(o, x):
    if o is x:
        return True
    if o.storage().data_ptr() != 0 and o.storage().data_ptr() == x.storage().data_ptr():
        return True
    base_o = o._base if o._is_view() else o
    base_x = x._base if x._is_view() else x
    return base_o is base_x


# ---------------------------------------------------------------- tests: values

def _torch_fails(request, info, sample):
    """True for a case meta_deviations.txt lists as one PyTorch 1.13 itself
    cannot run (checked: torch must still raise)."""
    case_id = request.node.callspec.id
    if DEVIATIONS.get(case_id, ("",))[0] != "torch-fails":
        return False
    with pytest.raises(Exception):
        run_torch(info, sample)
    return True


@pytest.mark.parametrize("info,sample,layout", CASES)
def test_op_matches_references(session, info, sample, layout, request):
    outs, _ = run_tensord(info, sample)
    if info.torch_ref is not None and not _torch_fails(request, info, sample):
        refs, _ = run_torch(info, sample)
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
            if info.name.startswith("rand") and not info.name.startswith(("randn", "randint")):
                v = o.numpy()
                assert np.all((v >= 0) & (v < 1)), "rand values must lie in [0, 1)"
            assert np.all(np.isfinite(o.numpy().astype(np.float64)))


# ---------------------------------------------------------------- tests: meta equals real

@pytest.mark.parametrize("info,sample,layout", CASES)
def test_predicted_meta_equals_daemon_meta(session, info, sample, layout):
    """The client's prediction (dtype, sizes, strides, storage_offset, and
    which inputs each output aliases) is what the daemon did."""
    outs, inputs = run_tensord(info, sample)
    for o in outs:
        assert _C._client_meta(o) == _C._daemon_meta(o)
    daemon_ids = {id(t): _C._daemon_storage_id(t) for t in list(outs) + inputs}
    predicted = _alias_pattern(outs, inputs, _client_same)
    actual = _alias_pattern(outs, inputs, lambda a, b: daemon_ids[id(a)] == daemon_ids[id(b)])
    assert predicted == actual, f"aliasing: client predicted {predicted}, daemon has {actual}"


def _meta_of(t):
    m = _C._client_meta(t)
    return m["sizes"], m["strides"], m["storage_offset"], m["dtype"]


def _run_meta(info, sample):
    """The call on meta inputs (or under device('meta') for factories)."""
    if _entry(info)["is_factory"]:
        with tensord.device("meta"):
            return run_tensord(info, sample)
    return run_tensord(info, sample, device="meta")


def _has_tensor_inputs(sample):
    return any(isinstance(a, (np.ndarray, Cast, Laid, list)) for a in list(sample.args) + list(sample.kwargs.values()))


@pytest.mark.parametrize("info,sample,layout", CASES)
def test_meta_mode_predicts_the_same(session, info, sample, layout):
    """The same call on meta copies of the inputs (same strides) gives the same
    metadata and aliasing with no daemon involved; data-dependent ops refuse."""
    entry = _entry(info)
    real, real_inputs = run_tensord(info, sample)
    before = session.stats()["ops_issued"]
    before_uploads = session.stats()["uploads"]
    if not entry["is_factory"] and not _has_tensor_inputs(sample):
        pytest.skip("no tensor inputs")
    try:
        meta, meta_inputs = _run_meta(info, sample)
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
    assert len(real) == len(meta)
    for r, m in zip(real, meta):
        assert m.is_meta
        if info.random or entry["is_factory"]:
            assert _meta_of(r)[0] == _meta_of(m)[0] and _meta_of(r)[3] == _meta_of(m)[3]
        else:
            assert _meta_of(r) == _meta_of(m)
    assert _alias_pattern(meta, meta_inputs, _client_same) == _alias_pattern(real, real_inputs, _client_same)


def _meta_outcome(info, sample):
    """What a call on meta gives: per output its metadata, requires_grad and
    whether it is one of the inputs (in-place), plus the aliasing pattern; or
    the exception's type and message."""
    try:
        outs, inputs = _run_meta(info, sample)
    except Exception as e:  # noqa: BLE001 - compared as raised
        return type(e), str(e)
    same_object = [tuple(k for k, x in enumerate(inputs) if o is x) for o in outs]
    return ([(_meta_of(o), o.requires_grad) for o in outs], same_object,
            _alias_pattern(outs, inputs, _client_same))


def test_meta_cache_changes_no_result():
    """Every sample (in every layout) and every error input gives on meta the
    same outputs, aliasing and errors with the meta cache off, on a first call
    with it on (a miss) and on the repeated call (answered from the cache)."""
    calls = [(c.values[0], c.values[1]) for c in CASES] + [(c.values[0], c.values[1].sample) for c in ERROR_CASES]
    try:
        _C._set_meta_cache_enabled(False)
        uncached = [_meta_outcome(info, sample) for info, sample in calls]
        _C._set_meta_cache_enabled(True)
        _C._clear_meta_cache()
        first = [_meta_outcome(info, sample) for info, sample in calls]
        hits = _C._meta_cache_info()["hits"]
        again = [_meta_outcome(info, sample) for info, sample in calls]
        assert _C._meta_cache_info()["hits"] > hits + len(CASES) // 2, "repeated calls should be answered from the cache"
    finally:
        _C._set_meta_cache_enabled(True)
    for (info, sample), u, f, a in zip(calls, uncached, first, again):
        assert f == u, f"{info.name}{sample!r}: first call with the cache {f} != uncached {u}"
        assert a == u, f"{info.name}{sample!r}: cached call {a} != uncached {u}"


# ---------------------------------------------------------------- tests: errors

def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares whatever was raised
        return e
    return None


@pytest.mark.parametrize("info,err", ERROR_CASES)
def test_error_inputs_raise_the_same_on_real_and_meta(session, info, err, request):
    """An error input raises the expected exception on the daemon (at the call
    or, for errors only the kernel can see, at the next sync) and, unless it
    depends on values, the same type and message on meta, where nothing runs."""
    def real():
        outs, _ = run_tensord(info, err.sample)
        for o in outs:
            o.numpy() if o.dtype is not tensord.bfloat16 else o.float().numpy()
    e_real = _raised(real)
    assert e_real is not None, f"{info.name}{err.sample!r} did not raise"
    assert isinstance(e_real, err.error), f"raised {type(e_real).__name__}: {e_real}"
    assert err.match in str(e_real), f"message {str(e_real)!r} lacks {err.match!r}"
    if not err.data_dependent:
        e_meta = _raised(lambda: _run_meta(info, err.sample))
        assert e_meta is not None, f"meta accepted what the daemon refused: {e_real}"
        assert type(e_meta) is type(e_real)
        assert str(e_meta) == str(e_real)
    # PyTorch refuses the call too, with the same exception type, unless
    # meta_deviations.txt says why tensord is stricter.
    if info.torch_ref is None:
        return
    case_id = request.node.callspec.id
    e_torch = _raised(lambda: run_torch(info, err.sample))
    agrees = e_torch is not None and isinstance(e_torch, type(e_real))
    if case_id in DEVIATIONS:
        assert DEVIATIONS[case_id][0] == "error"
        assert not agrees, f"{case_id} is listed in meta_deviations.txt but torch raises {e_torch!r} too: remove it"
    else:
        assert agrees, (f"{case_id}: tensord raises {type(e_real).__name__}, torch "
                        f"{'accepts the call' if e_torch is None else 'raises ' + repr(e_torch)}")


# ---------------------------------------------------------------- tests: tensord equals PyTorch

def _load_deviations():
    """{case id: (field, reason)} from meta_deviations.txt."""
    out = {}
    with open(DEVIATIONS_FILE) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|")]
            assert len(parts) == 3 and all(parts), f"{DEVIATIONS_FILE}:{n}: expected 'case id | field | reason'"
            assert parts[0] not in out, f"{DEVIATIONS_FILE}:{n}: {parts[0]} listed twice"
            out[parts[0]] = (parts[1], parts[2])
    return out


DEVIATIONS = _load_deviations()
# Fields of meta_deviations.txt; also "error" (an error input torch accepts)
# and "torch-fails" (a valid sample PyTorch 1.13 itself raises on).
FIELDS = ("dtype", "sizes", "strides", "storage_offset", "aliasing")


def _torch_metadata(info, sample):
    refs, inputs = run_torch(info, sample)
    return [{"dtype": str(r.dtype).replace("torch.", ""), "sizes": tuple(r.shape), "strides": tuple(r.stride()),
             "storage_offset": r.storage_offset()} for r in refs], _alias_pattern(refs, inputs, _torch_same)


def _tensord_metadata(info, sample):
    try:
        outs, inputs = _run_meta(info, sample)
    except NotImplementedError:   # data-dependent, or meta -> cpu: what the daemon does
        outs, inputs = run_tensord(info, sample)
    return [{"dtype": o.dtype._name, "sizes": tuple(o.shape), "strides": tuple(o.stride()),
             "storage_offset": o.storage_offset()} for o in outs], _alias_pattern(outs, inputs, _client_same)


def _differences(info, sample):
    ours, our_alias = _tensord_metadata(info, sample)
    theirs, their_alias = _torch_metadata(info, sample)
    assert len(ours) == len(theirs), f"{len(ours)} outputs, torch gives {len(theirs)}"
    diffs = {}
    for k, (o, t) in enumerate(zip(ours, theirs)):
        for f in FIELDS[:-1]:
            if o[f] != t[f]:
                diffs.setdefault(f, []).append(f"output {k}: tensord {o[f]}, torch {t[f]}")
    if our_alias != their_alias:
        diffs["aliasing"] = [f"tensord {our_alias}, torch {their_alias}"]
    return diffs


TORCH_META_CASES = [c for c in CASES if c.values[0].torch_ref is not None and c.values[0].torch_meta]


@pytest.mark.parametrize("info,sample,layout", TORCH_META_CASES)
def test_metadata_matches_pytorch(session, info, sample, layout, request):
    case_id = request.node.callspec.id
    if _torch_fails(request, info, sample):
        return
    diffs = _differences(info, sample)
    if case_id in DEVIATIONS:
        field, reason = DEVIATIONS[case_id]
        assert field in diffs, (f"{case_id} is listed in meta_deviations.txt ({field}: {reason}) but tensord now "
                                f"agrees with PyTorch on it: remove the line")
        assert set(diffs) == {field}, f"{case_id}: other fields differ too: {diffs}"
    else:
        assert not diffs, f"{case_id}: tensord differs from PyTorch 1.13: {diffs}"


def test_deviation_list_names_real_cases():
    ids = {c.id for c in TORCH_META_CASES} | {c.id for c in ERROR_CASES}
    unknown = sorted(set(DEVIATIONS) - ids)
    assert not unknown, f"meta_deviations.txt lists cases that do not exist: {unknown}"
    bad = sorted(k for k, (f, _) in DEVIATIONS.items() if f not in FIELDS + ("error", "torch-fails"))
    assert not bad, f"meta_deviations.txt: unknown field in {bad} (one of {FIELDS})"


# ---------------------------------------------------------------- the database itself

def test_opinfo_completeness():
    """Every op in the table has samples in the OpInfo database."""
    covered = {info.name for info in OPINFOS}
    missing = [e["full_name"] for e in _C.op_table() if e["full_name"] not in covered]
    assert not missing, f"ops without OpInfo samples (add them to tests/python/opinfo*.py): {missing}"
    unknown = covered - {e["full_name"] for e in _C.op_table()}
    assert not unknown, f"OpInfo entries for ops not in the table: {sorted(unknown)}"


def test_every_public_op_has_a_description():
    """Every op a user calls (not ``_``-prefixed) has its ``help()`` text in
    ``OP_DOCS`` (python-client/tensord/_ops.py), and no entry names an op the
    table lacks."""
    from tensord import _ops
    names = {e["name"] for e in _C.op_table()}
    missing = sorted(n for n in names if not n.startswith("_") and n not in _ops.OP_DOCS)
    assert not missing, f"ops without an OP_DOCS entry (add one to python-client/tensord/_ops.py): {missing}"
    unknown = sorted(set(_ops.OP_DOCS) - names)
    assert not unknown, f"OP_DOCS entries for ops not in the table: {unknown}"
    assert "of the op table" not in tensord.atan2.__doc__


def test_opinfo_samples_are_well_formed():
    for info, rng in _seeded("well-formed"):
        samples = info.samples(rng)
        assert samples, info.name
        assert all(isinstance(s, Sample) for s in samples), info.name


def test_every_layout_is_exercised():
    """Each layout of the module docstring changes the inputs of some sample."""
    seen = {c.values[2] for c in CASES}
    assert seen == set(LAYOUTS), f"layouts never applied: {set(LAYOUTS) - seen}"
