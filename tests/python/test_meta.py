"""Meta mode, as the TensorPlay meta-device page describes it (and stricter):
shapes, strides and dtypes without data and without any daemon."""
import os
import subprocess
import sys

import pytest

import tensord
from conftest import subprocess_env


def test_factory_on_meta():
    m = tensord.zeros(3, 4, device="meta")
    assert m.shape == (3, 4)
    assert isinstance(m.shape, tensord.Size)
    assert m.numel() == 12
    assert m.is_meta
    assert m.device == tensord.device("meta")
    assert str(m.device) == "meta"
    assert m.stride() == (4, 1)
    assert m.dtype is tensord.float32


def test_device_context_redirects_factories():
    with tensord.device("meta"):
        t = tensord.randn(30, 30)
        u = tensord.arange(5)
        v = tensord.tensor([[1, 2], [3, 4]])
    assert t.is_meta and u.is_meta and v.is_meta
    assert str(t.device) == "meta"
    assert u.dtype is tensord.int64 and v.dtype is tensord.int64 and v.shape == (2, 2)
    # Outside the context factories are real again (not created here: that
    # would start a daemon); the innermost context wins.
    with tensord.device("meta"):
        with tensord.device("cpu"):
            assert tensord._C.default_device() == "cpu"
        assert tensord._C.default_device() == "meta"
    assert tensord._C.default_device() is None


def test_shape_only_operations():
    with tensord.device("meta"):
        x = tensord.randn(8, 4)
        w = tensord.randn(2, 4)
    assert (x + 1).shape == (8, 4)
    assert (x @ w.T).shape == (8, 2)
    assert x.sum(dim=0).shape == (4,)
    assert x.T.stride() == (1, 4)
    assert (x.T + 1).stride() == (1, 4)   # elementwise outputs keep the input's permutation
    assert x[1:, ::2].stride() == (4, 2) and x[1:, ::2].storage_offset() == 4
    assert x.reshape(2, 16).shape == (2, 16)
    assert x.unsqueeze(0).shape == (1, 8, 4)
    assert tensord.stack([x, x]).shape == (2, 8, 4)
    assert tensord.cat([x, x], 1).shape == (8, 8)
    assert x.max(dim=1).indices.dtype is tensord.int64
    assert x.topk(2).values.shape == (8, 2)


def test_like_factories_stay_on_meta():
    m = tensord.zeros(3, 4, device="meta").T
    for f in (tensord.zeros_like, tensord.empty_like, tensord.ones_like, tensord.randn_like):
        r = f(m)
        assert r.is_meta and r.shape == (4, 3)
        assert r.stride() == (1, 4)   # preserve_format


def test_attention_idiom():
    def infer_shapes(seq_len, d_model, n_heads):
        with tensord.device("meta"):
            x = tensord.randn(seq_len, d_model)
            qkv = x @ tensord.randn(d_model, 3 * d_model)
            head_dim = d_model // n_heads
            q = qkv[:, :d_model].reshape(seq_len, n_heads, head_dim)
            k = qkv[:, d_model:2 * d_model].reshape(seq_len, n_heads, head_dim)
            return q.transpose(0, 1).shape, k.transpose(0, 1).shape

    shapes = infer_shapes(128, 512, 8)
    assert shapes == (tensord.Size([8, 128, 64]), tensord.Size([8, 128, 64]))
    assert repr(shapes[0]) == "tensord.Size([8, 128, 64])"


@pytest.mark.parametrize("call,op", [
    (lambda m: m.nonzero(), "nonzero"),
    (lambda m: tensord.nonzero(m), "nonzero"),
    (lambda m: m.item(), "item"),
    (lambda m: m[m > 0], "masked_select"),
    (lambda m: m.masked_select(m > 0), "masked_select"),
    (lambda m: m[(m > 0)[:, 0]], "nonzero"),
])
def test_data_dependent_ops_raise_not_implemented(call, op):
    m = tensord.zeros(3, 4, device="meta")
    with pytest.raises(NotImplementedError) as e:
        call(m)
    msg = str(e.value)
    assert op in msg
    assert "depends on" in msg and "data" in msg
    assert "Kernel not found" not in msg


