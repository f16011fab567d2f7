"""Autograd semantics from Python: the client's local flags (meta mode, no
daemon), grad mode, in-place rules, backward/grad through the daemon's engine,
double backward, the version-counter error, .grad caching, and user-defined
Functions (the TensorPlay extension page's Exp and Mul, mark_non_differentiable,
mark_dirty, set_materialize_grads, needs_input_grad, a Python backward inside a
graph of daemon ops). Values are compared with NumPy and, where torch is
importable, with PyTorch.
"""
import inspect
import os
import threading

import numpy as np
import pytest

import tensord
from tensord.autograd import Function, gradcheck, gradgradcheck

try:
    import torch
except ImportError:  # pragma: no cover - python3-torch is in the dev image
    torch = None


def f64(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(arr):
    return tensord.from_numpy(np.asarray(arr, dtype=np.float64)).requires_grad_()


# ================================================================ meta mode (no daemon)

class TestMetaFlags:
    def test_leaf_and_op_outputs(self):
        with tensord.device("meta"):
            x = tensord.randn(3, 4, requires_grad=True)
            w = tensord.randn(4, 2)
            assert x.requires_grad and x.is_leaf and x.grad_fn is None
            assert not w.requires_grad and w.is_leaf
            y = x @ w
            assert y.requires_grad and not y.is_leaf
            assert y.grad_fn.name() == "MatmulBackward0"
            assert repr(y.grad_fn).startswith("<MatmulBackward0 object at 0x")
            (acc, nr), (none, nr2) = y.grad_fn.next_functions
            assert acc.name() == "AccumulateGrad" and nr == 0
            assert acc.variable._impl_id == x._impl_id
            assert none is None and nr2 == 0
            assert y.grad_fn is y.grad_fn
            z = (y + 1).sum()
            assert z.grad_fn.name() == "SumBackward0"
            assert z.grad_fn.next_functions[0][0].name() == "AddBackward0"

    def test_integer_outputs_and_nondifferentiable_ops(self):
        with tensord.device("meta"):
            x = tensord.randn(3, 4, requires_grad=True)
            assert not x.argmax().requires_grad
            m = x.max(1)
            assert m.values.requires_grad and not m.indices.requires_grad
            assert m.values.grad_fn.name() == "MaxBackward0"
            assert not (x > 0).requires_grad
            d = x.detach()
            assert not d.requires_grad and d.is_leaf
            assert not tensord.zeros_like(x).requires_grad

    def test_no_grad_and_enable_grad(self):
        with tensord.device("meta"):
            x = tensord.randn(3, requires_grad=True)
            with tensord.no_grad():
                assert not tensord.is_grad_enabled()
                y = x * 2
                with tensord.enable_grad():
                    z = x * 2
            assert tensord.is_grad_enabled()
            assert not y.requires_grad and y.grad_fn is None
            assert z.requires_grad

            @tensord.no_grad()
            def f():
                return x * 3, tensord.is_grad_enabled()
            out, mode = f()
            assert not out.requires_grad and mode is False and tensord.is_grad_enabled()

            tensord.set_grad_enabled(False)
            try:
                assert not (x * 2).requires_grad
            finally:
                tensord.set_grad_enabled(True)
            with tensord.set_grad_enabled(False):
                assert not tensord.is_grad_enabled()
            assert tensord.is_grad_enabled()
            with pytest.raises(TypeError):
                tensord.set_grad_enabled(1)

    def test_inference_mode(self):
        # As torch.inference_mode: no recording inside (True), no change
        # (False); a context manager and a decorator; the previous mode back
        # on exit, even from inside enable_grad.
        with tensord.device("meta"):
            x = tensord.randn(3, requires_grad=True)
            assert not tensord.is_inference_mode_enabled()
            with tensord.inference_mode():
                assert tensord.is_inference_mode_enabled() and not tensord.is_grad_enabled()
                assert not (x * 2).requires_grad
            assert tensord.is_grad_enabled() and not tensord.is_inference_mode_enabled()
            with tensord.inference_mode(False):
                assert tensord.is_grad_enabled() and (x * 2).requires_grad
            # As torch: inference_mode(False) records gradients again, even
            # inside no_grad or inference_mode; leaving restores both modes.
            with tensord.no_grad(), tensord.inference_mode(False):
                assert tensord.is_grad_enabled() and not tensord.is_inference_mode_enabled()
            with tensord.inference_mode():
                with tensord.inference_mode(False):
                    assert tensord.is_grad_enabled() and not tensord.is_inference_mode_enabled()
                assert not tensord.is_grad_enabled() and tensord.is_inference_mode_enabled()
            im = tensord.inference_mode()
            with im:
                with im:  # the same object entered again inside itself
                    assert not tensord.is_grad_enabled()
                assert not tensord.is_grad_enabled()
            assert tensord.is_grad_enabled() and not tensord.is_inference_mode_enabled()
            with pytest.raises(ValueError):
                with tensord.inference_mode():
                    raise ValueError("inside")
            assert tensord.is_grad_enabled() and not tensord.is_inference_mode_enabled()

            @tensord.inference_mode()
            def f():
                return x * 3, tensord.is_grad_enabled()
            out, mode = f()
            assert not out.requires_grad and mode is False and tensord.is_grad_enabled()
            # A decorated generator runs in the mode; its caller between
            # resumes does not (as torch's decorators).
            @tensord.inference_mode()
            def gen():
                got = yield tensord.is_grad_enabled(), tensord.is_inference_mode_enabled()
                yield got, tensord.is_grad_enabled()
                return "done"
            g = gen()
            assert next(g) == (False, True)
            assert tensord.is_grad_enabled() and not tensord.is_inference_mode_enabled()
            assert g.send("x") == ("x", False)
            with pytest.raises(StopIteration) as stop:
                next(g)
            assert stop.value.value == "done" and tensord.is_grad_enabled()

            @tensord.no_grad()
            def counting():
                for i in range(3):
                    yield i, tensord.is_grad_enabled()
            assert list(counting()) == [(0, False), (1, False), (2, False)] and tensord.is_grad_enabled()
            c = counting()
            next(c)
            c.close()  # closing inside the mode, the caller's mode stays
            assert tensord.is_grad_enabled()
            with tensord.inference_mode(1):  # read as a bool, as torch does
                assert not tensord.is_grad_enabled()
            assert tensord.autograd.inference_mode is tensord.inference_mode

    def test_numpy_of_a_tensor_that_requires_grad_is_refused_as_in_pytorch(self, session):
        x = tensord.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad. "
                                               r"Use tensor.detach\(\).numpy\(\) instead."):
            x.numpy()
        with pytest.raises(RuntimeError, match="requires grad"):
            np.asarray(x * 2)
        assert x.numpy(force=True).tolist() == [1.0, 1.0, 1.0]
        assert x.detach().numpy().tolist() == [1.0, 1.0, 1.0]
        assert x.tolist() == [1.0, 1.0, 1.0]  # tolist() and item() stay allowed, as in PyTorch

    def test_grad_mode_is_thread_local(self):
        seen = []
        with tensord.no_grad():
            t = threading.Thread(target=lambda: seen.append(tensord.is_grad_enabled()))
            t.start()
            t.join()
        assert seen == [True]

    def test_requires_grad_errors(self):
        with tensord.device("meta"):
            x = tensord.randn(3, requires_grad=True)
            y = x * 2
            with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
                y.requires_grad_(False)
            y.requires_grad_(True)  # a non-leaf that requires grad: allowed, nothing changes
            with pytest.raises(RuntimeError, match="only Tensors of floating point"):
                tensord.zeros(3, dtype=tensord.int64).requires_grad_()
            with pytest.raises(RuntimeError, match="only Tensors of floating point"):
                tensord.tensor([1, 2], device="meta", requires_grad=True)
            with pytest.raises(TypeError):
                x.requires_grad = 1
            x.requires_grad = False
            assert not x.requires_grad
            with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
                x.retain_grad()

    def test_inplace_rules(self):
        with tensord.device("meta"):
            x = tensord.randn(3, requires_grad=True)
            with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
                x.add_(1)
            with tensord.no_grad():
                assert x.add_(1) is x   # allowed without recording (optimizer steps)
            a = tensord.zeros(3)
            r = a.add_(x)
            assert r is a
            assert a.requires_grad and not a.is_leaf and a.grad_fn.name() == "AddBackward0"
            b = x * 1
            old = b.grad_fn
            b.mul_(2)
            assert b.grad_fn.name() == "MulBackward0"
            assert b.grad_fn.next_functions[0][0] is old   # the rebase keeps the old history as input
            v = (x * 1)[1:]
            with pytest.raises(NotImplementedError, match="view"):
                v.mul_(2)
            with tensord.no_grad():
                v.mul_(2)

    def test_factories_and_tensor_requires_grad(self):
        with tensord.device("meta"):
            assert tensord.zeros(2, 3, requires_grad=True).requires_grad
            assert tensord.ones(2, requires_grad=True).is_leaf
            assert not tensord.empty(2).requires_grad
        t = tensord.tensor([1.0, 2.0], device="meta", requires_grad=True)
        assert t.requires_grad and t.is_leaf

    def test_tensor_copy_construct_and_subclass(self):
        class Param(tensord.Tensor):
            def __init__(self, data):
                super().__init__(data.detach())
                self.requires_grad_(True)

        with tensord.device("meta"):
            base = tensord.randn(2, 2)
            p = Param(base)
            assert isinstance(p, tensord.Tensor) and type(p) is Param
            assert p.requires_grad and p.is_leaf and not base.requires_grad
            assert p.shape == (2, 2)
            same = tensord.Tensor(p)
            assert same._impl_id == p._impl_id and same.requires_grad
            with tensord.no_grad():
                assert p.mul_(2) is p   # in-place returns the caller's object, a Param

    def test_function_on_meta(self):
        class Exp(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.exp()

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * x.exp()

        with tensord.device("meta"):
            x = tensord.randn(4, requires_grad=True)
            y = Exp.apply(x)
            assert y.requires_grad and y.grad_fn.name() == "ExpBackward"
            assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
            with tensord.no_grad():
                assert not Exp.apply(x).requires_grad
        with pytest.raises(RuntimeError, match="apply"):
            Exp()


# ================================================================ through the daemon

class TestBackward:
    def test_backward_and_grad_caching(self, session):
        a = f64(5)
        x = leaf(a)
        y = (x * x).sum()
        assert y.grad_fn.name() == "SumBackward0"
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * a)
        assert x.grad is x.grad
        g = x.grad
        (x * 3).sum().backward()          # accumulates in place into the same .grad
        np.testing.assert_allclose(g.numpy(), 2 * a + 3)
        x.grad = None
        assert x.grad is None
        (x * 4).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(5, 4.0))

    def test_grad_set_and_delete(self, session):
        x = leaf(f64(3))
        g = tensord.ones(3, dtype=tensord.float64)
        x.grad = g
        assert x.grad is g
        (x * 2).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 3.0))
        del x.grad
        assert x.grad is None
        with pytest.raises(RuntimeError, match="different size"):
            x.grad = tensord.ones(4, dtype=tensord.float64)
        with pytest.raises(RuntimeError, match="different type"):
            x.grad = tensord.ones(3)

    def test_zero_grad_in_place(self, session):
        x = leaf(f64(3))
        (x * 2).sum().backward()
        x.grad.zero_()
        (x * 5).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 5.0))

    def test_errors(self, session):
        x = leaf(f64(3))
        with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
            tensord.ones(3).sum().backward()
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
            (x * 2).backward()
        y = (x * x).sum()
        y.backward()
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            y.backward()
        with tensord.no_grad():
            z = (x * 2).sum()
        with pytest.raises(RuntimeError, match="does not require grad"):
            z.backward()

    def test_second_backward_through_number_ops_follows_torch(self, session):
        # torch runs `x * 2` and `x / 2` as mul/div of a wrapped-number tensor,
        # which it saves: a second backward fails. `x + 2` saves nothing.
        for f, fails in [(lambda x: x * 2, True), (lambda x: x / 2, True), (lambda x: x.clone().mul_(3), True),
                         (lambda x: x + 2, False)]:
            for mod in (tensord, torch):
                x = mod.ones(3, dtype=mod.float64, requires_grad=True)
                y = f(x).sum()
                y.backward()
                if fails:
                    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                        y.backward()
                else:
                    y.backward()
                    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])

    def test_retain_graph_and_gradient_argument(self, session):
        a = f64(2, 3)
        x = leaf(a)
        y = x * x
        w = np.arange(6.0).reshape(2, 3)
        y.backward(tensord.from_numpy(w), retain_graph=True)
        y.backward(tensord.from_numpy(w))
        np.testing.assert_allclose(x.grad.numpy(), 2 * (2 * a * w))

    def test_broadcasting_reduces_to_input_shape(self, session):
        a, b = f64(3, 1, seed=1), f64(1, 4, seed=2)
        x, y = leaf(a), leaf(b)
        (x * y).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(b, (3, 4)).sum(1, keepdims=True))
        np.testing.assert_allclose(y.grad.numpy(), np.broadcast_to(a, (3, 4)).sum(0, keepdims=True))
        assert x.grad.shape == (3, 1) and y.grad.shape == (1, 4)

    def test_retain_grad_on_non_leaf(self, session):
        x = leaf(f64(3))
        y = x * 2
        y.retain_grad()
        assert y.retains_grad
        (y * y).sum().backward()
        np.testing.assert_allclose(y.grad.numpy(), 2 * (2 * f64(3)))
        z = x * 3
        (z * 1).sum().backward()
        with pytest.warns(UserWarning, match="not a leaf"):
            assert z.grad is None

    def test_backward_inputs(self, session):
        x, y = leaf(f64(3)), leaf(f64(3, seed=1))
        (x * y).sum().backward(inputs=[x])
        np.testing.assert_allclose(x.grad.numpy(), f64(3, seed=1))
        assert y.grad is None

    def test_new_grad_never_shares_memory_with_another_tensor(self, session):
        # The engine hands a gradient nothing else holds to .grad without a
        # copy (as PyTorch's AccumulateGrad); one the caller still holds, or
        # one passed through unchanged, or expanded, is copied.
        x, w = leaf(f64(3)), leaf(f64(3, seed=1))
        g = tensord.ones(3, dtype=tensord.float64)
        (x + 0).backward(g)                      # add passes g through unchanged
        (w * 2).sum().backward()                 # a fresh gradient, stolen
        g.add_(5)
        np.testing.assert_allclose(x.grad.numpy(), np.ones(3))
        x.grad.mul_(3)                           # .grad is x's own
        np.testing.assert_allclose(g.numpy(), np.full(3, 6.0))
        np.testing.assert_allclose(w.grad.numpy(), np.full(3, 2.0))
        t = tensord.from_numpy(f64(3, 2)).t().requires_grad_()   # not contiguous: .grad keeps its strides
        (t * 3).sum().backward()
        assert t.grad.stride() == t.stride()
        np.testing.assert_allclose(t.grad.numpy(), np.full((2, 3), 3.0))

    def test_autograd_grad(self, session):
        a = f64(4)
        x = leaf(a)
        y = leaf(f64(4, seed=3))
        out = (x.exp() * 2).sum()
        gx, = tensord.autograd.grad(out, x, retain_graph=True)
        np.testing.assert_allclose(gx.numpy(), 2 * np.exp(a))
        assert x.grad is None
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            tensord.autograd.grad(out, [x, y], retain_graph=True)
        gx2, gy = tensord.autograd.grad(out, [x, y], allow_unused=True)
        assert gy is None
        np.testing.assert_allclose(gx2.numpy(), 2 * np.exp(a))

    def test_double_backward(self, session):
        a = f64(4)
        x = leaf(a)
        y = (x ** 3).sum()
        g, = tensord.autograd.grad(y, x, create_graph=True)
        assert g.requires_grad
        np.testing.assert_allclose(g.detach().numpy(), 3 * a ** 2)
        g.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 6 * a)

    def test_a_saved_leaf_that_requires_grad_later_gets_double_backward_gradients(self, session):
        # As PyTorch (its saved original): z = x * w saved x while x did not
        # require grad; after x.requires_grad_(), dz/dw = x has a history.
        a, b = f64(3), f64(3) + 2
        x = tensord.tensor(a, requires_grad=False)
        w = leaf(b)
        z = x * w
        x.requires_grad_()
        g, = tensord.autograd.grad(z.sum(), w, create_graph=True)
        assert g.requires_grad
        np.testing.assert_allclose(g.detach().numpy(), a)
        gx, = tensord.autograd.grad((g * g).sum(), x)
        np.testing.assert_allclose(gx.numpy(), 2 * a)
        if torch is not None:
            tx = torch.tensor(a, requires_grad=False)
            tw = torch.tensor(b, requires_grad=True)
            tz = tx * tw
            tx.requires_grad_()
            tg, = torch.autograd.grad(tz.sum(), tw, create_graph=True)
            np.testing.assert_allclose(gx.numpy(), torch.autograd.grad((tg * tg).sum(), tx)[0].numpy())

    def test_backward_create_graph_grad_requires_grad(self, session):
        a = f64(3)
        x = leaf(a)
        (x * x).sum().backward(create_graph=True)
        assert x.grad.requires_grad
        g = x.grad
        x.grad = None
        g.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))

    def test_inplace_on_non_leaf_rebases(self, session):
        a = f64(3)
        x = leaf(a)
        y = x * 1
        y.mul_(3)
        y.add_(x)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 4.0))

    def test_inplace_leaf_error_raised_at_call(self, session):
        x = leaf(f64(3))
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            x.mul_(2)
        with tensord.no_grad():
            x.sub_(1.0)
        np.testing.assert_allclose(x.detach().numpy(), f64(3) - 1)

    def test_version_counter_error(self, session):
        x = leaf(f64(3))
        e = x.exp()
        out = (e * 2).sum()   # exp saved its result e
        e.add_(1)             # e is now at version 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward()

    def test_detach_and_data(self, session):
        x = leaf(f64(3))
        d = x.detach()
        assert not d.requires_grad
        np.testing.assert_allclose(x.data.numpy(), f64(3))
        (x * d).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), f64(3))

    def test_tensor_of_a_tensor_has_no_history(self, session):
        x = leaf(f64(3))
        t = tensord.tensor(x * 2)
        assert not t.requires_grad and t.is_leaf
        np.testing.assert_allclose(t.numpy(), 2 * f64(3))
        p = tensord.tensor(f64(2), requires_grad=True)
        assert p.requires_grad and p.is_leaf and p.dtype == tensord.float64

    def test_tensor_copy_construct_shares_the_handle(self, session):
        x = tensord.from_numpy(f64(3))
        y = tensord.Tensor(x)
        y.requires_grad_()
        assert x.requires_grad and y._impl_id == x._impl_id
        (y * y).sum().backward()
        assert x.grad is not None
        np.testing.assert_allclose(x.grad.numpy(), 2 * f64(3))

    def test_setitem_under_no_grad(self, session):
        t = tensord.zeros(2, 3)
        t[0] = 1.5
        t[1, 1:] = tensord.tensor([2.0, 3.0])
        np.testing.assert_allclose(t.numpy(), [[1.5, 1.5, 1.5], [0, 2, 3]])

    def test_manual_seed(self, session):
        tensord.manual_seed(123)
        a = tensord.randn(6).numpy()
        tensord.manual_seed(123)
        b = tensord.randn(6).numpy()
        np.testing.assert_array_equal(a, b)
        tensord.manual_seed(124)
        assert not np.array_equal(tensord.randn(6).numpy(), a)

    @pytest.mark.skipif(torch is None, reason="python3-torch is not installed")
    def test_mlp_gradients_equal_pytorch(self, session):
        rng = np.random.default_rng(7)
        xs = rng.standard_normal((8, 5)).astype(np.float32)
        w1 = rng.standard_normal((6, 5)).astype(np.float32)
        b1 = rng.standard_normal(6).astype(np.float32)
        w2 = rng.standard_normal((3, 6)).astype(np.float32)
        b2 = rng.standard_normal(3).astype(np.float32)
        target = rng.integers(0, 3, (8, 1))

        def run(lib, make, params):
            x = make(xs)
            h = (x @ params[0].T + params[1]).relu()
            logits = h @ params[2].T + params[3]
            logp = logits.log_softmax(1)
            return -(logp.gather(1, make(target)).mean())

        tp = [tensord.from_numpy(p).requires_grad_() for p in (w1, b1, w2, b2)]
        run(tensord, tensord.from_numpy, tp).backward()
        pp = [torch.from_numpy(p.copy()).requires_grad_() for p in (w1, b1, w2, b2)]
        run(torch, torch.from_numpy, pp).backward()
        for a, b in zip(tp, pp):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


