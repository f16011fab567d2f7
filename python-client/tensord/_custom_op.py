"""Python custom ops: ``tensord.library.custom_op``, ``register_fake``,
``register_autograd`` and ``register_kernel``, with ``torch.library``'s
meanings (PyTorch 2.4). The op's body is Python written in tensord ops; it
runs in this client and its ops stream to the daemon like any others. The
op is opaque to autograd: its derivative is the one ``register_autograd``
gives (recorded as one node, through ``tensord.autograd.Function``), never
the body's. On meta tensors (``device="meta"``, ``tensord check``) the fake
implementation computes the outputs' metadata; without one, the body itself
runs on the meta tensors (tensord's ops compute metadata on meta), which
PyTorch does not do.

    @tensord.library.custom_op("mylib::bias_gelu", mutates_args=())
    def bias_gelu(x: Tensor, bias: Tensor) -> Tensor:
        return tensord.nn.functional.gelu(x + bias)

    @bias_gelu.register_fake
    def _(x, bias):
        return tensord.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        ...
        return grad_x, grad_bias

    bias_gelu.register_autograd(backward, setup_context=setup_context)
    tensord.ops.mylib.bias_gelu(x, b)       # the same op
"""
import collections.abc
import inspect
import keyword
import typing

from . import _C
from .autograd.function import Function, _same
from .autograd.grad_mode import no_grad

Tensor = _C.Tensor

# "ns::name" -> CustomOpDef, for tensord.ops.<ns>.<name> and the module-level
# register_* functions.
_custom_ops = {}

_RESERVED_NAMESPACES = ("aten", "tensord", "prim")
_DEVICE_TYPES = ("cpu", "cuda", "meta", "privateuseone")


def _schema_type(annotation, name, where):
    """The schema type of a parameter or return annotation (PyTorch's
    infer_schema table); ValueError naming `name` for an unsupported one."""
    from ._device import device as _device
    from ._dtype import dtype as _dtype

    simple = {Tensor: "Tensor", int: "int", float: "float", bool: "bool", str: "str",
              _dtype: "ScalarType", _device: "Device"}
    if annotation in simple:
        return simple[annotation]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union and len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        return _schema_type(inner, name, where) + "?"
    if origin in (list, collections.abc.Sequence) and len(args) == 1 and args[0] in (Tensor, int, float, bool):
        return simple[args[0]] + "[]"
    if annotation is typing.Union[int, float] or annotation is typing.Union[int, float, bool]:
        return "Scalar"
    raise ValueError(f"custom_op({where}): {name} has unsupported type {annotation!r}. The valid types are: "
                     "Tensor, int, float, bool, str, tensord.dtype, tensord.device, typing.Optional of those, "
                     "list or Sequence of Tensor, int, float or bool, and Union[int, float] (a Scalar).")


def _default_text(v):
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return repr(v)
    raise ValueError(f"unsupported default value {v!r}")


def _infer_schema(fn, qualname, mutates_args):
    """'(Tensor(a0!) x, float s=1.0) -> Tensor' from `fn`'s annotations, the
    mutated arguments marked as torch.library.infer_schema marks them."""
    sig = inspect.signature(fn)
    params = []
    mutated = set() if mutates_args == "unknown" else set(mutates_args)
    hints = typing.get_type_hints(fn)
    for i, (pname, p) in enumerate(sig.parameters.items()):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise ValueError(f"custom_op({qualname}): parameter {pname} is *args or **kwargs, which a schema "
                             "cannot hold")
        if pname not in hints:
            raise ValueError(f"custom_op({qualname}): parameter {pname} must have a type annotation")
        t = _schema_type(hints[pname], f"parameter {pname}", qualname)
        if pname in mutated:
            if not t.startswith("Tensor"):
                raise ValueError(f"custom_op({qualname}): mutates_args names {pname}, which is a {t}, not a Tensor")
            t = t.replace("Tensor", f"Tensor(a{i}!)", 1)
        text = f"{t} {pname}"
        if p.default is not p.empty:
            try:
                text += "=" + _default_text(p.default)
            except ValueError as e:
                raise ValueError(f"custom_op({qualname}): parameter {pname}: {e}") from None
        params.append(("*, " if p.kind == p.KEYWORD_ONLY and not any(x.startswith("*") for x in params) else "")
                      + text)
    missing = mutated - set(sig.parameters)
    if missing:
        raise ValueError(f"custom_op({qualname}): mutates_args names {sorted(missing)}, which are not parameters "
                         f"of the function ({', '.join(sig.parameters)})")
    ret = hints.get("return", inspect.Signature.empty)
    if ret is inspect.Signature.empty:
        raise ValueError(f"custom_op({qualname}): the function must have a return annotation (Tensor, "
                         "tuple[Tensor, ...] or None)")
    if ret is None or ret is type(None):
        returns, n_out = "()", 0
    elif ret is Tensor:
        returns, n_out = "Tensor", 1
    elif typing.get_origin(ret) is tuple and typing.get_args(ret) and \
            all(a is Tensor for a in typing.get_args(ret)):
        n_out = len(typing.get_args(ret))
        returns, n_out = "(" + ", ".join(["Tensor"] * n_out) + ")", n_out
    else:
        raise ValueError(f"custom_op({qualname}): return type {ret!r} is not supported: return Tensor, "
                         "tuple[Tensor, ...] or None")
    return "(" + ", ".join(params) + ") -> " + returns, n_out


