"""tensord.autograd: gradients computed by the daemon.

The graph is recorded in the daemon as ops run on tensors that require grad;
``backward()`` and ``grad()`` are one blocking request each (plus call-backs
for user-defined ``Function``s). Gradients are tensors in the daemon like any
other. The client predicts ``requires_grad``/``grad_fn`` locally with the same
rules, so they answer without a round trip.

    x = tensord.randn(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()                      # x.grad == 2 * x
    g, = tensord.autograd.grad((x.exp()).sum(), x)
"""
from .. import _C
from .function import Function, FunctionCtx, _run_engine
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                        set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["backward", "grad", "Function", "FunctionCtx", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_inference_mode_enabled",
           "is_grad_enabled", "gradcheck", "gradgradcheck", "GradcheckError"]

Tensor = _C.Tensor


def _tensors(x, what):
    if isinstance(x, Tensor):
        return [x]
    if x is None:
        return []
    try:
        items = list(x)
    except TypeError:
        raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, not {type(x).__name__}") from None
    for t in items:
        if not isinstance(t, Tensor):
            raise TypeError(f"{what} must hold Tensors, not {type(t).__name__}")
    return items


def _grads(g, n, what):
    if g is None:
        return [None] * n
    if isinstance(g, Tensor):
        g = [g]
    g = list(g)
    if len(g) != n:
        raise RuntimeError(f"{what} should be a sequence of length {n} (one per output), got {len(g)}")
    for t in g:
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{what} must hold Tensors or None, not {type(t).__name__}")
    return g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Computes the gradients of ``tensors`` and accumulates them into the
    ``.grad`` of the graph's leaves (only of ``inputs`` when given).

    Args:
        tensors: a Tensor or a sequence of Tensors to differentiate.
        grad_tensors: the gradient with respect to each tensor (None: ones, only
            for tensors of one element).
        retain_graph: keep the graph for another backward (default: create_graph).
        create_graph: record the backward pass itself (double backward); the
            resulting ``.grad`` tensors require grad.
        inputs: tensors to accumulate into instead of every leaf.

    Raises RuntimeError when a tensor does not require grad ("element 0 of
    tensors does not require grad and does not have a grad_fn"), for an
    implicit gradient of a tensor with several elements ("grad can be
    implicitly created only for scalar outputs"), on a second backward through
    a freed graph, when a tensor saved for backward was modified in place; an
    exception raised by a Function's backward is re-raised as is.
    """
    roots = _tensors(tensors, "tensors")
    gs = _grads(grad_tensors, len(roots), "grad_tensors")
    ins = None if inputs is None else _tensors(inputs, "inputs")
    if ins is not None and not ins:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    _run_engine(_C._backward, roots, gs, retain_graph, bool(create_graph), ins)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of ``outputs`` with respect to ``inputs``, as a tuple with one
    entry per input; nothing is accumulated into ``.grad``.

    Args:
        outputs: a Tensor or a sequence of Tensors.
        inputs: a Tensor or a sequence of Tensors (each must require grad).
        grad_outputs: the gradient with respect to each output (None: ones, only
            for outputs of one element).
        retain_graph: keep the graph (default: create_graph).
        create_graph: record the computation of the gradients, so that the
            results require grad and can be differentiated again.
        allow_unused: give None for inputs the outputs do not depend on instead
            of raising "One of the differentiated Tensors appears to not have
            been used in the graph. Set allow_unused=True if this is the desired
            behavior."

    Raises RuntimeError as ``backward`` does.
    """
    outs = _tensors(outputs, "outputs")
    ins = _tensors(inputs, "inputs")
    gs = _grads(grad_outputs, len(outs), "grad_outputs")
    return _run_engine(_C._grad, outs, ins, gs, retain_graph, bool(create_graph), bool(allow_unused))
