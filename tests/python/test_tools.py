"""Data-less metadata for tools: the factories linspace / randint /
empty_strided beyond the OpInfo database (values in range, strides against
torch 1.13, errors on real and meta), full's dtype inference, TensorMeta,
the descriptors (__dlpack_device__, __cuda_array_interface__,
__tensord_array_interface__), float8 storage and conversion, and every
dtype of the table on meta.
"""
import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

import tensord
from tensord import _C

from conftest import ROOT
from opinfo import D
from opinfo_factory import OPINFOS as FACTORY_OPINFOS

ALL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
              "float8_e4m3fn", "float8_e5m2"]


def _conv(x):
    return getattr(tensord, x.name) if isinstance(x, D) else x


def _torch_conv(x):
    return getattr(torch, x.name) if isinstance(x, D) else x


# ---------------------------------------------------------------- factories

ERROR_CASES = [(info.name, e) for info in FACTORY_OPINFOS for e in info.errors(np.random.default_rng(0))]


@pytest.mark.parametrize("name,err", ERROR_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERROR_CASES)])
def test_factory_errors_same_on_real_and_meta_and_torch(session, name, err):
    args = [_conv(a) for a in err.sample.args]
    kwargs = {k: _conv(v) for k, v in err.sample.kwargs.items()}
    with pytest.raises(err.error) as real:
        _C.call_any(name, *args, **kwargs)
        tensord.synchronize()
    assert err.match in str(real.value)
    with pytest.raises(err.error) as meta:
        _C.call_any(name, *args, device="meta", **kwargs)
    assert str(meta.value) == str(real.value)
    # torch 1.13 refuses the same call (where it has the op's overload).
    base = name.split(".")[0]
    with pytest.raises(Exception):
        getattr(torch, base)(*[_torch_conv(a) for a in err.sample.args],
                             **{k: _torch_conv(v) for k, v in err.sample.kwargs.items()})


def test_randint_python_forms_dtypes_and_range(session):
    tensord.manual_seed(7)
    a = tensord.randint(5, (200,))
    assert a.dtype == tensord.int64 and tuple(a.shape) == (200,)
    v = a.numpy()
    assert v.min() >= 0 and v.max() < 5 and len(set(v.tolist())) == 5
    b = tensord.randint(-3, 3, (4, 50), dtype=tensord.int8)
    assert b.dtype == tensord.int8 and b.stride() == (50, 1)
    assert b.numpy().min() >= -3 and b.numpy().max() < 3
    c = tensord.randint(low=10, high=12, size=(30,), dtype=tensord.float32)
    assert set(c.numpy().tolist()) <= {10.0, 11.0}
    d = tensord.randint(high=2, size=(40,), dtype=tensord.bool)
    assert d.dtype == tensord.bool and set(d.numpy().tolist()) == {False, True}
    e = tensord.randint(-(2 ** 63), 2 ** 63 - 1, (50,))
    assert e.numpy().min() < 0 < e.numpy().max()
    tensord.manual_seed(7)
    assert tensord.randint(5, (200,)).tolist() == v.tolist(), "a seed repeats the draws"
    m = tensord.randint(3, (2, 5), device="meta")
    assert m.is_meta and m.dtype == tensord.int64 and m.stride() == (5, 1)


def test_randint_requires_grad_refused_like_torch(session):
    with pytest.raises(RuntimeError):
        tensord.randint(3, (2,), requires_grad=True)


EMPTY_STRIDED = [((2, 3), (1, 2)), ((2, 3), (0, 0)), ((2, 0), (5, 7)), ((), ()), ((2, 3), (10, 2)),
                 ((1, 3, 1), (7, 1, 9)), ((4, 1, 2, 2), (1, 0, 8, 4))]


