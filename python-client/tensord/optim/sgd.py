"""``tensord.optim.SGD``: stochastic gradient descent with momentum, as PyTorch 1.13's."""
from ..nn._util import no_grad
from .optimizer import Optimizer, required

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, with PyTorch 1.13's update for each parameter p
    with gradient g (negated when ``maximize``)::

        g = g + weight_decay * p                       (if weight_decay != 0)
        buf = g  (first step)  or  buf = momentum * buf + (1 - dampening) * g
        g = g + momentum * buf  (nesterov)  or  g = buf    (if momentum != 0)
        p = p - lr * g

    All of it runs as in-place ops in the daemon under no_grad; ``buf`` is
    ``state[p]["momentum_buffer"]`` (a daemon tensor; None when momentum is 0).
    Parameters whose ``grad`` is None are skipped.

    Args: params, lr (required), momentum=0, dampening=0, weight_decay=0,
    nesterov=False, maximize=False. ValueError for a negative lr, momentum or
    weight_decay, or nesterov without momentum or with dampening.
    """

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One update of every parameter that has a grad; returns ``closure()``'s
        loss (evaluated with grad enabled first) or None."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
                weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if maximize:
                        g = -g
                    if weight_decay != 0:
                        g = g.add(p, alpha=weight_decay)
                    state = self.state[p]
                    if momentum != 0:
                        buf = state.get("momentum_buffer")
                        if buf is None:
                            buf = g.clone()
                            state["momentum_buffer"] = buf
                        else:
                            buf.mul_(momentum).add_(g, alpha=1 - dampening)
                        g = g.add(buf, alpha=momentum) if nesterov else buf
                    else:
                        state["momentum_buffer"] = None
                    p.add_(g, alpha=-lr)
        return loss
