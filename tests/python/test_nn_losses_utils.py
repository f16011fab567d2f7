"""tensord.nn additions a PyTorch user reaches for, against PyTorch 1.13:
F.one_hot; the losses binary_cross_entropy(_with_logits), smooth_l1_loss and
huber_loss with their modules (values, gradients, reductions, the deprecated
size_average/reduce, errors); nn.utils.clip_grad_norm_ and clip_grad_value_
(values, round trips, errors)."""
import math
import warnings

import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn
import tensord.nn.functional as F

pytestmark = pytest.mark.usefixtures("session")


def np_of(t):
    return t.detach().numpy()


def round_trips():
    return tensord.stats()["round_trips"]


# ---------------------------------------------------------------- one_hot

@pytest.mark.parametrize("values, num_classes", [
    ([0, 2, 1, 2], -1), ([0, 2, 1, 2], 5), ([[3, 0], [1, 1], [0, 2]], -1), ([[3, 0], [1, 1], [0, 2]], 4),
    (2, 3), (0, -1), ([], 3), ([[], []], 2),
])
def test_one_hot_matches_pytorch(values, num_classes):
    ref = torch.nn.functional.one_hot(torch.tensor(values, dtype=torch.int64), num_classes)
    ours = F.one_hot(tensord.tensor(values, dtype=tensord.int64), num_classes)
    assert ours.dtype is tensord.int64 and tuple(ours.shape) == tuple(ref.shape)
    assert ours.tolist() == ref.tolist()


def test_one_hot_round_trips_and_meta():
    idx = tensord.tensor([[1, 0], [2, 2]])
    tensord.synchronize()
    before = round_trips()
    given = F.one_hot(idx, 3)
    assert round_trips() == before                               # num_classes given: streamed
    inferred = F.one_hot(idx)
    assert round_trips() == before + 1                           # -1: one read of min and max
    assert given.tolist() == inferred.tolist() == [[[0, 1, 0], [1, 0, 0]], [[0, 0, 1], [0, 0, 1]]]
    with tensord.device("meta"):
        m = F.one_hot(tensord.zeros(4, 2, dtype=tensord.int64), 6)
        assert m.is_meta and m.shape == (4, 2, 6) and m.dtype is tensord.int64
        with pytest.raises(RuntimeError, match="Can not infer total number of classes from meta tensor."):
            F.one_hot(tensord.zeros(4, dtype=tensord.int64))


def test_one_hot_errors():
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor."):
        F.one_hot(tensord.tensor([1, 2], dtype=tensord.int32))
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor."):
        F.one_hot(tensord.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="Class values must be non-negative."):
        F.one_hot(tensord.tensor([1, -2]))
    for n in (0, -3):
        with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes."):
            F.one_hot(tensord.tensor([1, 2]), n)
    with pytest.raises(RuntimeError, match="Can not infer total number of classes from empty tensor."):
        F.one_hot(tensord.tensor([], dtype=tensord.int64))
    with pytest.raises(TypeError, match=r"one_hot\(\): argument 'num_classes' \(position 2\) must be int, not float"):
        F.one_hot(tensord.tensor([1, 2]), 3.0)
    # A value out of range with num_classes given: scatter's error at the next sync point.
    bad = F.one_hot(tensord.tensor([0, 5, 1]), 4)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1 with size 4"):
        bad.tolist()
    bad = F.one_hot(tensord.tensor([0, -1]), 4)
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):
        tensord.synchronize()
    with pytest.raises(RuntimeError, match="Class values must be"):
        torch.nn.functional.one_hot(torch.tensor([0, 5, 1]), 4)  # PyTorch's CPU kernel refuses it at once


# ---------------------------------------------------------------- losses

def _data(shape=(4, 3), seed=0):
    r = np.random.RandomState(seed)
    x = (r.randn(*shape) * 3).astype(np.float32)
    t = r.rand(*shape).astype(np.float32)
    t[0] = np.round(t[0])                                        # some hard 0/1 targets
    return x, t