# ================================================================ predicted backward

def _stats_delta(session, fn):
    before = session.stats()
    fn()
    after = session.stats()
    return {k: after[k] - before[k] for k in ("round_trips", "predicted_backwards")}


@pytest.fixture(params=["1", "0"], ids=["predicted", "waited"])
def session_predicting(request, daemon, monkeypatch):
    """A new session, the default one during the test, opened with
    TENSORD_PREDICT_BACKWARD set to the parameter: every test using it runs
    with backward() predicted and with backward() waited for."""
    monkeypatch.setenv("TENSORD_PREDICT_BACKWARD", request.param)
    s = tensord.connect(daemon.address, set_default=False)
    try:
        with s:
            yield s
    finally:
        s.close()


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_conversion_that_changes_nothing_returns_self(session, device):
    # As PyTorch: to() to the same dtype and device, and contiguous() of a
    # contiguous tensor, give back the tensor itself: a leaf stays a leaf.
    w = tensord.ones(3, device=device, requires_grad=True)
    for same in (w.float(), w.to(tensord.float32), w.to(device), w.contiguous(), w.type_as(w)):
        assert same is w and same.is_leaf and same.grad_fn is None
    assert w.to(tensord.float32, copy=True) is not w
    assert w.double().grad_fn is not None
    t = w.detach().expand(2, 3)
    assert t.contiguous() is not t and t.contiguous().stride() == (3, 1)
    if device == "cpu":
        before = session.stats()["ops_issued"]
        w.float().sum().backward()  # only sum goes to the daemon
        assert session.stats()["ops_issued"] == before + 1
        np.testing.assert_allclose(w.grad.numpy(), np.ones(3))


