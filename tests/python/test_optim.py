"""tensord.optim: SGD / Adam / AdamW steps equal PyTorch 1.13's for the same
parameters and gradients (where python3-torch is installed), state lives in
the daemon, zero_grad, param groups, state_dict round trips, argument checks."""
import numpy as np
import pytest

import tensord
import tensord.nn as nn
from tensord import optim

pytestmark = pytest.mark.usefixtures("session")


def np_of(t):
    return t.detach().numpy()


def run_both(torch, make_torch, make_ours, steps=4, dtype=np.float32, seed=0):
    """Applies the same gradients for `steps` steps to two parameters in both libraries."""
    rng = np.random.RandomState(seed)
    init = [rng.randn(3, 4).astype(dtype), rng.randn(5).astype(dtype)]
    grads = [[rng.randn(*a.shape).astype(dtype) for a in init] for _ in range(steps)]
    tparams = [torch.tensor(a, requires_grad=True) for a in init]
    params = [nn.Parameter(tensord.tensor(a)) for a in init]
    topt, opt = make_torch(tparams), make_ours(params)
    for s in range(steps):
        for tp, p, g in zip(tparams, params, grads[s]):
            tp.grad = torch.tensor(g)
            p.grad = tensord.tensor(g)
        topt.step()
        opt.step()
        for tp, p in zip(tparams, params):
            np.testing.assert_allclose(np_of(p), tp.detach().numpy(), rtol=1e-6, atol=1e-7,
                                       err_msg=f"step {s + 1}")
    return topt, opt, tparams, params


@pytest.mark.parametrize("kw", [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.1, momentum=0.8, nesterov=True),
    dict(lr=0.1, momentum=0.9, weight_decay=0.01),
    dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05, maximize=True),
    dict(lr=0.1, weight_decay=0.1),
])
def test_sgd_matches_pytorch(kw):
    torch = pytest.importorskip("torch")
    topt, opt, _, params = run_both(torch, lambda p: torch.optim.SGD(p, **kw), lambda p: optim.SGD(p, **kw))
    if kw.get("momentum"):
        buf = opt.state[params[0]]["momentum_buffer"]
        assert isinstance(buf, tensord.Tensor) and not buf.is_meta      # state is a daemon tensor
        np.testing.assert_allclose(np_of(buf), topt.state[topt.param_groups[0]["params"][0]]["momentum_buffer"]
                                   .numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kw", [
    dict(), dict(lr=0.01, betas=(0.8, 0.9)), dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, amsgrad=True),
    dict(lr=0.02, eps=1e-3, maximize=True), dict(lr=0.01, weight_decay=0.05, amsgrad=True),
])
def test_adam_matches_pytorch(kw):
    torch = pytest.importorskip("torch")
    topt, opt, tparams, params = run_both(torch, lambda p: torch.optim.Adam(p, **kw), lambda p: optim.Adam(p, **kw))
    st, ts = opt.state[params[1]], topt.state[tparams[1]]
    assert st["step"] == 4 and float(ts["step"]) == 4
    np.testing.assert_allclose(np_of(st["exp_avg"]), ts["exp_avg"].numpy(), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np_of(st["exp_avg_sq"]), ts["exp_avg_sq"].numpy(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.01, weight_decay=0.3), dict(lr=0.01, amsgrad=True)])
def test_adamw_matches_pytorch(kw):
    torch = pytest.importorskip("torch")
    run_both(torch, lambda p: torch.optim.AdamW(p, **kw), lambda p: optim.AdamW(p, **kw))


def test_adam_float64_matches_pytorch():
    torch = pytest.importorskip("torch")
    run_both(torch, lambda p: torch.optim.Adam(p, lr=0.1), lambda p: optim.Adam(p, lr=0.1), dtype=np.float64)


def test_training_steps_through_backward_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(1)
    tm = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    m.load_state_dict({k: tensord.from_numpy(v.numpy()) for k, v in tm.state_dict().items()})
    topt = torch.optim.Adam(tm.parameters(), lr=0.01)
    opt = optim.Adam(m.parameters(), lr=0.01)
    for _ in range(5):
        x = rng.randn(10, 6).astype(np.float32)
        y = rng.randint(0, 3, size=10)
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        topt.step()
        opt.zero_grad()
        nn.functional.cross_entropy(m(tensord.from_numpy(x)), tensord.from_numpy(y)).backward()
        opt.step()
    for k, p in m.named_parameters():
        np.testing.assert_allclose(np_of(p), dict(tm.named_parameters())[k].detach().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=k)


def test_params_without_grad_are_skipped_and_zero_grad():
    a = nn.Parameter(tensord.ones(2))
    b = nn.Parameter(tensord.ones(2))
    opt = optim.SGD([a, b], lr=0.5)
    a.grad = tensord.tensor([1.0, 2.0])
    opt.step()
    assert np_of(a).tolist() == [0.5, 0.0] and np_of(b).tolist() == [1.0, 1.0]
    assert b not in opt.state
    g = a.grad
    opt.zero_grad(set_to_none=False)                # PyTorch 1.13's default
    assert a.grad is g and np_of(a.grad).tolist() == [0.0, 0.0] and b.grad is None
    opt.zero_grad()                                 # tensord's default, as PyTorch 2.0: set_to_none=True
    assert a.grad is None
    # A grad that requires grad (a leaf, as create_graph can leave) stops
    # requiring it when zeroed in place, as in PyTorch.
    q = tensord.nn.Parameter(tensord.zeros(2))
    q.grad = tensord.ones(2).requires_grad_()
    optim.SGD([q], lr=1.0).zero_grad(set_to_none=False)
    assert not q.grad.requires_grad and q.grad.tolist() == [0.0, 0.0]