def test_to_cpu_suggests_empty_like():
    m = tensord.zeros(3, 4, device="meta")
    with pytest.raises(NotImplementedError) as e:
        m.to("cpu")
    assert 'empty_like(t, device="cpu")' in str(e.value)
    with pytest.raises(NotImplementedError):
        m.cpu()
    with pytest.raises(NotImplementedError):
        m.numpy()
    with pytest.raises(NotImplementedError):
        m.tolist()
    with pytest.raises(NotImplementedError):
        bool(m.sum())


def test_meta_repr():
    assert repr(tensord.zeros(3, 4, device="meta")) == "tensor(..., device='meta', size=(3, 4))"
    assert repr(tensord.arange(3, device="meta")) == "tensor(..., device='meta', size=(3,), dtype=tensord.int64)"
    assert repr(tensord.ones([], device="meta")) == "tensor(..., device='meta', size=())"


def test_errors_at_the_call_site_on_meta():
    a = tensord.randn(8, 4, device="meta")
    b = tensord.randn(3, 2, device="meta")
    with pytest.raises(RuntimeError, match=r"matmul: size mismatch, self is \[8, 4\], other is \[3, 2\] \(4 != 3\)"):
        a @ b
    with pytest.raises(RuntimeError, match="must match the size"):
        a + tensord.randn(3, device="meta")
    with pytest.raises(IndexError, match="Dimension out of range"):
        a.sum(5)
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        a[0, 0, 0]
    with pytest.raises(IndexError):
        a[8]
    with pytest.raises(RuntimeError, match="view"):
        a.T.view(32)
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        tensord.add(a, "x")
    with pytest.raises(TypeError):
        a.sum(keepdim=3)
    with pytest.raises(RuntimeError):
        tensord.zeros(-1, device="meta")


def test_float8_does_not_promote():
    a = tensord.zeros(2, device="meta", dtype=tensord.float8_e4m3fn)
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        a + tensord.zeros(2, device="meta")


def test_importing_starts_no_daemon_and_meta_needs_none():
    """A fresh interpreter: import, run meta ops and the example's idiom; no
    session, no child process, no TENSORD_ADDRESS."""
    code = r"""
import os, tensord
with tensord.device("meta"):
    x = tensord.randn(128, 512)
    y = (x @ tensord.randn(512, 64)).sum(0)
assert y.shape == (64,)
assert tensord.default_session() is None
children = []
for task in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{task}/children") as f:
        children += f.read().split()
assert not children, children
print("ok", tensord.stats()["meta_ops"])
"""
    env = subprocess_env()
    env.pop("TENSORD_ADDRESS", None)
    env["TENSORD_BIN"] = "/nonexistent/tensord"   # spawning would fail loudly
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")


def test_dtypes_and_devices():
    assert repr(tensord.float32) == "tensord.float32"
    assert tensord.float is tensord.float32 and tensord.long is tensord.int64 and tensord.double is tensord.float64
    assert tensord.half is tensord.float16 and tensord.int is tensord.int32 and tensord.short is tensord.int16
    assert tensord.bfloat16.itemsize == 2 and tensord.float8_e4m3fn.itemsize == 1
    assert tensord.float32.is_floating_point and not tensord.int64.is_floating_point
    assert tensord.bool.itemsize == 1 and not tensord.bool.is_signed
    assert repr(tensord.device("cpu")) == "device(type='cpu')"
    assert repr(tensord.device("cuda", 1)) == "device(type='cuda', index=1)"
    assert str(tensord.device("cuda:1")) == "cuda:1"
    assert tensord.device("meta") == "meta"
    with pytest.raises(RuntimeError):
        tensord.device("tpu")
    with pytest.raises(TypeError):
        tensord.dtype()
    s = tensord.Size([8, 128, 64])
    assert repr(s) == "tensord.Size([8, 128, 64])" and s.numel() == 8 * 128 * 64
    assert isinstance(s[1:], tensord.Size) and s == (8, 128, 64)