def test_a_backward_over_a_failed_op_names_the_line_that_failed(session_predicting):
    # The forward op fails in the daemon (the data decides). The error that
    # backward() raises (predicted: at the next sync point; waited: at once)
    # names both lines: the backward's and, after it, the op that failed.
    x = tensord.randn(3, requires_grad=True)
    index_line = _line() + 1
    y = x[tensord.tensor([5])]
    loss = y.sum()
    with pytest.raises(IndexError) as e:
        backward_line = _line() + 1
        loss.backward()
        x.grad.numpy()
    msg = str(e.value)
    assert msg.startswith(f"backward (at test_autograd.py:{backward_line}): index.Tensor (call "), msg
    assert msg.endswith(f" at test_autograd.py:{index_line}): index 5 is out of bounds for dimension 0 with size 3"), msg
    # Raised once: the next sync point that does not read the failed
    # tensors has nothing to raise (the indexing's error went out inside
    # the backward's).
    assert (tensord.ones(2) + 1).tolist() == [2.0, 2.0]
    with pytest.raises(IndexError, match=rf"^index.Tensor \(call \d+ at test_autograd.py:{index_line}\): index 5"):
        loss.item()


def _line():
    """The number of the caller's line."""
    return inspect.currentframe().f_back.f_lineno


class TestPredictedBackward:
    """backward() streams without a round trip when the client can tell which
    .grad the daemon sets (SessionOptions.predict_backward)."""

    def test_an_mlp_backward_needs_no_round_trip_and_matches_torch(self, session):
        a, w1, w2 = f64(8, 5), f64(5, 4, seed=1), f64(4, 3, seed=2)
        x, p1, p2 = tensord.from_numpy(a), leaf(w1), leaf(w2.T)  # p2: a transposed array
        loss = ((x @ p1).relu() @ p2.t()).log_softmax(1).sum()
        session.synchronize()
        assert _stats_delta(session, loss.backward) == {"round_trips": 0, "predicted_backwards": 1}
        # The .grad metadata comes from the prediction: a transposed leaf's
        # .grad keeps the leaf's strides, as PyTorch's AccumulateGrad.
        assert p2.grad.shape == (3, 4) and p2.grad.stride() == p2.stride()
        if torch is not None:
            tx, t1, t2 = torch.from_numpy(a), torch.from_numpy(w1).requires_grad_(), torch.from_numpy(w2.T).requires_grad_()
            ((tx @ t1).relu() @ t2.t()).log_softmax(1).sum().backward()
            np.testing.assert_allclose(p1.grad.numpy(), t1.grad.numpy(), rtol=1e-12)
            np.testing.assert_allclose(p2.grad.numpy(), t2.grad.numpy(), rtol=1e-12)
        # A second backward accumulates into the .grad already there.
        loss2 = (x @ p1).sum()
        assert _stats_delta(session, loss2.backward) == {"round_trips": 0, "predicted_backwards": 1}
        if torch is not None:
            (tx @ t1).sum().backward()
            np.testing.assert_allclose(p1.grad.numpy(), t1.grad.numpy(), rtol=1e-12)

    def test_the_engine_errors_are_still_raised_by_backward(self, session):
        x = leaf(f64(3))
        y = x.exp()
        loss = y.sum()
        loss.backward()
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            loss.backward()
        z = x.exp()
        z.mul_(2)  # under grad mode: z is not a leaf
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()
        session.synchronize()  # nothing left for the next sync point

    def test_a_failure_only_the_daemon_sees_surfaces_at_the_next_sync_point(self, session):
        x = leaf(f64(4))
        y = x.gather(0, tensord.tensor([1, 7]))  # index 7 is out of range: the daemon finds out
        y.sum().backward()                       # streamed: returns
        with pytest.raises(RuntimeError, match="out of bounds|out of range"):
            x.grad.numpy()
        session.synchronize()  # raised once: the gather's error went out inside the backward's
        x.grad = None
        (x * 2).sum().backward()                 # the session goes on
        np.testing.assert_allclose(x.grad.numpy(), np.full(4, 2.0))

    def test_graphs_it_cannot_predict_wait_for_the_daemon(self, session):
        x = leaf(f64(3))
        y = x * 2
        y.retain_grad()  # a retained .grad takes the gradient's layout: only the daemon knows it
        assert _stats_delta(session, (y * y).sum().backward)["round_trips"] == 1
        np.testing.assert_allclose(y.grad.numpy(), 2 * y.detach().numpy())
        z = Exp.apply(x)  # a Python backward runs in this client
        assert _stats_delta(session, z.sum().backward)["round_trips"] == 1
        g = x.grad.detach().numpy().copy()
        (x * x).sum().backward(create_graph=True)
        assert x.grad.requires_grad
        np.testing.assert_allclose(x.grad.detach().numpy(), g + 2 * x.detach().numpy())

    def test_the_version_error_names_the_node_a_saved_tensor_comes_from_now(self, session_predicting):
        # As PyTorch (its saved original): y saved by y * y, then y.add_(1):
        # "output 0 of AddBackward0"; a leaf rebased after
        # requires_grad_(False): "output 0 of MulBackward0" (predicted and
        # waited for alike). Only while the saved tensor lives: once
        # released, the node as of the save is named (PyTorch keeps it).
        def y_added(T, x):
            y = x * 3
            z = y * y
            y.add_(1)
            return z, y

        def leaf_rebased(T, w):
            z = w * w
            w.requires_grad_(False)
            w.mul_(z)
            return z, w

        for make, owner in ((y_added, r", which is output 0 of AddBackward0,"),
                            (leaf_rebased, r", which is output 0 of MulBackward0,")):
            msg = (r"modified by an inplace operation: \[torch\.DoubleTensor \[3\]\]" + owner +
                   r" is at version 1; expected version 0")
            z, _ = make(tensord, leaf(f64(3)))
            with pytest.raises(RuntimeError, match=msg):
                z.sum().backward()
            if torch is not None:
                z, _ = make(torch, torch.tensor(f64(3), requires_grad=True))
                with pytest.raises(RuntimeError, match=msg):
                    z.sum().backward()
        session_predicting.synchronize()

    def test_an_in_place_op_reading_its_own_self_as_another_argument_fails_at_backward(self, session_predicting):
        # x.mul_(x) saves `other` (x itself) before writing it, as PyTorch
        # does: backward must fail, not read x*x as `other` (a wrong gradient).
        s = session_predicting
        for make_other in (lambda x: x, lambda x: x.detach(), lambda x: x.view(-1).view(3)):
            w = leaf(f64(3))
            x = w * 1
            x.mul_(make_other(x))
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                x.sum().backward()
            assert w.grad is None
        w = leaf(f64(3))
        x = w * 1
        x.add_(x)  # add's backward reads no saved tensor: fine, as in PyTorch
        x.sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), np.full(3, 2.0))
        s.synchronize()

    def test_a_leaf_that_stops_requiring_grad_after_forward_gets_no_grad(self, session_predicting):
        # As PyTorch's AccumulateGrad: requires_grad_(False) between forward
        # and backward means no .grad; an in-place op since makes it an error.
        s = session_predicting
        w, v = leaf(f64(3)), leaf(f64(3, seed=1))
        y = (w * v).sum()
        w.requires_grad_(False)
        y.backward()
        assert w.grad is None
        np.testing.assert_allclose(v.grad.numpy(), f64(3))
        w.requires_grad_(True)
        (w * v).sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), f64(3, seed=1))
        w2 = leaf(f64(3))
        y = (w2 * 2).sum()
        w2.requires_grad_(False)
        w2.mul_(v)  # w2 has a grad_fn now
        with pytest.raises(RuntimeError, match="leaf variable has been moved into the graph interior"):
            y.backward()
        s.synchronize()

    def test_a_plain_backward_accumulates_into_a_grad_left_by_create_graph_in_place(self, session_predicting):
        # As PyTorch: without create_graph, AccumulateGrad adds into the .grad
        # already there (the same tensor, its history kept), even when an
        # earlier create_graph backward left one that requires grad.
        s = session_predicting
        w = leaf(f64(3))
        (w * w).sum().backward(create_graph=True)
        g1 = w.grad
        assert g1.requires_grad
        (w * 3).sum().backward()
        assert w.grad is g1 and g1.requires_grad
        np.testing.assert_allclose(g1.detach().numpy(), 2 * f64(3) + 3)
        s.synchronize()

    def test_prediction_can_be_turned_off(self, session_predicting):
        s = session_predicting
        x = leaf(f64(3))
        loss = (x * x).sum()
        predicted = os.environ["TENSORD_PREDICT_BACKWARD"] == "1"
        assert _stats_delta(s, loss.backward) == {"round_trips": 0 if predicted else 1,
                                                 "predicted_backwards": 1 if predicted else 0}
        np.testing.assert_allclose(x.grad.numpy(), 2 * f64(3))