def _check_qualname(qualname):
    if not isinstance(qualname, str):
        raise TypeError(f"custom_op: the name must be a str, got {type(qualname).__name__}")
    ns, sep, name = qualname.partition("::")
    if not sep or not ns or not name:
        raise ValueError(f"Expected there to be a namespace in {qualname}, i.e. The operator name should look "
                         "something like ns::foo")
    for part in (ns, name):
        if not part.isidentifier() or keyword.iskeyword(part) or part.startswith("__"):
            raise ValueError(f"custom_op: {qualname!r}: the namespace and the name must be identifiers not "
                             "starting with '__'")
    if ns in _RESERVED_NAMESPACES:
        raise ValueError(f"custom_op: the namespace '{ns}' is tensord's own; choose another ({qualname})")
    if qualname in _custom_ops or _C.defined_ops(qualname):
        raise RuntimeError(f"custom_op: an op named {qualname} already exists in this process")
    return ns, name


def _tensors_of(value):
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, Tensor)]
    return []


class CustomOpDef:
    """An op made by :func:`custom_op`: call it like a function (positional or
    keyword arguments, as its schema says). Attributes: ``_name``
    ("ns::name"), ``_schema`` (the schema text), ``__name__``."""

    def __init__(self, qualname, fn, mutates_args, device_types, schema):
        self._namespace, name = _check_qualname(qualname)
        if mutates_args != "unknown":
            if isinstance(mutates_args, str) or not isinstance(mutates_args, collections.abc.Iterable):
                raise ValueError(f"custom_op({qualname}): mutates_args must be an iterable of parameter names "
                                 f"(() when the op mutates nothing) or 'unknown', got {mutates_args!r}")
            mutates_args = tuple(mutates_args)
        inferred, self._n_out = _infer_schema(fn, qualname, mutates_args)
        self._schema = inferred if schema is None else schema
        self._name = qualname
        self._fn = fn
        self._signature = inspect.signature(fn)
        self._mutates = mutates_args
        self._kernels = {}
        for dt in _device_types(device_types, qualname):
            self._kernels[dt] = fn
        self._default_kernel = fn if device_types is None else None
        self._fake = None
        self._backward = None
        self._setup_context = None
        self.__name__ = name
        self.__qualname__ = name
        self.__module__ = f"tensord.ops.{self._namespace}"
        self.__doc__ = fn.__doc__ or f"{qualname}{self._schema}: a custom op (tensord.library.custom_op)."
        self._autograd_fn = None

    def __repr__(self):
        return f"<tensord custom op {self._name}{self._schema}>"

    # ---- registration -----------------------------------------------------

    def register_fake(self, fn=None, /):
        """Registers `fn(*args, **kwargs)`, which returns outputs of the right
        shapes, strides and dtypes (``tensord.empty_like(x)``, ``tensord.empty(..., device=x.device)``)
        from meta inputs: what the op computes on meta tensors and under
        ``tensord check``. Usable as a decorator; returns `fn`."""
        def register(f):
            if not callable(f):
                raise TypeError(f"register_fake({self._name}): expected a function, got {type(f).__name__}")
            self._fake = f
            return f
        return register if fn is None else register(fn)

    def register_kernel(self, device_types, fn=None, /):
        """Registers `fn` as the op's implementation on `device_types` ("cpu",
        "cuda", or a list of them) in place of the body. Usable as a
        decorator; returns `fn`."""
        types = _device_types(device_types, self._name)

        def register(f):
            if not callable(f):
                raise TypeError(f"register_kernel({self._name}): expected a function, got {type(f).__name__}")
            for dt in types:
                self._kernels[dt] = f
            return f
        return register if fn is None else register(fn)

    def register_autograd(self, backward, /, *, setup_context=None):
        """Registers the op's derivative: `backward(ctx, *grad_outputs)` returns
        one gradient (or None) per argument of the op; `setup_context(ctx,
        inputs, output)` saves what it needs (``ctx.save_for_backward``), as
        torch.library.register_autograd. RuntimeError for an op that mutates
        its arguments (autograd through a mutation is not supported, as in
        PyTorch)."""
        if not callable(backward) or (setup_context is not None and not callable(setup_context)):
            raise TypeError(f"register_autograd({self._name}): backward and setup_context must be functions")
        if self._mutates == "unknown" or self._mutates:
            raise RuntimeError(f"register_autograd({self._name}): autograd is not supported for an op that "
                               "mutates its arguments (mutates_args is not empty)")
        self._backward = backward
        self._setup_context = setup_context
        self._autograd_fn = None

    # ---- calling ------------------------------------------------------------

    def _bind(self, args, kwargs):
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self._name}(): {e}") from None
        bound.apply_defaults()
        return bound

    def _impl_for(self, tensors):
        """The implementation for the inputs' device: the fake on meta (the
        body without one), else the kernel registered for the device type,
        else the body."""
        device = next((t.device for t in tensors), None)
        if device is not None and device.type == "meta":
            return self._fake
        kind = device.type if device is not None else "cpu"
        impl = self._kernels.get(kind, self._default_kernel)
        if impl is None:
            raise NotImplementedError(f"{self._name}: no implementation for device type '{kind}' (registered: "
                                      f"{', '.join(sorted(self._kernels)) or 'none'}); add one with "
                                      "register_kernel")
        return impl

    def _run(self, bound, tensors):
        impl = self._impl_for(tensors)
        if impl is None:  # meta with no fake: the body, on meta tensors
            try:
                out = self._fn(*bound.args, **bound.kwargs)
            except Exception as e:
                raise RuntimeError(f"{self._name}: no fake implementation is registered (register_fake), and the "
                                   f"body failed on meta tensors: {type(e).__name__}: {e}") from e
        else:
            out = impl(*bound.args, **bound.kwargs)
        self._check_outputs(out, tensors)
        return out

    def _check_outputs(self, out, tensors):
        outs = list(out) if isinstance(out, tuple) else [out]
        if self._n_out == 0:
            if out is not None:
                raise RuntimeError(f"{self._name}: its schema returns nothing, but the implementation returned "
                                   f"{type(out).__name__}")
            return
        if (self._n_out == 1 and isinstance(out, tuple)) or len(outs) != self._n_out or \
                not all(isinstance(o, Tensor) for o in outs):
            raise RuntimeError(f"{self._name}: the implementation must return {self._n_out} Tensor(s) as its "
                               f"schema {self._schema} says, got {type(out).__name__}")
        for o in outs:
            if any(_same(o, t) for t in tensors):
                raise RuntimeError(f"{self._name}: the implementation returned one of its inputs; a custom op's "
                                   "outputs must be new tensors (return x.clone() instead)")

    def __call__(self, *args, **kwargs):
        bound = self._bind(args, kwargs)
        tensors = [t for v in bound.arguments.values() for t in _tensors_of(v)]
        needs_grad = _C.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if not needs_grad:
            return self._run(bound, tensors)
        return self._autograd_function().apply(*bound.args, **bound.kwargs)

    def _autograd_function(self):
        """The autograd.Function subclass that records the op as one node."""
        if self._autograd_fn is not None:
            return self._autograd_fn
        op = self
        names = list(self._signature.parameters)

        def forward(*args, **kwargs):
            bound = op._bind(args, kwargs)
            return op._run(bound, [t for v in bound.arguments.values() for t in _tensors_of(v)])

        def setup_context(ctx, inputs, output):
            if op._setup_context is not None:
                op._setup_context(ctx, inputs, output)

        def backward(ctx, *grads):
            if op._backward is None:
                raise RuntimeError(f"Autograd has not been implemented for operator {op._name}. Please register "
                                   f"an autograd formula with {op.__name__}.register_autograd "
                                   "(tensord.library.register_autograd).")
            result = op._backward(ctx, *grads)
            result = result if isinstance(result, tuple) else (result,)
            if len(result) != len(names):
                raise RuntimeError(f"{op._name}: the backward registered with register_autograd returned "
                                   f"{len(result)} gradient(s); expected one (or None) per argument: "
                                   f"{', '.join(names)}")
            return result

        cls_name = self._name.replace("::", "_")
        self._autograd_fn = type(cls_name, (Function,), dict(forward=staticmethod(forward),
                                                           setup_context=staticmethod(setup_context),
                                                           backward=staticmethod(backward)))
        return self._autograd_fn


