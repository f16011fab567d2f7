"""``tensord.backends``: PyTorch's ``torch.backends`` switches, for the
daemon's kernels::

    tensord.backends.cuda.matmul.allow_tf32 = True   # float32 products may use TF32 tensor cores
    tensord.backends.cudnn.allow_tf32 = False        # float32 convolutions must not
    tensord.set_float32_matmul_precision("high")     # the same as allow_tf32 = True

The numerics switches (``cuda.matmul.allow_tf32``, ``cudnn.allow_tf32``)
are this process's, as in PyTorch, and are sent to the daemon: to the
current session at once and to every session opened later. The daemon
keeps them per session, so on a shared daemon one user's choice never
changes another's results. Their defaults are PyTorch's: TF32 off for
matrix products, on for convolutions. They change nothing on the CPU.

What differs from ``torch.backends``:

- ``set_float32_matmul_precision("medium")`` allows what ``"high"`` does
  (TF32); tensord has no bfloat16-based float32 product.
- tensord's CUDA kernels do not use cuDNN: ``cudnn.is_available()`` is
  False and ``cudnn.version()`` None; ``cudnn.enabled``, ``benchmark`` and
  ``deterministic`` are kept and read back but change nothing (tensord's
  CUDA kernels are deterministic: no kernel sums with float atomics).
- ``mps.is_available()`` is False (the daemon has no Apple GPU device).
"""
import sys as _sys
import types as _types

from .. import _C

__all__ = ["cuda", "cudnn", "mps"]


def _check_bool(name, value):
    # torch.backends raises RuntimeError for a non-bool ("set_allow_tf32_cublas
    # expects a bool, but got str").
    if not isinstance(value, bool):
        raise RuntimeError(f"{name} expects a bool, but got {type(value).__name__}")


def _set_math(matmul=None, conv=None):
    cur_matmul, cur_conv = _C._get_math_mode()
    _C._set_math_mode(cur_matmul if matmul is None else matmul, cur_conv if conv is None else conv)


class _Flags(_types.ModuleType):
    """A module of settable flags that refuses unknown names, as
    torch.backends' modules do (AssertionError "Unknown attribute foo")."""

    _names = ()

    def __setattr__(self, name, value):
        if name.startswith("_") or name in self._names or callable(value):
            super().__setattr__(name, value)
        else:
            raise AssertionError(f"Unknown attribute {name}")

    def __getattr__(self, name):
        if name.startswith("__"):
            # What the import system and introspection probe for (__path__,
            # __wrapped__) must stay an AttributeError: hasattr() answers False.
            raise AttributeError(name)
        raise AssertionError(f"Unknown attribute {name}")


class _Matmul(_Flags):
    """``tensord.backends.cuda.matmul``."""

    _names = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __init__(self):
        super().__init__("tensord.backends.cuda.matmul")
        # float16/bfloat16 products accumulate in float32 either way; kept
        # for programs that set them.
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self):
        """Whether float32 matrix products (mm, bmm, addmm, matmul, linear,
        ...) on CUDA may use TF32 tensor cores (10-bit mantissas in the
        products: faster, about 1e-3 relative error). False by default.
        Setting a non-bool raises RuntimeError."""
        return _C._get_math_mode()[0]

    @allow_tf32.setter
    def allow_tf32(self, value):
        _check_bool("set_allow_tf32_cublas", value)
        _set_math(matmul=value)


class _Cuda(_Flags):
    """``tensord.backends.cuda``."""

    _names = ("matmul",)

    def __init__(self):
        super().__init__("tensord.backends.cuda")
        self.matmul = _Matmul()


class _Cudnn(_Flags):
    """``tensord.backends.cudnn``."""

    _names = ("allow_tf32", "enabled", "benchmark", "deterministic")

    def __init__(self):
        super().__init__("tensord.backends.cudnn")
        self.enabled = True
        self.benchmark = False
        self.deterministic = False

    @property
    def allow_tf32(self):
        """Whether float32 convolutions on CUDA may use TF32 tensor cores.
        True by default, as in PyTorch. Setting a non-bool raises
        RuntimeError."""
        return _C._get_math_mode()[1]

    @allow_tf32.setter
    def allow_tf32(self, value):
        _check_bool("set_allow_tf32_cudnn", value)
        _set_math(conv=value)

    @staticmethod
    def is_available():
        """False: tensord's CUDA kernels do not use cuDNN."""
        return False

    @staticmethod
    def version():
        """None: tensord's CUDA kernels do not use cuDNN."""
        return None


class _Mps(_Flags):
    """``tensord.backends.mps``."""

    def __init__(self):
        super().__init__("tensord.backends.mps")

    @staticmethod
    def is_available():
        """False: the daemon has no Apple GPU device."""
        return False

    @staticmethod
    def is_built():
        """False: the daemon has no Apple GPU device."""
        return False


cuda = _Cuda()
cudnn = _Cudnn()
mps = _Mps()
_sys.modules[__name__ + ".cuda"] = cuda
_sys.modules[__name__ + ".cuda.matmul"] = cuda.matmul
_sys.modules[__name__ + ".cudnn"] = cudnn
_sys.modules[__name__ + ".mps"] = mps

_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision):
    """``torch.set_float32_matmul_precision``: ``"highest"`` (float32
    products in float32, the default), ``"high"`` or ``"medium"`` (TF32
    allowed: the same as ``backends.cuda.matmul.allow_tf32 = True``).
    Another string warns and changes nothing, as in PyTorch."""
    if precision not in _PRECISIONS:
        import warnings
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", stacklevel=2)
        return
    _set_math(matmul=precision != "highest")


def get_float32_matmul_precision():
    """``"highest"``, or ``"high"`` when float32 products may use TF32 (see
    ``set_float32_matmul_precision``)."""
    return "high" if _C._get_math_mode()[0] else "highest"
