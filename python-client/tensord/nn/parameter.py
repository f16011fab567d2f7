"""``tensord.nn.Parameter``: a Tensor that a Module registers as a parameter."""
from .. import _C
from ._util import detach, tensord_module

__all__ = ["Parameter"]

Tensor = _C.Tensor


class Parameter(Tensor):
    """A tensor that is a module parameter, as ``torch.nn.Parameter``.

    ``Parameter(data=None, requires_grad=True)``: a leaf tensor sharing
    ``data``'s storage (the same daemon tensor; no copy), with its own autograd
    identity: it has no history even when ``data`` had one, and requires grad
    unless ``requires_grad=False``. ``data`` defaults to an empty float32
    tensor of shape [0] (on the current default device). Assigning a
    Parameter as an attribute of a Module registers it in ``parameters()``.

    Results of ops on a Parameter are plain Tensors. ``repr`` starts with
    ``Parameter containing:``. Raises TypeError when ``data`` is not a
    tensord.Tensor.
    """

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = tensord_module().empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a tensord.Tensor, got {type(data).__name__}")
        Tensor.__init__(self, detach(data))
        if requires_grad:
            if not (self.dtype.is_floating_point):
                raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        raise TypeError("tensord.nn.Parameter cannot be pickled: its data lives in a daemon; "
                        "use tensord.save(module.state_dict(), path)")

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = Parameter(self.clone(), self.requires_grad)
        memo[id(self)] = out
        return out