def _device_types(device_types, qualname):
    if device_types is None:
        return ()
    types = (device_types,) if isinstance(device_types, str) else tuple(device_types)
    for dt in types:
        if dt not in _DEVICE_TYPES:
            raise ValueError(f"{qualname}: unknown device type {dt!r} (one of {', '.join(_DEVICE_TYPES)})")
    return types


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Makes the Python function `fn` an op named `name` ("ns::name"), as
    torch.library.custom_op: its schema comes from `fn`'s type annotations
    (Tensor, int, float, bool, str, tensord.dtype, tensord.device, Optional
    and list of those; returns Tensor, tuple[Tensor, ...] or None), or from
    `schema`. `mutates_args` names the Tensor arguments `fn` writes in place
    (``()`` for none; ``"unknown"`` when not known). `device_types` ("cpu",
    "cuda", ...) limits where `fn` is the implementation (others come from
    ``register_kernel``). Returns a :class:`CustomOpDef`, also reachable as
    ``tensord.ops.<ns>.<name>``; usable as a decorator.

    ValueError for a name without a namespace, a reserved namespace
    ("aten", "tensord", "prim"), a parameter without an annotation or of an
    unsupported type, or `mutates_args` naming a non-Tensor or unknown
    parameter; RuntimeError when an op of that name exists in this process.
    Calls raise TypeError for arguments that do not bind, RuntimeError when
    the implementation returns other than its schema says or returns an input.
    """
    def make(f):
        op = CustomOpDef(name, f, mutates_args, device_types, schema)
        _custom_ops[name] = op
        return op
    return make if fn is None else make(fn)


def _lookup(op, what):
    if isinstance(op, CustomOpDef):
        return op
    if isinstance(op, str) and op in _custom_ops:
        return _custom_ops[op]
    raise ValueError(f"{what}: {op!r} is not an op made by tensord.library.custom_op in this process")


def register_fake(op, fn=None, /, *, lib=None):
    """``op.register_fake(fn)`` for `op` a CustomOpDef or its name ("ns::name")."""
    del lib
    return _lookup(op, "register_fake").register_fake(fn)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """``op.register_autograd(backward, setup_context=...)`` for `op` a CustomOpDef or its name."""
    del lib
    _lookup(op, "register_autograd").register_autograd(backward, setup_context=setup_context)


def register_kernel(op, device_types, fn=None, /, *, lib=None):
    """``op.register_kernel(device_types, fn)`` for `op` a CustomOpDef or its name."""
    del lib
    return _lookup(op, "register_kernel").register_kernel(device_types, fn)


def custom_op_named(qualname):
    """The CustomOpDef named `qualname`, or None (tensord.ops' lookup)."""
    return _custom_ops.get(qualname)



DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor")


class _Bound:
    def __init__(self, arguments):
        self.arguments = arguments


class _DefinedOp:
    """What opcheck reads of an op defined with tensord.library.define or
    loaded from a kernel artifact (one overload): its name, schema, bound
    arguments, whether it has a derivative, and the call. Such an op writes
    no argument (the schema refuses alias annotations)."""

    def __init__(self, fn, entry):
        self._fn = fn
        self._name = entry["full_name"]
        self._schema = entry["schema"]
        self._mutates = ()
        self._backward = True if entry["has_derivative"] else None
        self._arg_names = entry["arguments"]
        self._float64_fallback = True

    def _bind(self, args, kwargs):
        if len(args) > len(self._arg_names):
            raise TypeError(f"{self._name}() takes {len(self._arg_names)} arguments, got {len(args)}")
        bound = dict(zip(self._arg_names, args))
        for k, v in kwargs.items():
            if k not in self._arg_names or k in bound:
                raise TypeError(f"{self._name}() got an unexpected or repeated argument {k!r}")
            bound[k] = v
        return _Bound({n: bound[n] for n in self._arg_names if n in bound})

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)


