"""Meta-mode autograd never disagrees with the daemon.

On meta the client runs backward itself over its mirror of the graph, and
predicts from the saved-reads rules (tensord/meta/ops.inl) what the
daemon's derivative formulas would read. For every differentiable op with an
OpInfo sample (built as in test_gradcheck_ops.py), the same program runs on
the daemon and on meta, and must end the same way (error or not, with the
same message):

- forward, backward without retain_graph, then a second backward (which fails
  iff some node on the path reads a saved tensor), once with every floating
  differentiable input requiring grad and once per input alone (formulas read
  different saved tensors for different inputs);
- backward with retain_graph=True, then a second one (works on both);
- autograd.grad with an extra input the graph does not reach (fails without
  allow_unused; None for it with allow_unused=True).

The daemons the tests start also check each formula run against the table
(TENSORD_CHECK_SAVED_READS=1, conftest.py). Hand-written cases below cover
in-place modification of saved tensors (the version counter), retain_grad,
backward(inputs=...) and grads of non-leaf tensors.
"""
import re

import numpy as np
import pytest

import tensord
from tensord import _C

from test_gradcheck_ops import CASES, ENTRIES, _inplace

_PREFIX = re.compile(r"^(backward|grad)( \(at [^)]*\))?: ")


def _message(e):
    """The error's message without the call-site prefix the daemon's errors carry."""
    return _PREFIX.sub("", str(e))


def _outcome(fn):
    try:
        fn()
        return "ok"
    except (RuntimeError, NotImplementedError) as e:
        return f"{type(e).__name__}: {_message(e)}"


def _tensor(arr, device, requires_grad=False):
    if device == "meta":
        t = tensord.empty(list(arr.shape), dtype=getattr(tensord, arr.dtype.name), device="meta")
    else:
        t = tensord.from_numpy(arr)
    return t.requires_grad_() if requires_grad else t


def _build(tmpl, inputs, device):
    kind, v = tmpl
    if kind == "slot":
        return inputs[v]
    if kind == "const":
        return _tensor(v, device)
    if kind == "list":
        return [_build(t, inputs, device) for t in v]
    if kind == "none":
        return None
    return v


