"""Grad mode: whether ops on the current thread are recorded for autograd.

``no_grad``, ``enable_grad`` and ``set_grad_enabled`` work as context managers
and as function decorators, as in PyTorch. The flag is thread-local and kept
by the C++ client (it decides ``OpCall.record_grad`` for every call).
"""
import functools
import inspect
import threading

from .. import _C

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]


def is_grad_enabled():
    """True when ops on this thread are recorded for autograd (the default)."""
    return _C.is_grad_enabled()


class _GradModeContext:
    """Base of the grad-mode contexts: restores the previous mode on exit and
    wraps functions when used as a decorator."""

    _mode = None

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, func):
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():  # a context of its own per call (calls may nest or run on several threads)
                return func(*args, **kwargs)
        return wrapper

    def _wrap_generator(self, func):
        """A generator function decorated: the mode holds while the generator
        runs (each resume), not in the caller between resumes, as in PyTorch."""
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            gen = func(*args, **kwargs)
            try:
                with self.clone():
                    value = next(gen)
                while True:
                    try:
                        sent = yield value
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as e:  # thrown in by the caller: pass it on inside the mode
                        with self.clone():
                            value = gen.throw(e)
                    else:
                        with self.clone():
                            value = gen.send(sent)
            except StopIteration as stop:
                return stop.value
        return wrapper

    def clone(self):
        """A new context of the same kind."""
        return type(self)()


class no_grad(_GradModeContext):
    """Context manager (and decorator) that disables gradient recording on this
    thread: ops run in the daemon as usual but record no graph, and their
    outputs have ``requires_grad=False``. Used for inference and for in-place
    parameter updates (optimizers, ``nn.init``)."""

    _mode = False


class enable_grad(_GradModeContext):
    """Context manager (and decorator) that enables gradient recording on this
    thread, e.g. inside a ``no_grad`` block."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(mode)``: sets grad mode to ``mode`` (a bool) at once;
    used as a context manager, the previous mode comes back on exit; also a
    decorator. TypeError when ``mode`` is not a bool."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled() expects a bool, got {type(mode).__name__}")
        self._prev = _C.is_grad_enabled()
        self._mode = mode
        _C._set_grad_enabled(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, func):
        _C._set_grad_enabled(self._prev)  # as a decorator, the mode applies only inside calls
        return super().__call__(func)

    def clone(self):
        """A new context with the same mode."""
        return set_grad_enabled(self._mode)


_inference = threading.local()  # modes: the inference_mode blocks entered on this thread, innermost last


def is_inference_mode_enabled():
    """True inside an ``inference_mode()`` block on this thread (and not in an
    ``inference_mode(False)`` nested in it)."""
    modes = getattr(_inference, "modes", None)
    return bool(modes) and modes[-1]


class inference_mode(_GradModeContext):
    """``inference_mode(mode=True)``: context manager (and decorator) for
    inference, as in PyTorch: inside ``inference_mode()`` gradients are not
    recorded (as in ``no_grad``) and ``is_inference_mode_enabled()`` is True;
    inside ``inference_mode(False)`` gradients are recorded again and it is
    False. The previous modes come back on exit. ``mode`` is read as a bool.
    Unlike PyTorch, tensors made inside are ordinary tensors (PyTorch marks
    them as inference tensors that autograd later refuses); the daemon keeps
    no version counters to skip, so there is nothing further to save."""

    def __init__(self, mode=True):
        self._enabled = bool(mode)
        self._prevs = []  # one per enter: the same object may be entered again inside itself

    def __enter__(self):
        self._prevs.append(_C.is_grad_enabled())
        _C._set_grad_enabled(not self._enabled)
        if not hasattr(_inference, "modes"):
            _inference.modes = []
        _inference.modes.append(self._enabled)
        return self

    def __exit__(self, *exc):
        _inference.modes.pop()
        _C._set_grad_enabled(self._prevs.pop())
        return False

    def clone(self):
        """A new context with the same mode."""
        return inference_mode(self._enabled)
