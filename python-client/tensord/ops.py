"""``tensord.ops.<namespace>.<name>``: the ops defined at run time with
:func:`tensord.library.define`, as ``torch.ops.mylib.name`` in PyTorch. A name
resolves when it is used, so ops defined after import are found. An op with
overloads picks one by its arguments; ``tensord.ops.mylib.name.<overload>``
(``.default`` for the one without an overload name) is that overload alone."""
import sys as _sys
import types as _types

from . import _C, _custom_op

# Internal state lives under names that are not identifiers, so no op or
# namespace name (always an identifier) can collide with it.
_STATE = "ops:state"


def _make(full, entries, mode_name):
    fn = _C.OpFunction(full, "function")
    ns, _, name = full.partition("::")
    fn.__name__ = mode_name
    fn.__qualname__ = f"{ns}.{mode_name}"
    fn.__module__ = f"tensord.ops.{ns}"
    fn._op_full_name = full  # what tensord.library.opcheck looks up
    fn.__doc__ = "\n".join([f"{full}: defined at run time (tensord.library.define)."] +
                           [f"    {e['schema']}" for e in entries])
    return fn


class _OpNamespace:
    """The ops of one namespace (``tensord.ops.mylib``)."""

    def __init__(self, ns):
        object.__setattr__(self, _STATE, (ns, {}))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        ns, cache = object.__getattribute__(self, _STATE)
        full = f"{ns}::{name}"
        custom = _custom_op.custom_op_named(full)
        if custom is not None:
            return custom
        entries = _C.defined_ops(full)
        if not entries:
            if ns in ("aten", "tensord", "prim"):  # reserved: tensord.library.define refuses them
                raise AttributeError(f"'tensord.ops.{ns}' has no op '{name}': built-in ops are tensord.<name> "
                                     f"and Tensor.<name> (tensord.{name}, if it exists); the namespace {ns!r} is "
                                     f"reserved, so ops defined at run time go in a namespace of your own")
            raise AttributeError(f"'tensord.ops.{ns}' has no op '{name}': define it with "
                                 f"tensord.library.define('{full}', schema, like=...) or "
                                 f"tensord.library.custom_op('{full}', mutates_args=())")
        cached = cache.get(name)
        if cached is not None and cached[0] == len(entries):
            return cached[1]
        op = _make(full, entries, name)     # made again when an overload was added since
        for e in entries:
            setattr(op, e["overload"] or "default", _make(e["full_name"], [e], name))
        cache[name] = (len(entries), op)
        return op

    def __dir__(self):
        ns = object.__getattribute__(self, _STATE)[0]
        prefix = ns + "::"
        names = list(_C.defined_op_names()) + list(_custom_op._custom_ops)
        return sorted({n[len(prefix):] for n in names if n.startswith(prefix)})

    def __repr__(self):
        return f"<tensord.ops.{object.__getattribute__(self, _STATE)[0]}>"


class _Ops(_types.ModuleType):
    """``tensord.ops``: one namespace object per namespace, made on first use."""

    def __dir__(self):
        return sorted({n.partition("::")[0] for n in list(_C.defined_op_names()) + list(_custom_op._custom_ops)})

    def __getattr__(self, ns):
        if ns.startswith("__"):
            raise AttributeError(ns)
        spaces = self.__dict__.setdefault(_STATE, {})
        space = spaces.get(ns)
        if space is None:
            space = spaces[ns] = _OpNamespace(ns)
        return space


# The module itself answers every other name with a namespace: a module-level
# __getattr__ would not see names the module defines (_C, _make, ...).
_module = _sys.modules[__name__]
_ops = _Ops(__name__, __doc__)
_ops.__file__ = getattr(_module, "__file__", None)
_ops.__spec__ = getattr(_module, "__spec__", None)
_ops.__package__ = getattr(_module, "__package__", None)
_sys.modules[__name__] = _ops