def test_training_goes_on_after_a_step_whose_forward_failed(session):
    # An op that the data makes fail (an index out of range) fails that
    # step's streamed backward, whose error stays in the .grad tensors. The
    # error is raised once (here by loss.item()); the default zero_grad()
    # drops the grads, so the next steps train as usual.
    tensord.manual_seed(0)
    m = tensord.nn.Linear(3, 2)
    opt = optim.SGD(m.parameters(), lr=0.1)
    x = tensord.randn(4, 3)
    with pytest.raises(IndexError, match="index 10 is out of bounds"):
        loss = m(x[tensord.tensor([0, 1, 2, 10])]).sum()
        loss.backward()
        opt.step()
        loss.item()
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > losses[1] > losses[2]


def test_param_groups_and_closure():
    a = nn.Parameter(tensord.ones(1))
    b = nn.Parameter(tensord.ones(1))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.1}], lr=1.0, momentum=0.0)
    assert [g["lr"] for g in opt.param_groups] == [1.0, 0.1]
    assert opt.param_groups[1]["params"][0] is b

    def closure():
        opt.zero_grad()
        loss = (a * 2 + b * 3).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert loss.item() == 5.0
    assert np_of(a).tolist() == [-1.0] and np_of(b).tolist() == pytest.approx([0.7])
    c = nn.Parameter(tensord.ones(1))
    opt.add_param_group({"params": [c], "lr": 0.01})
    assert opt.param_groups[2]["momentum"] == 0.0
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    assert "Parameter Group 0" in repr(opt) and "lr: 0.1" in repr(opt)


def test_state_dict_round_trip_continues_identically():
    rng = np.random.RandomState(2)
    w0 = rng.randn(4).astype(np.float32)
    grads = [rng.randn(4).astype(np.float32) for _ in range(6)]

    def make():
        p = nn.Parameter(tensord.tensor(w0))
        return p, optim.Adam([p], lr=0.05, amsgrad=True)
    p1, o1 = make()
    for g in grads:
        p1.grad = tensord.tensor(g)
        o1.step()
    p2, o2 = make()
    for g in grads[:3]:
        p2.grad = tensord.tensor(g)
        o2.step()
    sd = o2.state_dict()
    assert sd["param_groups"][0]["params"] == [0] and sd["state"][0]["step"] == 3
    assert sd["param_groups"][0]["amsgrad"] is True
    # Resume in a fresh optimizer over a parameter with the same values.
    p3 = nn.Parameter(p2.detach().clone())
    o3 = optim.Adam([p3], lr=1.0)
    o3.load_state_dict(sd)
    assert o3.param_groups[0]["lr"] == 0.05 and o3.param_groups[0]["params"][0] is p3
    for g in grads[3:]:
        p3.grad = tensord.tensor(g)
        o3.step()
    np.testing.assert_array_equal(np_of(p3), np_of(p1))
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.Adam([{"params": [p3]}, {"params": [p1]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.Adam([p3, p1]).load_state_dict(sd)


def test_argument_checks():
    p = nn.Parameter(tensord.ones(1))
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        optim.SGD([p])
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon value"):
        optim.AdamW([p], eps=-1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.Adam(p)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.Adam([1.0])
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)


def test_adam_step_is_one_daemon_op_per_contiguous_parameter():
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(3)
    a, b, ga, gb = (rng.randn(4, 3).astype(np.float32) for _ in range(4))
    # The second parameter is transposed and its grad is not: their layouts
    # differ, so it is updated op by op; the first with one _fused_adam_.
    params = [nn.Parameter(tensord.tensor(a)), nn.Parameter(tensord.tensor(b.T.copy()).t())]
    tparams = [torch.tensor(a, requires_grad=True), torch.tensor(b.T.copy()).t().requires_grad_()]
    assert not params[1].is_contiguous() and not tparams[1].is_contiguous()
    params[0].grad, tparams[0].grad = tensord.tensor(ga), torch.tensor(ga)
    params[1].grad, tparams[1].grad = tensord.tensor(gb), torch.tensor(gb)
    opt, topt = optim.AdamW(params, lr=0.1, weight_decay=0.1), torch.optim.AdamW(tparams, lr=0.1, weight_decay=0.1)
    opt.step()                                       # the first step also creates the moments
    before = tensord.stats()["ops_issued"]
    opt.step()
    issued = tensord.stats()["ops_issued"] - before
    assert issued == 1 + 9, issued                   # one fused op; AdamW op by op is mul_ + 8 ops
    topt.step()
    topt.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(np_of(p), tp.detach().numpy(), rtol=1e-6, atol=1e-7)
