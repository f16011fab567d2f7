"""``tensord.nn.Module``: the base class of layers and models, with PyTorch's bookkeeping."""
import collections

from .. import _C
from ._util import detach, no_grad, tensord_module, zero_grads
from .parameter import Parameter

__all__ = ["Module"]

Tensor = _C.Tensor

class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict did not match: (missing_keys, unexpected_keys), lists of names."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _indent(text, spaces):
    """Indents every line of ``text`` but the first by ``spaces`` spaces."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


class Module:
    """Base class of neural network modules, as ``torch.nn.Module``.

    Subclasses call ``super().__init__()`` first, then assign Parameters,
    sub-Modules and buffers (``register_buffer``) as attributes, and define
    ``forward``; calling the module calls ``forward``. Attributes are kept in
    ordered registries so that ``named_parameters()``, ``state_dict()`` and
    ``repr`` list them in assignment order, with dotted names for nested
    modules (``"0.weight"``).

    Modules built inside ``with tensord.device("meta"):`` have meta
    parameters (initialisers do nothing on meta): they print, run forward on
    meta inputs to give output shapes, and become real with
    ``to_empty(device="cpu")`` followed by ``reset_parameters()`` or
    ``load_state_dict``.
    """

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", collections.OrderedDict())

    # ------------------------------------------------------------ forward

    def forward(self, *args, **kwargs):
        """The computation of the module; subclasses define it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------ registration

    def _check_ready(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameters, modules or buffers before Module.__init__() call")

    def register_parameter(self, name, param):
        """Adds a parameter (a Parameter or None) under ``name``.

        Raises TypeError for a non-string name or a value that is neither a
        Parameter nor None, KeyError for an empty name, one with a dot, or a
        name already used by another attribute, AttributeError before
        ``Module.__init__``.
        """
        self._check_ready()
        self._check_name(name, "parameter", self._parameters)
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__module__}.{type(param).__name__}' object to parameter "
                            f"'{name}' (tensord.nn.Parameter or None required)")
        else:
            self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a buffer (a Tensor or None) under ``name``: state that is not a
        parameter (not trained) but moves with the module and, when
        ``persistent``, is part of ``state_dict()``. Errors as register_parameter."""
        self._check_ready()
        self._check_name(name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__module__}.{type(tensor).__name__}' object to buffer "
                            f"'{name}' (tensord.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Adds a child module (a Module or None) under ``name``. Errors as register_parameter."""
        self._check_ready()
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__module__}.{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module", self._modules)
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name, kind, own):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if hasattr(self, name) and name not in own:
            raise KeyError(f"attribute '{name}' already exists")

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, self.__dict__, self._buffers, self._modules)
            self._non_persistent_buffers_set.discard(name)
            params[name] = value
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as parameter "
                                f"'{name}' (tensord.nn.Parameter or None expected)")
            params[name] = None
            return
        modules = self.__dict__.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, self.__dict__, self._parameters, self._buffers)
            self._non_persistent_buffers_set.discard(name)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as child module "
                                f"'{name}' (tensord.nn.Module or None expected)")
            modules[name] = None
            return
        buffers = self.__dict__.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as buffer "
                                f"'{name}' (tensord.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, *dicts):
        for d in dicts:
            if name in d:
                del d[name]

    def __getattr__(self, name):
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            r = d.get(reg)
            if r is not None and name in r:
                return r[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for reg in (self._parameters, self._buffers, self._modules):
            if name in reg:
                del reg[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(super().__dir__())
        keys.update(self._parameters, self._buffers, self._modules)
        return sorted(k for k in keys if not k[0].isdigit())

    def get_submodule(self, target):
        """The sub-module at the dotted path ``target`` ('' is self); AttributeError when absent."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if not isinstance(getattr(mod, item, None), Module):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`"
                                     if not hasattr(mod, item) else f"`{item}` is not an nn.Module")
            mod = getattr(mod, item)
        return mod

    # ------------------------------------------------------------ iteration

    def _named_members(self, get, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for k, v in get(mod):
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True):
        """Yields (dotted name, Parameter) for this module's parameters and, when
        ``recurse``, its descendants'; each Parameter once even when shared."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse)

    def parameters(self, recurse=True):
        """Yields the Parameters (see named_parameters)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        """Yields (dotted name, Tensor) for the buffers (persistent or not)."""
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse)

    def buffers(self, recurse=True):
        """Yields the buffers."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        """Yields (name, module) for the direct children, each module once."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        """Yields the direct child modules."""
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Yields (dotted name, module) for this module ('' or ``prefix``) and all
        descendants, depth first in registration order, each module once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        """Yields this module and every descendant (each once)."""
        for _, m in self.named_modules():
            yield m

    # ------------------------------------------------------------ modes

    def train(self, mode=True):
        """Sets training mode (``training``) on this module and its descendants; returns self.
        Raises ValueError when ``mode`` is not a bool."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        """``train(False)``: Dropout stops dropping. Returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Sets requires_grad on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Resets the gradients of every parameter: by default
        (``set_to_none=True``, PyTorch 2.0's default; 1.13's is False) sets
        ``p.grad = None``; with ``set_to_none=False`` zeroes each existing
        grad in place in the daemon (a grad that has a grad_fn is detached
        first). The default is None for the reason Optimizer.zero_grad
        gives (a failed backward's error stays in grads zeroed in place).
        Parameters without a grad are left alone. Returns None."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn):
        """Calls ``fn(module)`` on every descendant (children first) and then on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------ conversion

    def _apply(self, fn):
        """Replaces every parameter, its grad and every buffer by ``fn(tensor)``
        (computed under no_grad). A parameter whose result is a different
        tensor becomes a new Parameter with the same requires_grad."""
        for m in self.children():
            m._apply(fn)
        for name, p in self._parameters.items():
            if p is None:
                continue
            with no_grad():
                new = fn(p)
            if new is p:
                continue
            grad = p.grad
            np_ = Parameter(new, p.requires_grad)
            if grad is not None:
                with no_grad():
                    g = fn(grad)
                np_.grad = g
            self._parameters[name] = np_
        for name, b in self._buffers.items():
            if b is not None:
                with no_grad():
                    self._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """Moves and/or casts parameters and buffers, as ``torch.nn.Module.to``:
        ``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``
        (its device and dtype), or keywords ``device=``/``dtype=``. A dtype
        applies to floating-point tensors only; it must be a floating dtype
        (TypeError otherwise). Returns self. Moving a meta module to a real
        device fails (there is no data to copy): use ``to_empty``."""
        td = tensord_module()
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, td.dtype):
                dtype = a
            elif isinstance(a, (str, td.device)):
                device = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, bool):
                continue  # non_blocking
            else:
                raise TypeError(f"to() received an invalid argument {a!r}")
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
        dev = None if device is None else str(td.device(device) if isinstance(device, str) else device)

        def convert(t):
            out = t
            if dev is not None and str(out.device) != dev:
                out = out.to(dev)
            if dtype is not None and out.dtype.is_floating_point and out.dtype is not dtype:
                out = out.to(dtype)
            return out

        return self._apply(convert)

    def to_empty(self, *, device):
        """Replaces every parameter and buffer by an uninitialised tensor of the
        same shape and dtype on ``device`` (as ``torch.nn.Module.to_empty``):
        the way to turn a module built on meta into a real one, to be followed
        by ``reset_parameters()`` or ``load_state_dict``. Returns self."""
        td = tensord_module()
        dev = str(td.device(device) if isinstance(device, str) else device)
        return self._apply(lambda t: td.empty_like(t, device=dev))

    def cpu(self):
        """``to('cpu')``."""
        return self.to("cpu")

    def cuda(self, device=None):
        """Moves every parameter and buffer to a CUDA device, as
        ``torch.nn.Module.cuda``: ``device`` as in ``Tensor.cuda`` (an int, a
        name or a ``tensord.device``; None is cuda:0, tensord's current CUDA
        device). Returns self. RuntimeError when the daemon has no such
        device."""
        return self._apply(lambda t: t.cuda(device))

    def float(self):
        """Casts floating parameters and buffers to float32."""
        return self._apply(lambda t: t.float() if t.dtype.is_floating_point else t)

    def double(self):
        """Casts floating parameters and buffers to float64."""
        return self._apply(lambda t: t.double() if t.dtype.is_floating_point else t)

    def half(self):
        """Casts floating parameters and buffers to float16."""
        return self._apply(lambda t: t.half() if t.dtype.is_floating_point else t)

    def bfloat16(self):
        """Casts floating parameters and buffers to bfloat16."""
        return self._apply(lambda t: t.bfloat16() if t.dtype.is_floating_point else t)

    # ------------------------------------------------------------ state

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An ordered dict dotted name -> tensor of every parameter and persistent
        buffer (this module's first, then each child's). Values share data with
        the module (detached unless ``keep_vars``): save it with tensord.save."""
        if destination is None:
            destination = collections.OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else detach(p)
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else detach(b)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True):
        """Copies tensors from ``state_dict`` into the parameters and persistent
        buffers of the same names (in place in the daemon, under no_grad; the
        source may have another dtype or device: it is converted).

        Returns ``IncompatibleKeys(missing_keys, unexpected_keys)``. Raises
        RuntimeError ("Error(s) in loading state_dict for <Module>: ...") for
        a size mismatch, and with ``strict=True`` also for missing or unexpected
        keys. Into a meta parameter the copy does nothing (as PyTorch); call
        ``to_empty`` first.
        """
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        expected = set()
        for prefix, mod in self.named_modules():
            pre = prefix + "." if prefix else ""
            local = [(n, p) for n, p in mod._parameters.items() if p is not None]
            local += [(n, b) for n, b in mod._buffers.items()
                      if b is not None and n not in mod._non_persistent_buffers_set]
            for n, target in local:
                key = pre + n
                expected.add(key)
                if key not in state_dict:
                    missing.append(key)
                    continue
                src = state_dict[key]
                if not isinstance(src, Tensor):
                    errors.append(f'While copying the parameter named "{key}", expected tensord.Tensor from '
                                  f"checkpoint but received {type(src)}")
                    continue
                if tuple(src.shape) != tuple(target.shape):
                    errors.append(f"size mismatch for {key}: copying a param with shape {src.shape} from "
                                  f"checkpoint, the shape in current model is {target.shape}.")
                    continue
                with no_grad():
                    if target.is_meta or not src.is_meta:
                        target.copy_(src)
                    else:
                        errors.append(f'While copying the parameter named "{key}": the checkpoint tensor is '
                                      "on the meta device and has no data")
        for key in state_dict.keys():
            if key not in expected:
                unexpected.append(key)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------ repr

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The module's own settings for repr (e.g. ``in_features=64, out_features=128, bias=True``);
        subclasses override it. Empty by default."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _indent(repr(m), 2) for name, m in self._modules.items()]
        body = extra_lines + child_lines
        if not body:
            return self._get_name() + "()"
        if len(extra_lines) == 1 and not child_lines:
            return f"{self._get_name()}({extra_lines[0]})"
        return self._get_name() + "(\n  " + "\n  ".join(body) + "\n)"
