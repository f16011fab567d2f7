"""Small helpers shared by tensord.nn and tensord.optim (not public)."""
import contextlib


def tensord_module():
    """The ``tensord`` package (imported lazily: nn is imported while tensord initialises)."""
    import tensord

    return tensord


def no_grad():
    """``tensord.no_grad()``: a context in which ops record no autograd history."""
    td = tensord_module()
    ng = getattr(td, "no_grad", None)
    return ng() if ng is not None else contextlib.nullcontext()


def detach(t):
    """``t.detach()``: a view sharing data with ``t`` that does not require grad."""
    return t.detach() if hasattr(t, "detach") else t


def zero_grads(params, set_to_none):
    """The work of Module.zero_grad and Optimizer.zero_grad for `params` (an
    iterable of Parameters): ``p.grad = None``, or with ``set_to_none``
    False the grad zeroed in place, as PyTorch 1.13 does (a grad that has
    a grad_fn is detached first, one that requires grad stops requiring
    it). Parameters without a grad are left alone."""
    for p in params:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if g.grad_fn is not None:
            g = detach(g)
            p.grad = g
        elif g.requires_grad:
            g.requires_grad_(False)
        with no_grad():
            g.zero_()
