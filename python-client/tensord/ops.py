"""``tensord.ops.<namespace>.<name>``: the ops defined at run time with
:func:`tensord.library.define`, as ``torch.ops.mylib.name`` in PyTorch. A name
resolves when it is used, so ops defined after import are found."""
from . import _C


class _OpNamespace:
    """The ops of one namespace (``tensord.ops.mylib``)."""

    def __init__(self, ns):
        self._ns = ns
        self._ops = {}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        op = self._ops.get(name)
        if op is not None:
            return op
        full = f"{self._ns}::{name}"
        entries = _C.defined_ops(full)
        if not entries:
            raise AttributeError(f"'tensord.ops.{self._ns}' has no op '{name}': define it with "
                                 f"tensord.library.define('{full}', schema, like=...)")
        op = _C.OpFunction(full, "function")
        op.__name__ = name
        op.__qualname__ = f"{self._ns}.{name}"
        op.__module__ = f"tensord.ops.{self._ns}"
        op.__doc__ = "\n".join([f"{full}: defined at run time (tensord.library.define)."] +
                               [f"    {e['schema']}" for e in entries])
        self._ops[name] = op
        return op

    def __repr__(self):
        return f"<tensord.ops.{self._ns}>"


_namespaces = {}


def __getattr__(ns):
    if ns.startswith("__"):
        raise AttributeError(ns)
    space = _namespaces.get(ns)
    if space is None:
        space = _namespaces[ns] = _OpNamespace(ns)
    return space