def _compare(name, x, t, kw, grad_target=True, rtol=1e-5, atol=1e-6, **extra_tensors):
    """Runs F.<name> in both libraries on (x, t) plus float tensors given in
    extra_tensors (with requires_grad where grads are compared); compares the
    loss and the grads of x, t and every extra tensor torch differentiates."""
    tx, tt = torch.tensor(x, requires_grad=True), torch.tensor(t, requires_grad=grad_target)
    dx, dt = tensord.tensor(x, requires_grad=True), tensord.tensor(t, requires_grad=grad_target)
    textra = {k: torch.tensor(v, requires_grad=g) for k, (v, g) in extra_tensors.items()}
    dextra = {k: tensord.tensor(v, requires_grad=g) for k, (v, g) in extra_tensors.items()}
    tl = getattr(torch.nn.functional, name)(tx, tt, **kw, **textra)
    dl = getattr(F, name)(dx, dt, **kw, **dextra)
    assert tuple(dl.shape) == tuple(tl.shape) and dl.dtype is getattr(tensord, str(tl.dtype).split(".")[1])
    np.testing.assert_allclose(np_of(dl), tl.detach().numpy(), rtol=rtol, atol=atol, err_msg=f"{name} {kw}")
    seed = np.asarray(np.random.RandomState(1).rand(*tl.shape), dtype=np.float32)   # a non-uniform upstream grad
    (tl * torch.tensor(seed)).sum().backward()
    (dl * tensord.tensor(seed)).sum().backward()
    pairs = [("input", dx, tx)] + ([("target", dt, tt)] if grad_target else [])
    pairs += [(k, dextra[k], textra[k]) for k, (_, g) in extra_tensors.items() if g]
    for what, ours, ref in pairs:
        assert ours.grad is not None, (name, what)
        np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"{name} {kw}: grad of {what}")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits_matches_pytorch(reduction):
    x, t = _data()
    x[1] = [80.0, -80.0, 0.0]                                    # saturated logits stay finite
    _compare("binary_cross_entropy_with_logits", x, t, dict(reduction=reduction))
    w = np.array([0.5, 2.0, 1.0], dtype=np.float32)
    pw = np.array([3.0, 0.25, 1.0], dtype=np.float32)
    # PyTorch 1.13 does not differentiate weight and pos_weight (an error when
    # they require grad): compared without their gradients.
    _compare("binary_cross_entropy_with_logits", x, t, dict(reduction=reduction), weight=(w, False))
    _compare("binary_cross_entropy_with_logits", x, t, dict(reduction=reduction), pos_weight=(pw, False))
    _compare("binary_cross_entropy_with_logits", x, t, dict(reduction=reduction), weight=(w, False),
             pos_weight=(pw, False))
    x3, t3 = _data((2, 5, 3), seed=3)
    _compare("binary_cross_entropy_with_logits", x3, t3, dict(reduction=reduction), pos_weight=(pw, False))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_matches_pytorch(reduction):
    x, t = _data()
    p = (1 / (1 + np.exp(-x))).astype(np.float32) * 0.98 + 0.01
    _compare("binary_cross_entropy", p, t, dict(reduction=reduction))
    w = np.array([[0.5], [2.0], [1.0], [0.0]], dtype=np.float32)   # broadcast to [4, 3]
    _compare("binary_cross_entropy", p, t, dict(reduction=reduction), weight=(w, False))


def test_binary_cross_entropy_clamps_its_logs_at_minus_100():
    # Probabilities of exactly 0 and 1: PyTorch's clamped loss (finite). The
    # gradient there is the clamped expression's, finite (see the
    # docstring): 0 where a log is clamped (PyTorch: -+1e12), +-1 where the
    # input equals the target (PyTorch: 0); PyTorch's everywhere else.
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.3, 1e-8], dtype=np.float32)
    t = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=np.float32)
    tp = torch.tensor(p, requires_grad=True)
    tl = torch.nn.functional.binary_cross_entropy(tp, torch.tensor(t), reduction="none")
    tl.sum().backward()
    dp = tensord.tensor(p, requires_grad=True)
    dl = F.binary_cross_entropy(dp, tensord.tensor(t), reduction="none")
    dl.sum().backward()
    np.testing.assert_allclose(np_of(dl), tl.detach().numpy(), rtol=1e-6)
    assert np_of(dl)[:2].tolist() == [100.0, 100.0]
    g = dp.grad.numpy()
    assert g[:4].tolist() == [0.0, 0.0, 1.0, -1.0]
    np.testing.assert_array_equal(tp.grad.numpy()[:4], np.float32([-1e12, 1e12, 0.0, 0.0]))
    np.testing.assert_allclose(g[4:], tp.grad.numpy()[4:], rtol=1e-6)


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0, 0.0])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_smooth_l1_loss_matches_pytorch(beta, reduction):
    x, _ = _data()
    t = x + np.linspace(-3, 3, x.size, dtype=np.float32).reshape(x.shape)   # |d| on both sides of beta
    if beta:
        t[0, 0] = x[0, 0]                                                   # d == 0
        t[0, 1] = x[0, 1] + beta                                            # |d| == beta
    _compare("smooth_l1_loss", x, t, dict(reduction=reduction, beta=beta))