def _forward(name, pos, kw, slots, device, grad_slots):
    """The op on `device`; slots in `grad_slots` require grad. Returns the
    inputs and the outputs that require grad (None when none do)."""
    inputs = [_tensor(a, device, i in grad_slots) for i, a in enumerate(slots)]
    args = [_build(t, inputs, device) for t in pos]
    kwargs = {k: _build(t, inputs, device) for k, t in kw.items()}
    if _inplace(ENTRIES[name]):
        args[0] = args[0].clone()
    outs = _C.call_any(name, *args, **kwargs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    outs = [o for o in outs if o.requires_grad]
    return inputs, outs or None


def _script(name, pos, kw, slots, device, grad_slots):
    """What the test observes on one device, as a list of outcomes."""
    try:
        inputs, outs = _forward(name, pos, kw, slots, device, grad_slots)
    except NotImplementedError:
        return None  # data-dependent on meta: nothing to compare
    if outs is None:
        return "no output requires grad"
    seen = []

    def ones():
        return [tensord.ones_like(o) for o in outs]

    def backward(**kw):
        tensord.autograd.backward(outs, ones(), **kw)

    seen.append(("first backward", _outcome(backward)))
    seen.append(("second backward", _outcome(backward)))
    seen.append(("leaf grads", [t.grad is not None for t in inputs]))
    # retain_graph keeps the graph for a second pass.
    inputs, outs = _forward(name, pos, kw, slots, device, grad_slots)
    seen.append(("retained", _outcome(lambda: backward(retain_graph=True))))
    seen.append(("after retained", _outcome(backward)))
    # grad() with an input the graph does not reach.
    inputs, outs = _forward(name, pos, kw, slots, device, grad_slots)
    unused = _tensor(np.zeros(2), device, True)
    used = [t for t in inputs if t.requires_grad]
    seen.append(("unused input", _outcome(
        lambda: tensord.autograd.grad(outs, used + [unused], ones(), retain_graph=True))))
    try:
        gs = tensord.autograd.grad(outs, used + [unused], ones(), allow_unused=True)
        seen.append(("allow_unused", [g is not None for g in gs]))
    except RuntimeError as e:
        seen.append(("allow_unused", _message(e)))
    return seen


def _subset_cases():
    out = []
    for p in CASES:
        name, pos, kw, slots = p.values
        out.append(pytest.param(name, pos, kw, slots, tuple(range(len(slots))), id=f"{p.id}-all"))
        if len(slots) > 1:
            for i in range(len(slots)):
                out.append(pytest.param(name, pos, kw, slots, (i,), id=f"{p.id}-only{i}"))
    return out


@pytest.mark.parametrize("name,pos,kw,slots,grad_slots", _subset_cases())
def test_meta_backward_matches_the_daemon(session, name, pos, kw, slots, grad_slots):
    real = _script(name, pos, kw, slots, "cpu", grad_slots)
    meta = _script(name, pos, kw, slots, "meta", grad_slots)
    if meta is None:
        pytest.skip(f"{name}: data-dependent, cannot run on meta")
    assert meta == real


# ---- hand-written programs: each runs on the daemon and on meta ----------------

def _leaf(device, *shape):
    return tensord.ones(*shape, dtype=tensord.float32, device=device).requires_grad_()


def _inplace_after_exp(device):
    x = _leaf(device, 3)
    y = x.exp()
    loss = y.sum()
    y.add_(1)                       # ExpBackward0 saved y (its result): now at version 1
    loss.backward()


def _inplace_on_a_view_of_a_saved_input(device):
    x = _leaf(device, 2, 3)
    w = tensord.ones(2, 3, device=device)
    loss = (x * w).sum()            # MulBackward0 saved w for x's gradient
    w[0].mul_(2)                    # a view shares w's version counter
    loss.backward()


def _inplace_on_an_unread_input(device):
    x = _leaf(device, 3)
    w = tensord.ones(3, device=device)
    loss = (x + w).sum()            # add reads nothing
    w.add_(1)
    loss.backward()
    return x.grad is not None


def _inplace_on_self_of_mul_(device):
    x = _leaf(device, 3)
    y = x * 1.0
    w = tensord.ones(3, device=device)
    y.mul_(w)                       # saves y as it was (a copy): later writes to y do not matter to it
    loss = y.sum()
    return _outcome(loss.backward)


def _second_backward_through_a_chain(device):
    x = _leaf(device, 4)
    loss = ((x + 1).sum(0) * 3).sum()
    loss.backward()
    return _outcome(loss.backward)


def _second_backward_reaching_a_reading_node(device):
    x = _leaf(device, 4)
    loss = (x.sigmoid() + 1).sum()
    loss.backward()
    return _outcome(loss.backward)


def _retain_grad(device):
    x = _leaf(device, 2, 3)
    y = x * 2
    y.retain_grad()
    z = y.sum(1)
    z.retain_grad()
    z.sum().backward()
    return [t.grad is not None and tuple(t.grad.shape) for t in (x, y, z)]


def _backward_inputs(device):
    x, w = _leaf(device, 3), _leaf(device, 3)
    y = x * w
    loss = y.sum()
    loss.backward(inputs=[w], retain_graph=True)
    first = [t.grad is not None for t in (x, w)]
    loss.backward(inputs=[y])       # a non-leaf input gets a .grad; nothing beyond it runs
    return first, [t.grad is not None for t in (x, w, y)]


def _backward_inputs_unused(device):
    x, u = _leaf(device, 3), _leaf(device, 3)
    (x * 2).sum().backward(inputs=[x, u])
    return [t.grad is not None for t in (x, u)]


def _grad_of_a_non_leaf(device):
    x = _leaf(device, 3)
    y = x.exp()
    loss = (y * y).sum()
    (gy,) = tensord.autograd.grad(loss, [y], retain_graph=True)
    gx, gy2 = tensord.autograd.grad(loss, [x, y])
    return tuple(gy.shape), tuple(gx.shape), tuple(gy2.shape), x.grad is None


def _grad_of_an_unreached_piece(device):
    x = _leaf(device, 4)
    a, b = x.split(2)
    return tensord.autograd.grad(a.sum(), [b])   # b's output of SplitBackward got no gradient


def _grad_unused_allowed(device):
    x, u = _leaf(device, 3), _leaf(device, 2)
    gx, gu = tensord.autograd.grad((x * x).sum(), [x, u], allow_unused=True)
    return gx is not None, gu is None


def _grad_then_backward(device):
    x = _leaf(device, 3)
    loss = (x * x).sum()
    tensord.autograd.grad(loss, [x])        # frees the graph
    loss.backward()


def _two_roots_sharing_a_node(device):
    x = _leaf(device, 3)
    y = x.tanh()
    a, b = (y * 2).sum(), y.sum()
    a.backward()                            # frees y's TanhBackward0 (reads its result)
    return _outcome(b.backward)


PROGRAMS = [
    _inplace_after_exp, _inplace_on_a_view_of_a_saved_input, _inplace_on_an_unread_input,
    _inplace_on_self_of_mul_, _second_backward_through_a_chain, _second_backward_reaching_a_reading_node,
    _retain_grad, _backward_inputs, _backward_inputs_unused, _grad_of_a_non_leaf, _grad_of_an_unreached_piece,
    _grad_unused_allowed, _grad_then_backward, _two_roots_sharing_a_node,
]


def _run(program, device):
    try:
        return ("returned", program(device))
    except (RuntimeError, NotImplementedError) as e:
        return ("raised", type(e).__name__, _message(e))


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__.strip("_") for p in PROGRAMS])
def test_meta_program_matches_the_daemon(session, program):
    assert _run(program, "meta") == _run(program, "cpu")


def test_meta_reports_the_version_error_as_pytorch():
    kind, name, msg = _run(_inplace_after_exp, "meta")
    assert (kind, name) == ("raised", "RuntimeError")
    assert msg.startswith("one of the variables needed for gradient computation has been modified by an inplace "
                          "operation: [torch.FloatTensor [3]], which is output 0 of ExpBackward0, is at version 1; "
                          "expected version 0 instead.")
    kind, name, msg = _run(_inplace_on_a_view_of_a_saved_input, "meta")
    assert "[torch.FloatTensor [2, 3]] is at version 1; expected version 0" in msg


def test_meta_second_backward_and_unused_inputs():
    with tensord.device("meta"):
        x = tensord.ones(3, requires_grad=True)
        loss = (x * x).sum()
        loss.backward()
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            loss.backward()
        loss = (x + x).sum()        # add and sum read nothing: a second backward works
        loss.backward()
        loss.backward()
        u = tensord.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            tensord.autograd.grad((x * 2).sum(), [x, u])
        gx, gu = tensord.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
        assert gx.shape == (3,) and gx.device.type == "meta" and gu is None
