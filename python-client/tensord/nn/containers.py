"""Containers keyed by name or position, as ``torch.nn``'s: ``ModuleDict``,
``ParameterList`` and ``ParameterDict``. Their entries are registered
children or parameters, so ``parameters()``, ``state_dict()``, ``to()`` and
the optimisers see them; none has a forward."""
import collections.abc
import operator

from .. import _C
from .module import Module
from .parameter import Parameter

Tensor = _C.Tensor


def _as_parameter(value):
    """A Tensor that is not a Parameter becomes one (requires_grad=True), as
    torch.nn.ParameterList/ParameterDict do; anything else is kept as it is."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ModuleDict(Module):
    """Modules by name, in insertion order: ``d[key]``, ``d[key] = m``,
    ``del d[key]``, ``in``, ``len``, iteration over the keys, ``keys()``,
    ``items()``, ``values()``, ``update()``, ``pop()``, ``clear()``. Keys are
    strings that are valid attribute names of a module (KeyError for "",
    one with a dot, or one a method takes, as in PyTorch)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        """Removes every entry."""
        self._modules.clear()

    def pop(self, key):
        """Removes the module under ``key`` and returns it (KeyError when absent)."""
        v = self[key]
        del self[key]
        return v

    def keys(self):
        """The keys, in insertion order."""
        return self._modules.keys()

    def items(self):
        """(key, module) pairs, in insertion order."""
        return self._modules.items()

    def values(self):
        """The modules, in insertion order."""
        return self._modules.values()

    def update(self, modules):
        """Adds or replaces entries from a mapping, or from an iterable of
        (key, module) pairs; TypeError for anything else."""
        if isinstance(modules, (collections.OrderedDict, ModuleDict, collections.abc.Mapping)):
            for key, module in modules.items():
                self[key] = module
            return
        if not isinstance(modules, collections.abc.Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            + type(modules).__name__)
        for j, m in enumerate(modules):
            if not isinstance(m, collections.abc.Iterable):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; is "
                                + type(m).__name__)
            if len(m) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(m)}; 2 is required")
            self[m[0]] = m[1]


class ParameterList(Module):
    """Parameters by position, registered as '0', '1', ...: indexing (and
    slices, which give a new ParameterList), assignment, ``len``, iteration,
    ``append``, ``extend``, ``+=``. A Tensor that is not a Parameter becomes
    one. IndexError for an index out of range."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _index(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return idx % len(self)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(self._index(idx)))

    def __setitem__(self, idx, value):
        setattr(self, str(self._index(idx)), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        """Adds ``value`` at the end; returns self."""
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        """Appends every value of an iterable; returns self. TypeError for a
        value that is not iterable (a Tensor is one value, not a sequence)."""
        if not isinstance(values, collections.abc.Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        lines = []
        for i, p in enumerate(self):
            if isinstance(p, Tensor):
                size = "x".join(str(s) for s in p.shape)
                lines.append(f"({i}): Parameter containing: [{p.dtype} of size {size}"
                             f"{'' if p.device.type == 'cpu' else ' (' + str(p.device) + ')'}]")
            else:
                lines.append(f"({i}): Object of type: {type(p).__name__}")
        return "\n".join(lines)


class ParameterDict(Module):
    """Parameters by name, in insertion order, with the dict methods
    (``d[key]``, assignment, ``del``, ``in``, ``len``, iteration over keys,
    ``keys()``, ``items()``, ``values()``, ``update()``, ``pop()``, ``get()``,
    ``clear()``). A Tensor that is not a Parameter becomes one; keys are
    strings that are valid attribute names (KeyError otherwise)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"parameter name should be a string. Got {type(key).__name__}")
        self._keys[key] = None
        try:
            setattr(self, key, _as_parameter(value))
        except Exception:
            del self._keys[key]
            raise

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        """The keys, in insertion order."""
        return self._keys.keys()

    def items(self):
        """(key, parameter) pairs, in insertion order."""
        return ((k, self[k]) for k in self._keys)

    def values(self):
        """The parameters, in insertion order."""
        return (self[k] for k in self._keys)

    def get(self, key, default=None):
        """The value under ``key``, or ``default`` when there is none."""
        return self[key] if key in self else default

    def pop(self, key):
        """Removes the value under ``key`` and returns it (KeyError when absent)."""
        v = self[key]
        del self[key]
        return v

    def clear(self):
        """Removes every entry."""
        for k in list(self._keys):
            del self[k]

    def update(self, parameters):
        """Adds or replaces entries from a mapping, or from an iterable of
        (key, value) pairs; TypeError for anything else."""
        if isinstance(parameters, collections.abc.Mapping) or isinstance(parameters, ParameterDict):
            for k, v in parameters.items():
                self[k] = v
            return
        if not isinstance(parameters, collections.abc.Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            + type(parameters).__name__)
        for j, p in enumerate(parameters):
            if not isinstance(p, collections.abc.Iterable):
                raise TypeError(f"ParameterDict update sequence element #{j} should be Iterable; is "
                                + type(p).__name__)
            if len(p) != 2:
                raise ValueError(f"ParameterDict update sequence element #{j} has length {len(p)}; 2 is required")
            self[p[0]] = p[1]

    def extra_repr(self):
        lines = []
        for k, p in self.items():
            if isinstance(p, Tensor):
                size = "x".join(str(s) for s in p.shape)
                lines.append(f"({k}): Parameter containing: [{p.dtype} of size {size}]")
            else:
                lines.append(f"({k}): Object of type: {type(p).__name__}")
        return "\n".join(lines)