@pytest.mark.parametrize("size,stride", EMPTY_STRIDED)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_empty_strided_gives_exactly_the_strides(session, size, stride, device):
    t = tensord.empty_strided(size, stride, dtype=tensord.float64, device=device)
    ref = torch.empty_strided(size, stride, dtype=torch.float64)
    assert tuple(t.shape) == tuple(ref.shape) and t.stride() == ref.stride()
    assert t.storage_offset() == 0 and t.dtype == tensord.float64 and str(t.device) == device
    if device == "cpu":
        assert _C._daemon_meta(t) == _C._client_meta(t)
        assert np.all(t.numpy() == 0)          # fresh storage is zero-filled
        # the daemon allocated 1 + sum((size-1)*stride) elements: a view reaching the last one works
        n = ref.storage().size()
        if n:
            flat = t.as_strided((n,), (1,)) if hasattr(t, "as_strided") else None
            if flat is not None:
                assert tuple(flat.shape) == (n,)


def test_full_infers_dtype_like_torch_113(session):
    for value in (True, 3, -2, 2.5, float("inf")):
        for device in ("cpu", "meta"):
            t = tensord.full((2, 3), value, device=device)
            assert t.dtype._name == str(torch.full((2, 3), value).dtype).replace("torch.", ""), (value, device)
    x = tensord.zeros(3, dtype=tensord.int32)
    assert tensord.full_like(x, 3.7).dtype == tensord.int32
    assert tensord.full_like(x, 3.7).tolist() == torch.full_like(torch.zeros(3, dtype=torch.int32), 3.7).tolist()
    assert tensord.full_like(tensord.zeros(2), True).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="value cannot be converted to type uint8_t without overflow"):
        tensord.full((2,), 300, dtype=tensord.uint8)


def test_linspace_large_and_integer_rules(session):
    t = tensord.linspace(-1.7, 10.3, 7, dtype=tensord.int32)
    assert t.tolist() == torch.linspace(-1.7, 10.3, 7, dtype=torch.int32).tolist()
    big = tensord.linspace(0, 1, 1001, dtype=tensord.float64)
    np.testing.assert_allclose(big.numpy(), np.linspace(0, 1, 1001), rtol=0, atol=1e-15)
    assert big.numpy()[-1] == 1.0 and big.numpy()[0] == 0.0
    assert tensord.linspace(0, 10, 5, device="meta").dtype == tensord.float32


# ---------------------------------------------------------------- TensorMeta

def test_tensor_meta_value_semantics():
    m = tensord.TensorMeta((2, 3), dtype=tensord.bfloat16)
    assert m.shape == (2, 3) and m.stride() == (3, 1) and m.storage_offset() == 0
    assert m.dtype is tensord.bfloat16 and str(m.device) == "meta"
    assert m.numel() == 6 and m.nbytes == 12 and m.itemsize == 2 and m.is_contiguous() and m.ndim == 2
    assert m.size(-1) == 3 and m.stride(0) == 3
    same = tensord.TensorMeta([2, 3], dtype="bfloat16", strides=[3, 1])
    assert m == same and hash(m) == hash(same) and len({m, same}) == 1
    assert m != tensord.TensorMeta((2, 3), dtype=tensord.float32)
    assert m != tensord.TensorMeta((2, 3), dtype=tensord.bfloat16, device="cpu")
    assert repr(m) == ("TensorMeta(shape=(2, 3), strides=(3, 1), storage_offset=0, dtype=tensord.bfloat16, "
                       "device='meta')")
    assert pickle.loads(pickle.dumps(m)) == m
    with pytest.raises(AttributeError):
        m._shape = (1,)
    z = tensord.TensorMeta((2, 0, 3))
    assert z.stride() == (3, 3, 1) and z.numel() == 0 and z.storage_nbytes == 0
    assert tensord.TensorMeta(()).stride() == () and tensord.TensorMeta(()).numel() == 1


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "expanded", "size1", "offset"])
def test_tensor_meta_of_and_to_tensor_round_trip(layout):
    base = tensord.empty(4, 6, 5, device="meta")
    tb = torch.empty(4, 6, 5, device="meta")
    t, r = {
        "contiguous": (base, tb),
        "transposed": (base.transpose(0, 2), tb.transpose(0, 2)),
        "sliced": (base[1:, ::2, 1:4], tb[1:, ::2, 1:4]),
        "expanded": (base[:, :1].expand(4, 3, 5), tb[:, :1].expand(4, 3, 5)),
        "size1": (base[:, 2:3, :], tb[:, 2:3, :]),
        "offset": (base[2, 1:], tb[2, 1:]),
    }[layout]
    m = tensord.TensorMeta.of(t)
    assert m.shape == tuple(r.shape) and m.stride() == r.stride() and m.storage_offset() == r.storage_offset()
    assert m.is_contiguous() == r.is_contiguous() and m.nbytes == r.numel() * r.element_size()
    back = m.to_tensor()
    assert back.is_meta and tensord.TensorMeta.of(back) == m