def _opcheck_target(op):
    """A CustomOpDef (or its name), or a _DefinedOp for an op of
    tensord.ops (or its name, "ns::name" or "ns::name.overload")."""
    from . import _C
    if isinstance(op, CustomOpDef) or (isinstance(op, str) and op in _custom_ops):
        return _lookup(op, "opcheck")
    full = op if isinstance(op, str) else getattr(op, "_op_full_name", None)
    entries = _C.defined_ops(full.split(".")[0]) if isinstance(full, str) and "::" in full else []
    if "." in (full or ""):
        entries = [e for e in entries if e["full_name"] == full]
    if not entries:
        raise ValueError(f"opcheck: {op!r} is not an op made by tensord.library.custom_op, defined with "
                         "tensord.library.define or loaded from a kernel artifact")
    if len(entries) > 1:
        raise ValueError(f"opcheck: {full} has overloads {[e['full_name'] for e in entries]}; check one, as "
                         f"tensord.ops.{full.replace('::', '.')}.<overload>")
    import sys
    ns, _, rest = entries[0]["full_name"].partition("::")
    packet = getattr(getattr(sys.modules["tensord.ops"], ns), rest.split(".")[0])
    fn = getattr(packet, entries[0]["overload"]) if entries[0]["overload"] else packet
    return _DefinedOp(fn, entries[0])


