"""User-defined differentiable functions: ``tensord.autograd.Function``.

The forward runs as ordinary daemon ops (under ``no_grad``); ``apply`` then
records one node in the daemon's graph (a RecordFunction request). When the
daemon's engine reaches that node during backward, it calls back to this
client over the session stream; the client runs the class's Python
``backward(ctx, *grad_outputs)`` on the thread waiting in ``backward()`` and
sends the gradients back. Both styles of the TensorPlay extension page work::

    class Exp(Function):                       # combined style
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return grad_out * x.exp()

    class Mul(Function):                       # separate style
        @staticmethod
        def forward(a, b):
            return a * b

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, grad_out):
            a, b = ctx.saved_tensors
            return grad_out * b, grad_out * a
"""
import itertools
import threading

from .. import _C
from .grad_mode import no_grad

__all__ = ["Function", "FunctionCtx"]

Tensor = _C.Tensor

# function_id -> (Function class, ctx, number of forward arguments), while
# the daemon's node exists.
_functions = {}
_next_id = itertools.count(1)
_state = threading.local()


class FunctionCtx:
    """The context object passed to ``forward``/``setup_context`` and ``backward``.

    Besides the methods below, any attribute may be stored on it (``ctx.k = 3``)
    and read back in ``backward``.
    """

    def __init__(self):
        self._saved = ()
        self._backward_saved = None  # the daemon's unpacked saved tensors, during backward
        self._freed = False
        self._tensor_inputs = ()
        self._non_differentiable = []
        self._dirty = []
        self.materialize_grads = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        """Saves tensors (inputs, outputs or None) for ``backward``, where they come
        back as ``ctx.saved_tensors`` in the same order. Call it at most once.
        TypeError for anything that is not a Tensor or None."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self._saved = tuple(tensors)

    @property
    def saved_tensors(self):
        """The tensors given to ``save_for_backward`` (a tuple). Inside ``backward``
        they are the daemon's saved tensors (checked against in-place changes
        since forward; a saved output has this function as grad_fn, so double
        backward sees it). RuntimeError once the daemon freed the function's node."""
        if self._backward_saved is not None:
            return self._backward_saved
        if self._freed:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved tensors after calling backward.")
        return self._saved

    def mark_non_differentiable(self, *tensors):
        """Declares outputs that carry no gradient: they get ``requires_grad=False``,
        so a backward through them is an error (not a silent zero); their incoming
        gradient in ``backward`` is zeros (or None without materialized grads)."""
        self._non_differentiable.extend(tensors)

    def mark_dirty(self, *tensors):
        """Declares inputs that ``forward`` modified in place (and returns). Their
        history is rebased onto this function's node; a leaf that requires grad
        cannot be modified in place (RuntimeError)."""
        self._dirty.extend(tensors)

    def set_materialize_grads(self, value):
        """``set_materialize_grads(False)``: ``backward`` receives None for outputs
        whose gradient was not computed, instead of zeros (the default, True)."""
        self.materialize_grads = bool(value)

    def _free(self):
        self._saved = ()
        self._freed = True


def _drop_released():
    """Frees the contexts of functions whose daemon node is gone."""
    for fid in _C._take_released_functions():
        rec = _functions.pop(fid, None)
        if rec is not None:
            rec[1]._free()


def _same(a, b):
    return a is b or (isinstance(a, Tensor) and isinstance(b, Tensor) and a._impl_id == b._impl_id)


class _FunctionMeta(type):
    """Gives each Function subclass the name of its node (``<Name>Backward``)."""

    def __init__(cls, name, bases, attrs):
        cls._backward_name = name + "Backward"
        super().__init__(name, bases, attrs)