def test_tensor_meta_to_tensor_matches_empty_strided_and_dict_round_trip():
    m = tensord.TensorMeta((2, 3), dtype=tensord.float8_e4m3fn, strides=(1, 2))
    t = m.to_tensor()
    assert t.stride() == (1, 2) and t.dtype == tensord.float8_e4m3fn and t.is_meta
    e = tensord.empty_strided((2, 3), (1, 2), dtype=tensord.float8_e4m3fn, device="meta")
    assert tensord.TensorMeta.of(e) == m
    d = m.to_dict()
    assert d == {"shape": (2, 3), "strides": (1, 2), "storage_offset": 0, "dtype": "float8_e4m3fn", "itemsize": 1,
                 "device": "meta", "typestr": None, "version": 1}
    assert tensord.TensorMeta.from_dict(d) == m
    # the __cuda_array_interface__ form tensord exports reads back too (strides in bytes, offset in data)
    t = tensord.empty_strided((3, 4), (1, 3), dtype=tensord.float64, device="meta")[1:]
    assert tensord.TensorMeta.from_dict(t.__cuda_array_interface__) == tensord.TensorMeta.of(t)
    c = tensord.empty(2, 5, dtype=tensord.int32, device="meta")
    assert tensord.TensorMeta.from_dict(c.__cuda_array_interface__) == tensord.TensorMeta.of(c)
    with pytest.raises(KeyError, match="neither 'dtype'"):
        tensord.TensorMeta.from_dict({"shape": (2,)})


def test_tensor_meta_validation():
    with pytest.raises(RuntimeError, match=r"negative dimension -1: \[2, -1\]"):
        tensord.TensorMeta((2, -1))
    with pytest.raises(RuntimeError, match=r"dimensionality of sizes \(2\) must match dimensionality of strides \(1\)"):
        tensord.TensorMeta((2, 3), strides=(1,))
    with pytest.raises(RuntimeError, match="negative strides"):
        tensord.TensorMeta((2, 3), strides=(1, -1))
    with pytest.raises(RuntimeError, match="storage_offset must be non-negative"):
        tensord.TensorMeta((2,), storage_offset=-1)
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        tensord.TensorMeta((2 ** 40, 2 ** 40), strides=(2 ** 40, 1))
    with pytest.raises(RuntimeError, match="more than 64 dimensions"):
        tensord.TensorMeta((1,) * 65)
    with pytest.raises(TypeError):
        tensord.TensorMeta((2, 3.5))
    with pytest.raises(TypeError):
        tensord.TensorMeta((2,), dtype="float128")
    with pytest.raises(TypeError):
        tensord.TensorMeta((2,), dtype=np.float32)
    with pytest.raises(RuntimeError):
        tensord.TensorMeta((2,), device="tpu")


# (shape, strides or None, storage_offset): contiguous, 0-dim, size-0 and
# size-1 dims (a size-1 dim's stride is ignored by is_contiguous), transposed,
# expanded (stride 0), gaps between rows, and an offset.
TENSOR_META_LAYOUTS = [
    ((2, 3), None, 0),
    ((), None, 0),
    ((0,), None, 0),
    ((2, 0, 3), None, 0),
    ((1, 4, 1), None, 0),
    ((2, 1, 3), (3, 99, 1), 0),
    ((3, 1, 2), (1, 7, 3), 0),
    ((2, 3), (1, 2), 0),
    ((4, 5), (0, 1), 0),
    ((2, 3), (6, 2), 0),
    ((2, 0, 3), (0, 5, 1), 0),
    ((1,), (5,), 0),
    ((2, 3), None, 7),
]