def _meta_copy(v):
    """A meta tensor with `v`'s sizes, strides and dtype (lists element-wise)."""
    import tensord

    if isinstance(v, Tensor):
        return tensord.empty_strided(tuple(v.shape), v.stride(), dtype=v.dtype, device="meta")
    if isinstance(v, (list, tuple)):
        return type(v)(_meta_copy(x) for x in v)
    return v


def _clone_args(args, kwargs, fn=lambda t: t.detach().clone()):
    def c(v):
        if isinstance(v, Tensor):
            return fn(v)
        if isinstance(v, (list, tuple)):
            return type(v)(c(x) for x in v)
        return v
    return [c(a) for a in args], {k: c(v) for k, v in kwargs.items()}


def _same_values(a, b):
    """Equal sizes and values, NaN equal to NaN (a tensor's values before and after a call)."""
    import numpy as np

    x, y = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    if x.shape != y.shape:
        return False
    return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def _outputs(out):
    return [] if out is None else list(out) if isinstance(out, tuple) else [out]


def _test_schema(op, args, kwargs):
    """The schema's claims: arguments not in mutates_args keep their values,
    and no output is an input."""
    a, k = _clone_args(args, kwargs)
    bound = op._bind(a, k)
    before = {n: v.detach().clone() for n, v in bound.arguments.items() if isinstance(v, Tensor)}
    with no_grad():
        out = op(*a, **k)
    declared = () if op._mutates == "unknown" else op._mutates
    for name, old in before.items():
        if op._mutates != "unknown" and name not in declared and not _same_values(old, bound.arguments[name]):
            fix = ("an op defined at run time or loaded from a kernel artifact may not write its arguments: its "
                   "kernel must leave them as they are" if isinstance(op, _DefinedOp) else "add it to mutates_args")
            raise RuntimeError(f"opcheck({op._name}): test_schema: argument {name} was written to, but its schema "
                               f"{op._schema} does not say so ({fix})")
    for o in _outputs(out):
        if any(_same(o, t) for t in before.values()):
            raise RuntimeError(f"opcheck({op._name}): test_schema: an output is one of the inputs")
    return out


def _test_faketensor(op, args, kwargs):
    """The fake (or the body on meta) against the real outputs: sizes,
    strides and dtypes."""
    a, k = _clone_args(args, kwargs)
    with no_grad():
        real = _outputs(op(*a, **k))
    ma, mk = _clone_args(args, kwargs, _meta_copy)
    with no_grad():
        fake = _outputs(op(*ma, **mk))
    if len(real) != len(fake):
        raise RuntimeError(f"opcheck({op._name}): test_faketensor: the fake returned {len(fake)} outputs, the op "
                           f"{len(real)}")
    for i, (r, f) in enumerate(zip(real, fake)):
        for what, rv, fv in (("sizes", tuple(r.shape), tuple(f.shape)), ("dtype", r.dtype, f.dtype),
                             ("strides", tuple(r.stride()), tuple(f.stride()))):
            if rv != fv and not (what == "strides" and r.numel() <= 1):
                raise RuntimeError(f"opcheck({op._name}): test_faketensor: output {i}'s {what} on meta are {fv}, "
                                   f"the real output's are {rv}")


