"""``tensord.optim.Adam`` and ``AdamW``, as PyTorch 1.13's."""
import math

from .. import _C
from ..nn._util import no_grad
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


def _check(lr, eps, betas, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _adam_step(opt, decoupled):
    for group in opt.param_groups:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            state = opt.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = _C.call_any("zeros_like", p)
                state["exp_avg_sq"] = _C.call_any("zeros_like", p)
                if amsgrad:
                    state["max_exp_avg_sq"] = _C.call_any("zeros_like", p)
            step = state["step"]
            step = (step.item() if hasattr(step, "item") else step) + 1
            state["step"] = step
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            if not amsgrad:
                # The whole update in one daemon op (same formula), when the
                # four tensors share one dense float32/float64 layout; its meta
                # function refuses anything else at once, on this side, before
                # anything is sent or written: then op by op.
                try:
                    _C.call_any("_fused_adam_", p, g, exp_avg, exp_avg_sq, lr=float(lr), beta1=float(beta1),
                                beta2=float(beta2), weight_decay=float(weight_decay), eps=float(eps), step=step,
                                maximize=bool(maximize), decoupled_weight_decay=decoupled)
                    continue
                except RuntimeError:
                    pass
            if maximize:
                g = -g
            if weight_decay != 0:
                if decoupled:
                    p.mul_(1 - lr * weight_decay)
                else:
                    g = g.add(p, alpha=weight_decay)
            exp_avg.mul_(beta1).add_(g, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = lr / bias_correction1
            bc2_sqrt = math.sqrt(bias_correction2)
            if amsgrad:
                m = state["max_exp_avg_sq"]
                m.copy_(_C.call_any("maximum", m, exp_avg_sq))
                denom = m.sqrt() / bc2_sqrt + eps
            else:
                denom = exp_avg_sq.sqrt() / bc2_sqrt + eps
            p.addcdiv_(exp_avg, denom, value=-step_size)


class Adam(Optimizer):
    """Adam, with PyTorch 1.13's update for each parameter p with gradient g
    (negated when ``maximize``), at step t = 1, 2, ...::

        g = g + weight_decay * p                          (if weight_decay != 0)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)                             (amsgrad; v_max used below instead of v)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    State per parameter: ``step`` (a Python int), ``exp_avg`` (m),
    ``exp_avg_sq`` (v) and ``max_exp_avg_sq`` with amsgrad — daemon tensors
    updated in place under no_grad. Parameters whose grad is None are skipped.

    Args: params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    amsgrad=False, maximize=False. ValueError for a negative lr, eps or
    weight_decay, or a beta outside [0, 1).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One update of every parameter that has a grad; returns ``closure()``'s loss or None."""
        loss = self._closure_loss(closure)
        with no_grad():
            _adam_step(self, decoupled=False)
        return loss


class AdamW(Optimizer):
    """Adam with decoupled weight decay (PyTorch 1.13's AdamW): first
    ``p = p * (1 - lr * weight_decay)``, then Adam's update without weight
    decay in the gradient. Same state and arguments as Adam, but
    ``weight_decay`` defaults to 1e-2."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One update of every parameter that has a grad; returns ``closure()``'s loss or None."""
        loss = self._closure_loss(closure)
        with no_grad():
            _adam_step(self, decoupled=True)
        return loss