@pytest.mark.parametrize("shape,strides,offset", TENSOR_META_LAYOUTS, ids=[str(c) for c in TENSOR_META_LAYOUTS])
def test_tensor_meta_layout_matches_a_meta_tensor(shape, strides, offset):
    m = tensord.TensorMeta(shape, dtype=tensord.float32, strides=strides, storage_offset=offset)
    n = 1
    for s in shape:
        n *= s
    # The same layout made on meta by the factories and a view, not by TensorMeta
    # (no to_tensor), and by torch 1.13 on its meta device (storage sizes).
    if offset:
        t = tensord.empty(offset + n, device="meta")[offset:].view(*shape)
        r = torch.empty(offset + n, device="meta")[offset:].view(*shape)
    elif strides is None:
        t = tensord.empty(shape, device="meta")
        r = torch.empty(shape, device="meta")
    else:
        t = tensord.empty_strided(shape, strides, device="meta")
        r = torch.empty_strided(shape, strides, device="meta")
    assert m.shape == t.shape and m.stride() == t.stride() == r.stride()
    assert m.storage_offset() == t.storage_offset() == r.storage_offset()
    assert m.is_contiguous() == t.is_contiguous() == r.is_contiguous()
    assert m.numel() == t.numel() == r.numel() and m.nbytes == t.nbytes
    assert m.storage_nbytes == r.storage().nbytes()
    assert m == tensord.TensorMeta.of(t)


def test_tensor_meta_storage_size_overflowing_int64_raises():
    # The largest storage int64 bytes can count fits; one more byte does not.
    assert tensord.TensorMeta((2 ** 63 - 1,), dtype=tensord.uint8).storage_nbytes == 2 ** 63 - 1
    with pytest.raises(RuntimeError, match=r"TensorMeta: Storage size calculation overflowed with "
                                           r"sizes=\[9223372036854775807\] and strides=\[1\] \(storage_offset 1\)"):
        tensord.TensorMeta((2 ** 63 - 1,), dtype=tensord.uint8, storage_offset=1)
    with pytest.raises(RuntimeError, match="TensorMeta: Storage size calculation overflowed"):
        tensord.TensorMeta((2 ** 61,), dtype=tensord.float32)
    with pytest.raises(RuntimeError, match="TensorMeta: Storage size calculation overflowed"):
        tensord.TensorMeta((2 ** 62, 2), strides=(2, 1), dtype=tensord.uint8)
    # Stride-0 dims address 4 bytes, but 2**64 elements cannot be counted:
    # refused as empty_strided on meta refuses it.
    with pytest.raises(RuntimeError, match="TensorMeta: Storage size calculation overflowed"):
        tensord.TensorMeta((2 ** 32, 2 ** 32), strides=(0, 0))
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        tensord.empty_strided((2 ** 32, 2 ** 32), (0, 0), device="meta")
    with pytest.raises(RuntimeError, match="TensorMeta: shape value 36893488147419103232 does not fit in int64"):
        tensord.TensorMeta((2 ** 65,))


