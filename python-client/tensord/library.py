"""Ops defined at run time, with PyTorch's ``torch.library`` vocabulary.

``define("mylib::scale", "(Tensor x, Scalar s) -> Tensor", like="mul.Scalar")``
adds an op to this process's op set: it is then ``tensord.ops.mylib.scale``,
callable like any op, with its arguments bound by its schema and its output's
shape, strides and dtype computed by its shape rule at the call site. On meta
tensors it needs no daemon, so ``tensord check`` validates programs that use
it. A daemon session is sent the definitions before the first call that
needs them; the daemon checks them again and the two agree by digest.

The shape rule is, for now, ``like=``: the name of a built-in op whose
arguments and returns have the new op's types in the same order; its shape
function (and its errors, which then name the new op) is the new op's. An op
defined here has no kernel, so on a daemon's tensors it raises
NotImplementedError, and no derivative, so a backward through it raises
NotImplementedError too.

``custom_op("mylib::f", mutates_args=())`` makes a Python function an op,
with ``register_fake``, ``register_autograd`` and ``register_kernel``, as
``torch.library.custom_op`` (tensord/_custom_op.py): its body, written in
tensord ops, runs in the client; its derivative is the registered one.
"""
from . import _C
from ._custom_op import CustomOpDef, custom_op, opcheck, register_autograd, register_fake, register_kernel

__all__ = ["define", "custom_op", "CustomOpDef", "opcheck", "register_fake", "register_autograd", "register_kernel"]


def define(qualname, schema, *, like):
    """Defines op ``qualname`` ("namespace::name", or "namespace::name.overload")
    with ``schema``, its arguments and returns in PyTorch's schema syntax
    ("(Tensor x, Scalar s=1) -> Tensor"), and the shape rule of built-in op
    ``like`` ("mul.Scalar"; a base name when it has one overload). Returns the
    op, also reachable as ``tensord.ops.<namespace>.<name>`` (an overload as
    ``tensord.ops.<namespace>.<name>.<overload>``). Factory-like ops (``like=
    "zeros"``) follow ``tensord.device`` as built-in factories do.

    Raises RuntimeError when the name has no namespace of its own (or uses
    "aten", "tensord" or "prim", or starts with "__", or the overload is
    "default"), is already defined, the schema does not parse, repeats an
    argument name, has alias annotations or non-Tensor returns, is over
    16 KiB (or the process's definitions over 4 MiB), or ``like`` names no
    built-in op, a view or in-place op, one whose output shape depends on
    values, or one whose argument or return types differ from ``schema``'s.
    TypeError when an argument is not a str.
    """
    for what, v in (("qualname", qualname), ("schema", schema), ("like", like)):
        if not isinstance(v, str):
            raise TypeError(f"library.define: {what} must be a str, got {type(v).__name__}")
    schema = schema.strip()
    if not schema.startswith("("):
        raise RuntimeError(f"library.define: schema must start with its arguments, as in '(Tensor x) -> Tensor', "
                           f"got {schema!r}")
    entry = _C.define_op(qualname + schema, "like:" + like)
    import sys
    ops = sys.modules["tensord.ops"]
    ns, _, name = entry["name"].partition("::")
    op = getattr(getattr(ops, ns), name)
    return getattr(op, entry["overload"]) if entry["overload"] else op