# ================================================================ Function

class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return grad_out * x.exp()


class Mul(Function):
    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(a, b)

    @staticmethod
    def backward(ctx, grad_out):
        a, b = ctx.saved_tensors
        return grad_out * b, grad_out * a


class TestFunction:
    def test_page_examples_pass_gradcheck(self, session):
        x = tensord.randn(5, dtype=tensord.float64, requires_grad=True)
        out = Exp.apply(x)
        assert out.grad_fn.name() == "ExpBackward"
        assert gradcheck(Exp.apply, (x,))
        a = tensord.randn(5, dtype=tensord.float64, requires_grad=True)
        b = tensord.randn(5, dtype=tensord.float64, requires_grad=True)
        assert gradcheck(Mul.apply, (a, b))

    def test_page_examples_pass_gradgradcheck(self, session):
        x = tensord.randn(4, dtype=tensord.float64, requires_grad=True)
        assert gradgradcheck(Exp.apply, (x,))
        a = tensord.randn(3, dtype=tensord.float64, requires_grad=True)
        b = tensord.randn(3, dtype=tensord.float64, requires_grad=True)
        assert gradgradcheck(Mul.apply, (a, b))

    def test_gradcheck_detects_a_wrong_backward(self, session):
        class Wrong(Function):
            @staticmethod
            def forward(ctx, x):
                return x * x

            @staticmethod
            def backward(ctx, g):
                return g * 3

        x = tensord.randn(3, dtype=tensord.float64, requires_grad=True)
        assert not gradcheck(Wrong.apply, (x,), raise_exception=False)
        with pytest.raises(tensord.autograd.GradcheckError, match="Jacobian mismatch"):
            gradcheck(Wrong.apply, (x,))

    def test_python_backward_inside_daemon_graph(self, session):
        a = f64(4)
        x = leaf(a)
        y = (Exp.apply(x * 2) * 3).sum()
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), 6 * np.exp(2 * a), rtol=1e-12)

    def test_needs_input_grad(self, session):
        seen = []

        class F(Function):
            @staticmethod
            def forward(ctx, a, b, k):
                return a * b * k

            @staticmethod
            def backward(ctx, g):
                seen.append(ctx.needs_input_grad)
                return g * 2, None, None

        a = leaf(f64(3))
        b = tensord.from_numpy(f64(3, seed=1))
        F.apply(a, b, 2.0).sum().backward()
        assert seen == [(True, False, False)]
        np.testing.assert_allclose(a.grad.numpy(), np.full(3, 2.0))

    def test_mark_non_differentiable(self, session):
        class SortLike(Function):
            @staticmethod
            def forward(ctx, x):
                idx = x.argmax().to(tensord.float64)
                ctx.mark_non_differentiable(idx)
                return x * 2, idx

            @staticmethod
            def backward(ctx, g, g_idx):
                return g * 2

        x = leaf(f64(3))
        y, idx = SortLike.apply(x)
        assert y.requires_grad and not idx.requires_grad
        with pytest.raises(RuntimeError, match="does not require grad"):
            idx.sum().backward()
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))

    @pytest.mark.parametrize("materialize", [True, False])
    def test_set_materialize_grads(self, session, materialize):
        seen = []

        class Two(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                return x * 1, x * 2

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append(g2 if g2 is None else g2.numpy().tolist())
                out = g1 * 1
                if g2 is not None:
                    out = out + g2 * 2
                return out

        x = leaf(f64(3))
        a, _ = Two.apply(x)
        a.sum().backward()
        assert seen == ([[0.0, 0.0, 0.0]] if materialize else [None])
        np.testing.assert_allclose(x.grad.numpy(), np.ones(3))

    def test_mark_dirty(self, session):
        class Double(Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2

        a = leaf(f64(3))
        y = a * 1
        out = Double.apply(y)
        assert out._impl_id == y._impl_id and y.grad_fn.name() == "DoubleBackward"
        out.sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), np.full(3, 2.0))
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            Double.apply(leaf(f64(3)))

    def test_errors_in_backward_propagate(self, session):
        class Boom(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                raise ValueError("boom in backward")

        class TooMany(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g, g

        x = leaf(f64(3))
        with pytest.raises(ValueError, match="boom in backward"):
            Boom.apply(x).sum().backward()
        with pytest.raises(RuntimeError, match="incorrect number of gradients"):
            TooMany.apply(x).sum().backward()
        # The session still works afterwards.
        (x * 2).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))

    def test_contexts_are_freed_with_the_graph(self, session):
        from tensord.autograd import function as fmod
        x = leaf(f64(3))
        y = Exp.apply(x)
        fid = y.grad_fn._function_id
        assert fid in fmod._functions
        y.sum().backward()
        del y
        tensord.synchronize()
        tensord.synchronize()
        fmod._drop_released()
        assert fid not in fmod._functions