def test_tensor_meta_needs_no_session(tmp_path):
    code = ("import tensord\n"
            "m = tensord.TensorMeta((2, 0, 3), dtype='bfloat16', device='cuda:1')\n"
            "v = tensord.TensorMeta((2, 3), strides=(1, 2), storage_offset=4, device='cpu')\n"
            "print(m.stride(), m.storage_nbytes, v.storage_nbytes, v.is_contiguous(), v.to_dict()['strides'])\n"
            "print(tensord.TensorMeta((2, 3)).to_tensor().shape)\n"
            "print(tensord._C.current_session_if_any())\n")
    env = dict(os.environ, TENSORD_NO_DAEMON="1", TENSORD_BIN=str(tmp_path / "no-daemon-here"),
               PYTHONPATH=os.path.join(ROOT, "python-client"))
    env.pop("TENSORD_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["(3, 3, 1) 0 40 False (1, 2)", "tensord.Size([2, 3])", "None"], proc.stdout


# ---------------------------------------------------------------- descriptors

def test_dlpack_device(session):
    t = tensord.zeros(2)
    assert t.__dlpack_device__() == (1, 0) == torch.zeros(2).__dlpack_device__()
    assert t.__dlpack_device__()[0] is tensord.DLDeviceType.kDLCPU
    m = tensord.zeros(2, device="meta")
    with pytest.raises(ValueError, match="Unknown device type meta for Dlpack"):
        m.__dlpack_device__()
    with pytest.raises(ValueError, match="Unknown device type meta for Dlpack"):
        torch.zeros(2, device="meta").__dlpack_device__()


def test_tensormeta_of_refuses_non_tensors():
    with pytest.raises(TypeError, match="expects a tensord.Tensor"):
        tensord.TensorMeta.of([1, 2])


def test_cuda_array_interface_for_meta_tensors_only(session):
    m = tensord.empty(3, 4, device="meta")
    assert m.__cuda_array_interface__ == {"shape": (3, 4), "typestr": "<f4", "strides": None, "data": (0, True),
                                          "version": 3}
    t = m.transpose(0, 1)[:, 1:]
    cai = t.__cuda_array_interface__
    assert cai["shape"] == (4, 2) and cai["strides"] == (4, 16) and cai["typestr"] == "<f4"
    assert cai["data"] == (4 * 4, True)       # storage_offset 4 elements: the view keeps its offset
    assert tensord.empty(2, dtype=tensord.int64, device="meta").__cuda_array_interface__["typestr"] == "<i8"
    assert tensord.empty(2, dtype=tensord.bool, device="meta").__cuda_array_interface__["typestr"] == "|b1"
    # cpu tensors: AttributeError as torch ("non-CUDA tensor"), so hasattr() is False
    cpu = tensord.zeros(2)
    assert not hasattr(cpu, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="only meta tensors"):
        cpu.__cuda_array_interface__
    assert not hasattr(torch.zeros(2), "__cuda_array_interface__")
    # no typestr for bfloat16/float8: AttributeError naming the alternative
    with pytest.raises(AttributeError, match="__tensord_array_interface__"):
        tensord.empty(2, dtype=tensord.bfloat16, device="meta").__cuda_array_interface__


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_tensord_array_interface_names_every_dtype(name):
    t = tensord.empty(2, 3, dtype=getattr(tensord, name), device="meta").t()
    d = t.__tensord_array_interface__
    assert d["dtype"] == name and d["shape"] == (3, 2) and d["strides"] == (1, 3) and d["device"] == "meta"
    assert d["itemsize"] == getattr(tensord, name).itemsize and d["storage_offset"] == 0
    assert (d["typestr"] is None) == (name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"))


# ---------------------------------------------------------------- float8

E4M3 = [(0.0, 0.0), (1.0, 1.0), (0.1, 0.1015625), (-3.3, -3.25), (17.0, 16.0), (19.0, 20.0), (448.0, 448.0),
        (464.0, 448.0), (470.0, math.nan), (1e4, math.nan), (math.inf, math.nan), (-math.inf, math.nan),
        (math.nan, math.nan), (2.0 ** -9, 2.0 ** -9), (2.0 ** -11, 0.0), (0.0029296875, 0.00390625)]
E5M2 = [(0.3, 0.3125), (57344.0, 57344.0), (60000.0, 57344.0), (61440.0, math.inf), (1e6, math.inf),
        (-1e6, -math.inf), (math.inf, math.inf), (math.nan, math.nan), (2.0 ** -16, 2.0 ** -16),
        (2.0 ** -18, 0.0), (-5.0, -5.0), (5.5, 6.0)]


@pytest.mark.parametrize("name,table", [("float8_e4m3fn", E4M3), ("float8_e5m2", E5M2)])
def test_float8_round_trip_rounds_to_nearest_even(session, name, table):
    src = np.array([a for a, _ in table], dtype=np.float32)
    want = np.array([b for _, b in table], dtype=np.float32)
    f8 = tensord.from_numpy(src).to(getattr(tensord, name))
    assert f8.dtype._name == name and f8.element_size() == 1
    back = f8.to(tensord.float32).numpy()
    np.testing.assert_array_equal(back, want)
    # float64 and float16 targets agree, and the metadata matches meta mode
    np.testing.assert_array_equal(f8.double().numpy(), want.astype(np.float64))
    assert _C._daemon_meta(f8) == _C._client_meta(f8)


def test_float8_tensors_print_refuse_numpy_and_promotion(session):
    t = tensord.tensor([1.0, 2.5, -448.0]).to(tensord.float8_e4m3fn)
    text = repr(t)
    assert "dtype=tensord.float8_e4m3fn" in text and "2.5" in text
    with pytest.raises(TypeError, match="NumPy has no float8_e4m3fn"):
        t.numpy()
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported, attempted to promote "
                                           "Float8_e4m3fn and Float"):
        t + tensord.ones(3)
    m = tensord.empty(3, dtype=tensord.float8_e5m2, device="meta")
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported, attempted to promote "
                                           "Float8_e5m2 and Float8_e4m3fn"):
        m + tensord.empty(3, dtype=tensord.float8_e4m3fn, device="meta")
    assert t.to(tensord.float8_e5m2).float().tolist() == [1.0, 2.5, -448.0]