def test_smooth_l1_loss_with_beta_0_is_l1_loss():
    # beta=0 is l1_loss, gradient 0 where input == target (as F.l1_loss);
    # PyTorch 1.13's smooth_l1_loss kernel gives -1 there (to input and to
    # target alike).
    x = tensord.tensor([1.0, 2.0, 0.5], requires_grad=True)
    t = tensord.tensor([1.0, 1.0, 1.0], requires_grad=True)
    F.smooth_l1_loss(x, t, beta=0.0, reduction="sum").backward()
    assert x.grad.tolist() == [0.0, 1.0, -1.0] and t.grad.tolist() == [0.0, -1.0, 1.0]
    tx = torch.tensor([1.0, 2.0, 0.5], requires_grad=True)
    torch.nn.functional.l1_loss(tx, torch.tensor([1.0, 1.0, 1.0]), reduction="sum").backward()
    assert tx.grad.tolist() == x.grad.tolist()


@pytest.mark.parametrize("delta", [1.0, 0.3, 2.5])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_huber_loss_matches_pytorch(delta, reduction):
    x, _ = _data()
    t = x + np.linspace(-3, 3, x.size, dtype=np.float32).reshape(x.shape)
    t[0, 0] = x[0, 0]
    _compare("huber_loss", x, t, dict(reduction=reduction, delta=delta))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_huber_loss_keeps_the_inputs_dtype_and_smooth_l1_the_promoted_one(reduction):
    # PyTorch 1.13: huber_loss's output has the input's dtype (computed in
    # the promoted one), smooth_l1_loss's the promoted dtype.
    x = np.linspace(-2, 2, 12)
    t = x[::-1] * 0.7
    for xd, td in [(np.float32, np.float64), (np.float64, np.float32), (np.float32, np.int64)]:
        a, b = x.astype(xd), (t * 3).astype(td)
        for name in ("huber_loss", "smooth_l1_loss"):
            ours_x = tensord.tensor(a, requires_grad=True)
            ours = getattr(F, name)(ours_x, tensord.tensor(b), reduction=reduction)
            ref_x = torch.tensor(a, requires_grad=True)
            ref = getattr(torch.nn.functional, name)(ref_x, torch.tensor(b), reduction=reduction)
            assert str(ours.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1], (name, xd, td)
            np.testing.assert_allclose(np_of(ours), ref.detach().numpy(), rtol=1e-6, err_msg=f"{name} {xd} {td}")
            ours.sum().backward()
            assert ours_x.grad.dtype == ours_x.dtype
            try:
                ref.sum().backward()
            except RuntimeError:  # PyTorch 1.13's backward refuses some mixed pairs ("Found dtype Double")
                continue
            np.testing.assert_allclose(ours_x.grad.numpy(), ref_x.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name, kw", [("smooth_l1_loss", dict(beta=1.0)), ("huber_loss", dict(delta=0.5))])
def test_an_infinite_difference_has_the_linear_parts_gradient(name, kw):
    # |d| = inf is outside the quadratic part: the gradient is sign(d)
    # (times delta), as PyTorch's, not NaN from 0 * inf in the other branch.
    a = [float("inf"), -float("inf"), 0.25, 3e38]
    b = [0.0, 0.0, 0.0, -3e38]                           # float32: 3e38 - (-3e38) overflows to inf
    x, t = tensord.tensor(a, requires_grad=True), tensord.tensor(b)
    getattr(F, name)(x, t, reduction="sum", **kw).backward()
    tx = torch.tensor(a, requires_grad=True)
    getattr(torch.nn.functional, name)(tx, torch.tensor(b), reduction="sum", **kw).backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_elementwise_losses_broadcast_with_pytorchs_warning():
    x, _ = _data()
    t = x[0] + 0.5
    for name in ("smooth_l1_loss", "huber_loss"):
        with pytest.warns(UserWarning, match="Using a target size") as rec:
            _compare(name, x, t, {})
        assert rec[0].filename == __file__                       # it points at the caller's line


def test_legacy_size_average_and_reduce_as_pytorch():
    x, t = _data()
    p = (1 / (1 + np.exp(-x))).astype(np.float32)
    for name, a in [("binary_cross_entropy_with_logits", x), ("binary_cross_entropy", p), ("smooth_l1_loss", x)]:
        for legacy in [dict(size_average=False), dict(reduce=False), dict(size_average=True, reduce=True)]:
            with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated") as rec:
                ours = getattr(F, name)(tensord.tensor(a), tensord.tensor(t), reduction="bogus", **legacy)
            assert rec[0].filename == __file__
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = getattr(torch.nn.functional, name)(torch.tensor(a), torch.tensor(t), **legacy)
            np.testing.assert_allclose(np_of(ours), ref.numpy(), rtol=1e-5, err_msg=f"{name} {legacy}")


def test_loss_errors_as_pytorch():
    a, b = tensord.rand(3), tensord.rand(3)
    for name in ("binary_cross_entropy_with_logits", "binary_cross_entropy", "smooth_l1_loss", "huber_loss"):
        with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
            getattr(F, name)(a, b, reduction="avg")
    with pytest.raises(ValueError, match=r"Target size \(tensord.Size\(\[2\]\)\) must be the same as input size"):
        F.binary_cross_entropy_with_logits(a, tensord.rand(2))
    with pytest.raises(ValueError, match="Using a target size .* is deprecated"):
        F.binary_cross_entropy(a, tensord.rand(2))
    with pytest.raises(RuntimeError, match="Found dtype Long but expected Float"):
        F.binary_cross_entropy(a, tensord.tensor([1, 0, 1]))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        F.binary_cross_entropy_with_logits(a, tensord.tensor([1, 0, 1]))
    with pytest.raises(RuntimeError):
        F.binary_cross_entropy(tensord.rand(2, 3), tensord.rand(2, 3), weight=tensord.ones(4))
    with pytest.raises(RuntimeError):
        F.binary_cross_entropy_with_logits(tensord.rand(2, 3), tensord.rand(2, 3), pos_weight=tensord.ones(2))
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta."):
        F.smooth_l1_loss(a, b, beta=-1.0)
    for delta in (0.0, -1.0):
        with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values for delta."):
            F.huber_loss(a, b, delta=delta)
    with pytest.raises(RuntimeError):
        with pytest.warns(UserWarning, match="Using a target size"):
            F.huber_loss(tensord.rand(3), tensord.rand(2))


def test_loss_modules_match_pytorch():
    x, t = _data()
    p = (1 / (1 + np.exp(-x))).astype(np.float32)
    w = np.array([0.5, 2.0, 1.0], dtype=np.float32)
    cases = [("BCEWithLogitsLoss", dict(), x), ("BCEWithLogitsLoss", dict(weight=w, pos_weight=w, reduction="sum"), x),
             ("BCELoss", dict(weight=w, reduction="none"), p), ("BCELoss", dict(), p),
             ("SmoothL1Loss", dict(beta=0.5), x), ("SmoothL1Loss", dict(reduction="sum"), x),
             ("HuberLoss", dict(delta=0.5, reduction="none"), x), ("HuberLoss", dict(), x)]
    for name, kw, a in cases:
        tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        dkw = {k: tensord.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        tm, dm = getattr(torch.nn, name)(**tkw), getattr(nn, name)(**dkw)
        assert repr(dm) == repr(tm) == f"{name}()"
        assert [k for k, _ in dm.named_buffers()] == [k for k, _ in tm.named_buffers()], name
        tx, dx = torch.tensor(a, requires_grad=True), tensord.tensor(a, requires_grad=True)
        tl, dl = tm(tx, torch.tensor(t)), dm(dx, tensord.tensor(t))
        tl.sum().backward()
        dl.sum().backward()
        np.testing.assert_allclose(np_of(dl), tl.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert nn.SmoothL1Loss(beta=0.25).beta == 0.25 and nn.HuberLoss(delta=2.0).delta == 2.0
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.BCELoss(None, False).reduction == "sum"
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.BCEWithLogitsLoss(reduce=False).reduction == "none"
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        nn.HuberLoss(reduction="avg")(tensord.zeros(2), tensord.zeros(2))


# ---------------------------------------------------------------- nn.utils

def test_nn_utils_is_importable_both_ways():
    import tensord.nn.utils as utils_module
    from tensord.nn.utils import clip_grad_norm_, clip_grad_value_
    from tensord.nn.utils.clip_grad import clip_grad_norm_ as same
    assert tensord.nn.utils is utils_module and nn.utils.clip_grad_norm_ is clip_grad_norm_ is same
    assert callable(clip_grad_value_)


def _twin_models():
    # Fixed weights: drawn unseeded, one draw in a few hundred gave a bias
    # grad that cancels to 5e-4 from terms of about 6, where the two
    # float32 sums (different orders) differed by 4.8e-7, past atol 1e-7.
    with torch.random.fork_rng():
        torch.manual_seed(20261204)
        tm = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    m = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    m.load_state_dict({k: tensord.from_numpy(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.RandomState(4).randn(6, 4).astype(np.float32)
    (tm(torch.tensor(x)) ** 2).sum().backward()
    (m(tensord.tensor(x)) ** 2).sum().backward()
    return tm, m


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, "inf", -math.inf, 0.5])
@pytest.mark.parametrize("max_norm", [0.1, 1e6])
def test_clip_grad_norm_matches_pytorch(norm_type, max_norm):
    tm, m = _twin_models()
    grads = [p.grad for p in m.parameters()]
    tensord.synchronize()
    before = round_trips()
    total = tensord.nn.utils.clip_grad_norm_(m.parameters(), max_norm, norm_type)
    assert round_trips() == before                               # no value read
    ref = torch.nn.utils.clip_grad_norm_(tm.parameters(), max_norm, norm_type)
    assert isinstance(total, tensord.Tensor) and total.shape == () and total.dtype is tensord.float32
    np.testing.assert_allclose(total.item(), ref.item(), rtol=1e-5, atol=1e-7)   # -inf: the smallest |g|
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        # float32 sums in another order: error relative to the tensor's largest grad
        atol = 1e-6 * float(tp.grad.abs().max())
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=atol, err_msg=name)
    assert all(p.grad is g for p, g in zip(m.parameters(), grads))   # in place


def test_clip_grad_norm_edges():
    a = nn.Parameter(tensord.tensor([3.0, 4.0]))
    b = nn.Parameter(tensord.ones(2))                            # no grad: skipped
    a.grad = tensord.tensor([3.0, 4.0])
    total = tensord.nn.utils.clip_grad_norm_([a, b], 1.0)         # a list
    assert total.item() == 5.0 and b.grad is None
    np.testing.assert_allclose(a.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    total = tensord.nn.utils.clip_grad_norm_(a, 10.0)            # one Tensor; within the bound: unchanged
    np.testing.assert_allclose(total.item(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(a.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    none = tensord.nn.utils.clip_grad_norm_([b], 1.0)
    assert none.shape == () and none.item() == 0.0
    with pytest.raises(ValueError):
        tensord.nn.utils.clip_grad_norm_([a], 1.0, norm_type="fro")     # float('fro'), as PyTorch
    # Non-finite norms: an error (one round trip, grads untouched) when asked, else scaled as PyTorch.
    a.grad = tensord.tensor([math.inf, 1.0])
    tensord.synchronize()
    before = round_trips()
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is "
                                           "non-finite, so it cannot be clipped"):
        tensord.nn.utils.clip_grad_norm_([a], 1.0, error_if_nonfinite=True)
    assert round_trips() == before + 1
    assert a.grad.tolist() == [math.inf, 1.0]
    ta = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    ta.grad = torch.tensor([math.inf, 1.0])
    ref = torch.nn.utils.clip_grad_norm_([ta], 1.0)
    total = tensord.nn.utils.clip_grad_norm_([a], 1.0)
    assert total.item() == ref.item() == math.inf
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())   # nan, 0


def test_clip_grad_value_matches_pytorch():
    tm, m = _twin_models()
    tensord.synchronize()
    before = round_trips()
    assert tensord.nn.utils.clip_grad_value_(m.parameters(), 0.05) is None
    assert round_trips() == before
    torch.nn.utils.clip_grad_value_(tm.parameters(), 0.05)
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-8, err_msg=name)
    assert max(np.abs(p.grad.numpy()).max() for p in m.parameters()) == np.float32(0.05)
    w = nn.Parameter(tensord.tensor([1.0, -2.0]))
    w.grad = tensord.tensor([5.0, -5.0])
    tensord.nn.utils.clip_grad_value_(w, 2)                      # one Tensor, an int bound
    assert w.grad.tolist() == [2.0, -2.0]


def test_older_losses_take_pytorchs_arguments_in_pytorchs_order():
    # nll_loss, cross_entropy, mse_loss and l1_loss take the deprecated
    # size_average/reduce where PyTorch has them, so a positional call means
    # the same thing: here ignore_index=2 in fifth place, and size_average
    # False (a sum, with PyTorch's warning) in third.
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(4, 3)
    t = np.array([0, 2, 1, 2])
    for name in ("nll_loss", "cross_entropy"):
        ours = getattr(F, name)(tensord.tensor(x), tensord.tensor(t), None, None, 2)
        ref = getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(t), None, None, 2)
        np.testing.assert_allclose(ours.item(), ref.item(), rtol=1e-6)
    for name in ("mse_loss", "l1_loss"):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated") as rec:
            ours = getattr(F, name)(tensord.tensor(x), tensord.tensor(x * 0.5), False)
        assert rec[0].filename == __file__
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # PyTorch's own copy of the warning
            ref = getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(x * 0.5), False)
        np.testing.assert_allclose(ours.item(), ref.item(), rtol=1e-6)
