"""Gradient clipping, as ``torch.nn.utils.clip_grad`` of PyTorch 1.13.

Both functions change ``p.grad`` in place with ops streamed to the daemon
under no_grad; ``clip_grad_norm_`` returns the total norm as a 0-dim tensor
and needs no round trip unless ``error_if_nonfinite=True``.
"""
import math

from ... import _C
from .._util import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_"]

Tensor = _C.Tensor
_call = _C.call_any


def _grads_of(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients of ``parameters`` in place so that their total
    norm is at most ``max_norm``, as PyTorch 1.13's clip_grad_norm_.

    The total norm is the ``norm_type`` norm of the per-grad norms (the
    norm of all grads concatenated; ``inf`` for the largest ``|g|``). Every
    grad is multiplied by ``clamp(max_norm / (total_norm + 1e-6), max=1.0)``:
    an op in the daemon, with no round trip and no Python branch on the
    value (grads already within the bound are multiplied by 1).

    Args:
        parameters: a Tensor or an iterable of Tensors; those whose
            ``.grad`` is None are skipped.
        max_norm: a number, the largest total norm kept.
        norm_type: a number (``float('inf')`` included), or a string
            float() reads ("inf", "2"); ValueError for another (as PyTorch's
            float(norm_type)).
        error_if_nonfinite: when True, reads the total norm (a sync point:
            one round trip) and raises RuntimeError, leaving the grads
            unchanged, if it is NaN or infinite. When False, non-finite norms
            scale the grads anyway (they become NaN or 0), as PyTorch.

    Returns the total norm (before clipping) as a 0-dim tensor of the grads'
    dtype on their device; ``tensord.tensor(0.0)`` when no parameter has a grad.
    """
    grads = _grads_of(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if len(grads) == 0:
        return _call("full", [], 0.0)
    device = grads[0].device
    with no_grad():
        if norm_type == math.inf:
            norms = [g.detach().abs().max().to(device) for g in grads]
            total_norm = norms[0] if len(norms) == 1 else _call("stack", norms).max()
        else:
            norms = [_call("norm", g.detach(), norm_type).to(device) for g in grads]
            total_norm = _call("norm", _call("stack", norms), norm_type)
        if error_if_nonfinite and not bool(_call("isfinite", total_norm).item()):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot "
                "be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
                "`error_if_nonfinite=False`")
        clip_coef = max_norm / (total_norm + 1e-6)
        clip_coef_clamped = _call("clamp", clip_coef, max=1.0)
        for g in grads:
            g.detach().mul_(clip_coef_clamped.to(g.device))
    return total_norm


def clip_grad_value_(parameters, clip_value):
    """Clamps the gradients of ``parameters`` in place into
    ``[-clip_value, clip_value]``, as PyTorch 1.13's clip_grad_value_.

    ``parameters``: a Tensor or an iterable of Tensors (those whose ``.grad``
    is None are skipped); ``clip_value``: a number (converted with float()).
    One clamp_ op per grad, streamed (no round trip). Returns None.
    """
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads_of(parameters):
            g.detach().clamp_(min=-clip_value, max=clip_value)