def test_tensor_properties_on_meta():
    t = tensord.empty(2, 3, 4, device="meta", dtype=tensord.int16)
    assert t.size() == (2, 3, 4) and t.size(-1) == 4 and t.ndim == 3 and t.dim() == 3
    assert t.stride(0) == 12 and t.storage_offset() == 0 and t.is_contiguous()
    assert t.itemsize == 2 and t.element_size() == 2 and t.nbytes == 48
    assert len(t) == 2 and [s.shape for s in t] == [(3, 4), (3, 4)]
    assert t.float().dtype is tensord.float32 and t.long().dtype is tensord.int64 and t.bool().dtype is tensord.bool
    assert t.permute(2, 0, 1).stride() == (1, 12, 4)
    assert t.view(6, 4).shape == (6, 4) and t.view((6, 4)).shape == (6, 4)
    assert t.expand(5, 2, 3, 4).stride() == (0, 12, 4, 1)
    with pytest.raises(IndexError):
        t.size(3)
    with pytest.raises(TypeError, match="0-d"):
        len(tensord.zeros([], device="meta"))


def test_real_to_meta_is_local(session):
    x = tensord.ones(2, 3)
    before = tensord.stats()["ops_issued"]
    m = x.to("meta")
    assert m.is_meta and m.shape == (2, 3)
    assert tensord.stats()["ops_issued"] == before
    assert tensord.empty_like(m, device="cpu").device == tensord.device("cpu")


def test_meta_cache_repeats_are_exact_and_fresh():
    """A repeated meta call is answered from the per-thread meta cache: a new
    tensor with the same metadata each time, with autograd applied per call
    (requires_grad, grad_fn, grad mode, in-place on a leaf) and `x.add_(1) is x`."""
    C = tensord._C
    C._clear_meta_cache()
    x = tensord.empty(4, 6, device="meta")
    before = C._meta_cache_info()
    a, b = x.t(), x.t()
    info = C._meta_cache_info()
    assert info["enabled"] and info["hits"] - before["hits"] == 1 and info["misses"] - before["misses"] == 1
    assert 1 <= info["size"] <= info["capacity"]
    assert a is not b and a.stride() == b.stride() == (1, 6) and a.shape == (6, 4)
    assert C._storage_id(b) == C._storage_id(x)
    c, d = x + 1, x + 1
    assert C._storage_id(c) != C._storage_id(d)
    plain = x * 2
    assert not plain.requires_grad and plain.grad_fn is None
    w = tensord.empty(4, 6, device="meta", requires_grad=True)
    y = w * 2  # same metadata as x * 2: a hit
    assert y.requires_grad and y.grad_fn.name() == "MulBackward0"
    with tensord.no_grad():
        assert not (w * 2).requires_grad
    assert x.add_(1) is x and x.add_(1) is x
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w.add_(1)
    # A different layout or scalar type is another entry, never a wrong hit.
    assert (x.t() + 1).stride() == (1, 6)
    xi = tensord.empty(4, 6, dtype=tensord.int32, device="meta")
    assert (xi + 1).dtype is tensord.int32 and (xi + 1.5).dtype is tensord.float32
    with pytest.raises(RuntimeError, match="size mismatch"):
        x @ x
    size = C._meta_cache_info()["size"]
    with pytest.raises(RuntimeError, match="size mismatch"):
        x @ x
    assert C._meta_cache_info()["size"] == size  # errors are not cached
    C._set_meta_cache_enabled(False)
    try:
        hits = C._meta_cache_info()["hits"]
        assert x.t().stride() == (1, 6)
        assert C._meta_cache_info()["hits"] == hits
    finally:
        C._set_meta_cache_enabled(True)
