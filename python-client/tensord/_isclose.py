"""``tensord.isclose`` / ``tensord.allclose`` and their Tensor methods, as
PyTorch 1.13's (aten's isclose is a composite of eq, isnan, abs, sub, mul
and le; so is this one, over ops of the table).

isclose streams like any op (no round trip); allclose reads one bool back,
so it is a sync point.
"""
from . import _C

__all__ = ["isclose", "allclose", "install"]

Tensor = _C.Tensor
_call = _C.call


def _check_tensor(name, position, argname, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"{name}(): argument '{argname}' (position {position}) must be Tensor, "
                        f"not {type(value).__name__}")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (or exactly
    equal), as PyTorch 1.13's torch.isclose.

    ``input`` and ``other`` are Tensors of the same dtype whose shapes
    broadcast; the result is a bool tensor of the broadcast shape. NaNs are
    never close unless ``equal_nan=True`` (then NaN is close to NaN); an
    infinity is close only to the same infinity. For bool and integer
    inputs ``other`` is converted to float32 first, so the difference is
    taken in float32 and does not wrap (as PyTorch 1.13, whose default
    dtype is float32). ``rtol == atol == 0`` is exact equality. No round
    trip: the result is streamed like any op (and works on meta tensors).

    Raises TypeError when either argument is not a Tensor, RuntimeError when
    the dtypes differ ("Float did not match Double"), when rtol or atol is
    negative, or when the shapes do not broadcast.
    """
    _check_tensor("isclose", 1, "input", input)
    _check_tensor("isclose", 2, "other", other)
    if input.dtype != other.dtype:
        raise RuntimeError(f"{input.dtype._c10} did not match {other.dtype._c10}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = _call("eq", input, other)
    floating = input.dtype.is_floating_point
    if equal_nan and floating:
        close = _call("logical_or", close, _call("logical_and", _call("isnan", input), _call("isnan", other)))
    if rtol == 0 and atol == 0:
        return close
    a, b = input, other
    if not floating:
        b = b.float()                      # PyTorch: other.to(default dtype)
        if a.dtype._name == "bool":
            a = a.float()                  # bool - float is refused; the values are 0 and 1
    allowed = _call("abs", b * rtol) + atol
    actual = _call("abs", a - b)
    within = actual <= allowed
    if floating:
        within = _call("logical_and", _call("isfinite", actual), within)
    return _call("logical_or", close, within)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``isclose(input, other, rtol, atol, equal_nan).all()`` as a Python bool,
    as PyTorch 1.13's torch.allclose: True when every element of the
    broadcast pair is close.

    A sync point (one round trip to read the answer). Raises what isclose
    raises (TypeError, RuntimeError for differing dtypes, negative
    tolerances or shapes that do not broadcast) and, for meta tensors,
    the error of reading a meta tensor's value (they hold no data).
    """
    _check_tensor("allclose", 1, "input", input)
    _check_tensor("allclose", 2, "other", other)
    return bool(_call("all", isclose(input, other, rtol, atol, equal_nan)).item())


def install(module_dict, tensor_cls):
    """Adds ``isclose`` and ``allclose`` to the tensord namespace and as
    Tensor methods (``a.isclose(b)``, ``a.allclose(b)``)."""
    for fn in (isclose, allclose):
        fn.__module__ = "tensord"
        module_dict[fn.__name__] = fn

    def isclose_method(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return isclose(self, other, rtol, atol, equal_nan)

    def allclose_method(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return allclose(self, other, rtol, atol, equal_nan)

    for method, fn in ((isclose_method, isclose), (allclose_method, allclose)):
        method.__name__ = fn.__name__
        method.__qualname__ = "Tensor." + fn.__name__
        method.__doc__ = fn.__doc__
        setattr(tensor_cls, fn.__name__, method)