class Function(metaclass=_FunctionMeta):
    """Base class of user-defined differentiable functions (see the module
    docstring). Subclasses define static ``forward`` and ``backward`` methods,
    and optionally ``setup_context``; they are used through ``apply``, never
    instantiated."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("tensord.autograd.Function subclasses are not instantiated: call "
                           f"{type(self).__name__}.apply(...) instead")

    @staticmethod
    def forward(*args, **kwargs):
        """Computes the outputs. Combined style: ``forward(ctx, *inputs)``; separate
        style (with ``setup_context``): ``forward(*inputs)``. Runs under no_grad."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Separate style: fills ``ctx`` from the forward ``inputs`` (a tuple) and
        its ``output``. Not overriding it selects the combined style."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Given one gradient per forward output, returns one gradient per forward
        input (a Tensor, or None for inputs that need none / are not tensors).
        Runs with grad mode on only for ``create_graph=True`` (double backward)."""
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Runs ``forward`` on ``args`` and, when grad mode is on and a tensor input
        requires grad, records the function in the autograd graph. Returns what
        forward returned (outputs that require grad get ``grad_fn`` =
        ``<Name>Backward``)."""
        _drop_released()
        ctx = FunctionCtx()
        grad_on = _C.is_grad_enabled()
        ctx.needs_input_grad = tuple(grad_on and isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx._tensor_inputs = tuple(isinstance(a, Tensor) for a in args)
        separate = getattr(cls.setup_context, "__func__", cls.setup_context) is not \
            getattr(Function.setup_context, "__func__", Function.setup_context)
        with no_grad():
            if separate:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        is_tuple = isinstance(output, tuple)
        outs = list(output) if is_tuple else [output]
        tensor_inputs = [a for a in args if isinstance(a, Tensor)]
        # An input returned unchanged (not dirty) becomes a new alias, so that
        # giving it a grad_fn does not rewrite the input's own history.
        for i, o in enumerate(outs):
            if isinstance(o, Tensor) and any(_same(o, a) for a in tensor_inputs) and \
                    not any(_same(o, d) for d in ctx._dirty):
                with no_grad():
                    outs[i] = o.view(o.shape)
        tensor_outs = [o for o in outs if isinstance(o, Tensor)]
        if any(ctx.needs_input_grad):
            fid = next(_next_id)
            nd = [any(_same(o, n) for n in ctx._non_differentiable) for o in tensor_outs]
            # The daemon keeps the saved tensors in the node (sent as they are,
            # so it knows which are the function's own outputs); backward gets
            # them from there. Here saved outputs are kept only as detached
            # aliases: a saved output holding its own grad_fn would keep the
            # node (and itself) alive forever.
            to_save = list(ctx._saved)
            ctx._saved = tuple(
                (t.detach() if isinstance(t, Tensor) and any(_same(t, o) for o in tensor_outs)
                 and not any(_same(t, a) for a in tensor_inputs) else t)
                for t in ctx._saved)
            recorded = _C._record_function(fid, cls._backward_name, list(args), tensor_outs, nd, list(ctx._dirty),
                                           ctx.materialize_grads, to_save)
            if recorded and any(not o.is_meta for o in tensor_outs + tensor_inputs):
                _functions[fid] = (cls, ctx, len(args))
        return tuple(outs) if is_tuple else outs[0]


def _backward_handler(function_id, grads, create_graph, saved=None):
    """Run by the C++ client when the daemon reaches a Function's node: calls the
    class's backward (``ctx.saved_tensors`` = ``saved``, the daemon's unpacked
    saved tensors) and returns one gradient (or None) per forward argument.
    RuntimeError when backward returns a gradient for a non-tensor input."""
    try:
        rec = _functions.get(function_id)
        if rec is None:
            raise RuntimeError(f"the daemon asked for the backward of autograd.Function #{function_id}, whose "
                               "context is no longer held by this client")
        cls, ctx, nargs = rec
        previous = ctx._backward_saved
        if saved is not None and not ctx._freed:
            ctx._backward_saved = tuple(saved)
        try:
            result = cls.backward(ctx, *grads)
        finally:
            ctx._backward_saved = previous
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) > nargs and all(r is None for r in result[nargs:]):
            result = result[:nargs]
        if len(result) != nargs:
            raise RuntimeError(f"function {cls._backward_name} returned an incorrect number of gradients "
                               f"(expected {nargs}, got {len(result)})")
        out = []
        for i, g in enumerate(result):
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(f"function {cls._backward_name} returned a gradient of type {type(g).__name__} "
                                f"for input {i}; expected a Tensor or None")
            if g is not None and i < len(ctx._tensor_inputs) and not ctx._tensor_inputs[i]:
                raise RuntimeError(f"function {cls._backward_name} returned a gradient different than None at "
                                   f"position {i + 1}, but the corresponding forward input was not a Variable")
            out.append(g if (g is not None and ctx.needs_input_grad[i]) else None)
        return out
    except BaseException as e:  # noqa: B902  (re-raised by the waiting backward())
        _state.pending = e
        raise


def _run_engine(fn, *args):
    """Runs a blocking backward/grad call; an exception raised by a Python
    backward inside it is re-raised as itself."""
    _state.pending = None
    try:
        return fn(*args)
    except Exception:
        pending = getattr(_state, "pending", None)
        _state.pending = None
        if pending is not None:
            raise pending
        raise
    finally:
        _drop_released()


_C._set_backward_handler(_backward_handler)