# ---------------------------------------------------------------- every dtype on meta

def _meta_and_real(fn):
    """Runs fn(device) on cpu and meta; returns the two results or the two errors."""
    out = []
    for device in ("cpu", "meta"):
        try:
            r = fn(device)
            out.append(("ok", _C._client_meta(r)))
        except Exception as e:  # noqa: BLE001 (compared below)
            out.append((type(e).__name__, str(e)))
    return out


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_every_dtype_on_meta_agrees_with_real(session, name):
    dt = getattr(tensord, name)

    def make(device):
        return tensord.zeros(2, 3, 4, dtype=dt, device=device)

    cases = {
        "empty_strided": lambda d: tensord.empty_strided((2, 3), (1, 2), dtype=dt, device=d),
        "full": lambda d: tensord.full((2, 2), 1, dtype=dt, device=d),
        "transpose": lambda d: make(d).transpose(0, 2),
        "slice": lambda d: make(d)[:, ::2, 1:],
        "expand": lambda d: make(d)[:, :1].expand(2, 5, 4),
        "reshape": lambda d: make(d).transpose(0, 1).reshape(6, 4),
        "contiguous": lambda d: make(d).permute(2, 0, 1).contiguous(),
        "to_float32": lambda d: make(d).to(tensord.float32),
        "from_float32": lambda d: tensord.zeros(3, device=d).to(dt),
        "add": lambda d: make(d) + make(d),
        "mul": lambda d: make(d).transpose(0, 1) * make(d).transpose(0, 1),
        "neg": lambda d: -make(d),
        "sum": lambda d: make(d).sum(1),
        "cat": lambda d: tensord.cat([make(d), make(d)], 1),
        "clone": lambda d: make(d).clone(),
    }
    for case, fn in cases.items():
        real, meta = _meta_and_real(fn)
        if meta[0] != "ok":
            assert meta[1].split(": ", 1)[-1].split("\n")[0] in real[1] or real[0] == meta[0], (case, real, meta)
        assert real[0] == meta[0], (case, real, meta)
        if real[0] == "ok":
            r, m = dict(real[1]), dict(meta[1])
            r.pop("device"), m.pop("device")
            assert r == m, (case, r, m)
        else:
            assert real[1] == meta[1], (case, real, meta)
    # storage/conversions work for every dtype
    assert tensord.empty(2, dtype=dt, device="meta").dtype is dt


def test_tensor_meta_to_tensor_on_cpu_allocates_that_layout(session):
    for m in (tensord.TensorMeta((2, 3), dtype=tensord.int16, strides=(1, 2), device="cpu"),
              tensord.TensorMeta((2, 3), strides=(1, 4), storage_offset=5, device="cpu")):
        t = m.to_tensor()
        assert not t.is_meta and tensord.TensorMeta.of(t) == m
        assert _C._daemon_meta(t) == _C._client_meta(t)
        assert t.tolist() == [[0, 0, 0], [0, 0, 0]]