def _test_autograd_registration(op, args, kwargs, atol, rtol):
    """Inputs that require grad need a registered derivative, and it must
    match finite differences (gradcheck, in float64)."""
    from .autograd.gradcheck import gradcheck

    bound = op._bind(list(args), dict(kwargs))
    names = [n for n, v in bound.arguments.items()
             if isinstance(v, Tensor) and v.requires_grad and v.dtype.is_floating_point]
    if not names:
        return
    if op._backward is None:
        raise RuntimeError(f"opcheck({op._name}): test_autograd_registration: inputs {names} require grad but no "
                           "derivative is registered (register_autograd)")
    import tensord

    values = dict(bound.arguments)
    for n in names:
        values[n] = values[n].detach().to(tensord.float64).requires_grad_()
    order = list(values)
    eps, default_tol = 1e-6, (1e-5, 1e-3)

    def call(*diff):
        v = dict(values)
        v.update(zip(names, diff))
        out = op(*[v[n] for n in order])
        outs = _outputs(out)
        return tuple(outs) if len(outs) > 1 else outs[0]

    if getattr(op, "_float64_fallback", False):
        try:
            with no_grad():
                for o in _outputs(call(*[values[n] for n in names])):
                    if o.device.type != "meta":
                        o.numpy()  # a sync point: where a kernel's error shows
        except RuntimeError:
            # A compiled kernel that takes only the sample's dtype: finite
            # differences in that dtype, with a step and tolerances it can hold.
            for n in names:
                values[n] = bound.arguments[n].detach().clone().requires_grad_()
            eps, default_tol = 1e-3, (1e-2, 1e-2)
    from .autograd.gradcheck import GradcheckError
    try:
        gradcheck(call, tuple(values[n] for n in names), eps=eps, atol=atol if atol is not None else default_tol[0],
                  rtol=rtol if rtol is not None else default_tol[1])
    except GradcheckError as e:
        raise GradcheckError(f"opcheck({op._name}): test_autograd_registration: the derivative of {names} does "
                             f"not match finite differences: {e}") from None


def opcheck(op, args, kwargs=None, *, test_utils=DEFAULT_TEST_UTILS, raise_exception=True, atol=None, rtol=None):
    """Checks a custom op on one sample (`args`, `kwargs`), as
    torch.library.opcheck: "test_schema" (arguments outside mutates_args
    keep their values; no output is an input), "test_faketensor" (the fake,
    or the body on meta, gives the real outputs' sizes, strides and dtypes),
    "test_autograd_registration" (inputs that require grad have a registered
    derivative, and it passes gradcheck in float64 with `atol`/`rtol`).
    Returns {test: "SUCCESS" or the exception}; with `raise_exception` the
    first failure is raised (RuntimeError, or gradcheck's GradcheckError).
    `op` may also be an op defined with tensord.library.define or loaded
    from a kernel artifact (tensord.ops.ns.name, or its name): its shape
    rule is the fake, its declared derivative the registered one, and when
    its kernel refuses float64 the gradcheck runs in the sample's dtype with
    a step and tolerances for it (eps 1e-3, atol and rtol 1e-2 unless given).
    ValueError for an unknown test name, an op that is none of these, or one
    with overloads (check one overload)."""
    op = _opcheck_target(op)
    kwargs = dict(kwargs or {})
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    unknown = [t for t in test_utils if t not in DEFAULT_TEST_UTILS]
    if unknown:
        raise ValueError(f"opcheck: unknown test_utils {unknown}; the tests are {list(DEFAULT_TEST_UTILS)}")
    results = {}
    for test in test_utils:
        try:
            if test == "test_schema":
                _test_schema(op, args, kwargs)
            elif test == "test_faketensor":
                _test_faketensor(op, args, kwargs)
            else:
                _test_autograd_registration(op, args, kwargs, atol, rtol)
            results[test] = "SUCCESS"
        except Exception as e:
            if raise_exception:
                raise
            results[test] = e
    return results
