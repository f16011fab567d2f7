"""PyTorch's Python-level ``torch.norm`` / ``Tensor.norm`` over the table's
norm overloads (norm.Scalar, norm.ScalarOpt_dim, norm.ScalarOpt_dim_dtype).

In PyTorch, ``torch.norm`` is a Python function, not an aten op: it accepts
``p='fro'`` and a missing ``p`` together with ``dim``, which no aten schema
does. This adapter only chooses the overload; shapes, dtypes and errors come
from the op table's meta functions as for every op.
"""
from . import _C


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm of ``input`` over ``dim`` (None: every dim), as ``torch.norm``.

    ``p``: a number (default 2; ``inf``/``-inf`` give max/min of ``|x|``, 0 counts
    non-zeros) or ``'fro'`` (the 2-norm of the selected elements). ``keepdim``
    keeps reduced dims as size 1; ``dtype`` (floating) converts the input first
    and is the result's dtype. Floating inputs only (RuntimeError otherwise, as
    PyTorch); the output is contiguous. ``p='nuc'`` (a matrix norm) raises
    NotImplementedError.
    """
    if isinstance(p, str):
        if p != "fro":
            raise NotImplementedError(f"norm: p={p!r} is not supported (only numbers and 'fro')")
        p = 2
    if dim is None and not keepdim and dtype is None:
        return _C.call("norm", input, p)
    dims = [] if dim is None else dim
    if dtype is None:
        return _C.call("norm", input, p, dims, keepdim)
    return _C.call("norm", input, p, dims, keepdim, dtype=dtype)


def install(module_dict, tensor_cls):
    """Replaces the generated ``tensord.norm`` and ``Tensor.norm`` with ``norm``
    (keeping the generated documentation of the schemas)."""
    generated = module_dict.get("norm")
    doc = generated.__doc__ if generated is not None and generated.__doc__ else norm.__doc__

    def function(input, p="fro", dim=None, keepdim=False, dtype=None):
        return norm(input, p, dim, keepdim, dtype)

    def method(self, p="fro", dim=None, keepdim=False, dtype=None):
        return norm(self, p, dim, keepdim, dtype)

    function.__name__ = method.__name__ = "norm"
    function.__qualname__, method.__qualname__ = "norm", "Tensor.norm"
    function.__module__ = "tensord"
    function.__doc__ = method.__doc__ = doc
    module_dict["norm"] = function
    tensor_cls.norm = method