# ================================================ Function: saved tensors in the daemon

class ExpOut(Function):
    """The TensorPlay page's Exp that saves its OUTPUT (backward g * y)."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_out):
        y, = ctx.saved_tensors
        return grad_out * y


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return 2 * grad_out * x


class TestFunctionSavedTensors:
    def test_saved_input_modified_in_place_is_an_error(self, session):
        x = leaf(f64(3))
        a = x * 1
        y = Square.apply(a)
        a.mul_(2)
        with pytest.raises(RuntimeError, match=r"one of the variables needed for gradient computation has been "
                                               r"modified by an inplace operation: \[torch\.DoubleTensor \[3\]\], which is "
                                               r"output 0 of MulBackward0, is at version 1; expected version 0"):
            y.sum().backward()
        assert x.grad is None

    def test_saved_output_modified_in_place_is_an_error(self, session):
        x = leaf(f64(4))
        y = ExpOut.apply(x)
        y.add_(1)
        with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[torch\.DoubleTensor \[4\]\], which is "
                                               r"output 0 of ExpOutBackward, is at version 1; expected version 0"):
            y.sum().backward()

    def test_unmodified_saved_tensors_give_the_right_gradient(self, session):
        v = f64(3, seed=4)
        x = leaf(v)
        a = x * 1
        Square.apply(a).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * v)

    def test_second_backward_through_only_functions_is_rejected(self, session):
        x = leaf(f64(3))
        y = Square.apply(ExpOut.apply(x))
        g = tensord.ones(3, dtype=tensord.float64)
        y.backward(g)
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            y.backward(g)

    def test_second_backward_with_retain_graph_accumulates(self, session):
        v = f64(3, seed=2)
        x = leaf(v)
        y = ExpOut.apply(x)
        g = tensord.ones(3, dtype=tensord.float64)
        y.backward(g, retain_graph=True)
        y.backward(g)
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(v), rtol=1e-12)

    def test_second_backward_of_a_function_without_saved_tensors_works(self, session):
        class Double(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x = leaf(f64(3))
        y = Double.apply(x)
        g = tensord.ones(3, dtype=tensord.float64)
        y.backward(g)
        y.backward(g)  # nothing saved, nothing freed: PyTorch allows it too
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 4.0))

    def test_exp_saving_its_output_supports_double_backward(self, session):
        v = f64(4, seed=3)
        x = leaf(v)
        g, = tensord.autograd.grad(ExpOut.apply(x).sum(), x, create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), np.exp(v), rtol=1e-12)
        assert g.requires_grad
        gg, = tensord.autograd.grad(g.sum(), x)
        np.testing.assert_allclose(gg.numpy(), np.exp(v), rtol=1e-12)

    def test_exp_saving_its_output_passes_gradcheck_and_gradgradcheck(self, session):
        x = tensord.randn(4, dtype=tensord.float64, requires_grad=True)
        assert gradcheck(ExpOut.apply, (x,))
        assert gradgradcheck(ExpOut.apply, (x,))

    def test_saved_tensors_outside_backward_are_what_forward_saved(self, session):
        seen = {}

        class Keep(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, None)
                seen["ctx"] = ctx
                return x * 3

            @staticmethod
            def backward(ctx, g):
                x, none = ctx.saved_tensors
                seen["none"] = none
                seen["x"] = x.detach().numpy()
                return g * 3

        v = f64(3, seed=5)
        x = leaf(v)
        y = Keep.apply(x)
        saved = seen["ctx"].saved_tensors
        assert saved[0] is x and saved[1] is None
        y.sum().backward()
        assert seen["none"] is None
        np.testing.assert_allclose(seen["x"], v)
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, 3.0))

    def test_gradient_for_a_non_tensor_input_is_an_error(self, session):
        class Scale(Function):
            @staticmethod
            def forward(ctx, x, k):
                ctx.k = k
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, g

        x = leaf(f64(3))
        with pytest.raises(RuntimeError, match="function ScaleBackward returned a gradient different than None at "
                                               "position 2, but the corresponding forward input was not a Variable"):
            Scale.apply(x, 2.0).sum().backward()
        # None for the non-tensor input is fine.
        class Scale2(Scale):
            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None

        x2 = leaf(f64(3))
        Scale2.apply(x2, 2.0).sum().backward()
        np.testing.assert_allclose(x2.grad.numpy(), np.full(3, 2.0))

    def test_a_function_saving_its_output_is_freed_with_the_graph(self, session):
        # The node keeps its saved output without the output's identity, so no
        # cycle keeps it alive once the graph's tensors are gone.
        from tensord.autograd import function as fmod
        x = leaf(f64(3))
        y = ExpOut.apply(x)
        fid = y.grad_fn._function_id
        assert fid in fmod._functions
        y.sum().backward(retain_graph=True)
        del y
        tensord.synchronize()
        tensord.synchronize()
        fmod._drop_released()
        assert fid not in fmod._functions


def test_two_threads_backward_through_functions_at_once():
    # Both backward requests reach the daemon; the second runs nested inside
    # the first's callback wait, and the answers may come in either order.
    import threading

    class Double(tensord.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    results, errors = {}, []

    def work(k):
        try:
            for _ in range(5):
                x = tensord.ones(2, requires_grad=True)
                Double.apply(x).sum().backward()
                results[k] = x.grad.tolist()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "backward hung"
    assert errors == []
    assert results == {0: [2.0, 2.0], 1: [2.0, 2.0]}


_SETITEM_KEYS = [
    ("int", lambda T: 1, (4,)),
    ("int, int", lambda T: (2, 3), ()),
    ("slice", lambda T: slice(0, 2), (2, 4)),
    ("slice with step, int", lambda T: (slice(None, None, 2), 1), (2,)),
    ("ellipsis, int", lambda T: (Ellipsis, 0), (3,)),
    ("negative int, slice", lambda T: (-1, slice(1, 3)), (2,)),
    ("index tensor", lambda T: T.tensor([0, 2]), (2, 4)),
    ("full slice, index tensor", lambda T: (slice(None), T.tensor([3, 0, 3])), (3, 3)),
    ("mask", lambda T: T.tensor([True, False, True]), (2, 4)),
    ("2-D mask", lambda T: T.tensor([[True, False] * 2] * 3), (6,)),
]


@pytest.mark.skipif(torch is None, reason="python3-torch is not installed")
@pytest.mark.parametrize("name,make_key,value_shape", _SETITEM_KEYS, ids=[k[0] for k in _SETITEM_KEYS])
@pytest.mark.parametrize("value_kind", ["number", "tensor", "broadcast tensor"])
def test_setitem_while_recording_matches_pytorch_gradients(session, name, make_key, value_shape, value_kind):
    """y[key] = v on a tensor that requires grad (PyTorch records it; here the
    write goes to y through an out-of-place index_put): values of y, and the
    gradients of the leaf under y and of v, equal PyTorch's."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal((3, 4))
    vshape = value_shape if value_kind == "tensor" else (1,) + value_shape[-1:] if value_shape else ()
    vdata = rng.standard_normal(vshape)
    w = rng.standard_normal((3, 4))
    out = {}
    for lib in (tensord, torch):
        x = lib.tensor(base, requires_grad=True)
        y = x * 2
        v = 7.5 if value_kind == "number" else lib.tensor(vdata, requires_grad=True)
        y[make_key(lib)] = v
        (y * lib.tensor(w)).sum().backward()
        out[lib.__name__] = (y.detach().numpy(), x.grad.numpy(), None if value_kind == "number" else v.grad.numpy())
    for got, want in zip(out["tensord"], out["torch"]):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_setitem_while_recording_on_meta_gives_meta_grads():
    with tensord.device("meta"):
        x = tensord.randn(3, 4, requires_grad=True)
        v = tensord.randn(4, requires_grad=True)
        y = x * 2
        y[tensord.tensor([0, 2])] = v
        y[1, 1:3] = 0.0
        y.sum().backward()
        assert x.grad.shape == (3, 4) and v.grad.shape == (4,) and x.grad.device.type == "meta"


def test_setitem_while_recording_refuses_what_it_cannot_record(session):
    y = tensord.ones(3, 4, requires_grad=True) * 1
    with pytest.raises(NotImplementedError, match="mixing index tensors"):
        y[1:, tensord.tensor([0])] = 2.0
    with pytest.raises(NotImplementedError, match="None"):
        y[None, 0] = 2.0
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        y[5, 1] = 2.0
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad|leaf"):
        leaf = tensord.ones(2, requires_grad=True)
        leaf[0] = 1.0
