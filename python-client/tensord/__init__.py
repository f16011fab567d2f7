"""tensord: a tensor runtime in its own process, driven from Python with
PyTorch's API.

Tensors live in a daemon (``tensord serve``); this package holds handles to
them and streams op calls, so ``x.shape``, ``x.dtype`` and ``x.stride()``
answer at once and only reading values (``numpy()``, ``item()``,
``tolist()``, printing) waits for the daemon. Meta tensors
(``device='meta'``) carry only metadata and need no daemon at all::

    import tensord
    x = tensord.randn(8, 4)                       # spawns a private daemon on first use
    w = tensord.randn(2, 4)
    print((x @ w.T).sum(dim=0))                   # computed in the daemon
    with tensord.device("meta"):
        print(tensord.zeros(3, 4).shape)          # tensord.Size([3, 4]), no daemon

Functions and Tensor methods are generated from the op table shared with the
daemon; ``tensord.connect(address)`` selects a daemon (default:
``$TENSORD_ADDRESS`` or an embedded one). Importing tensord starts nothing.
"""
import atexit as _atexit
import builtins as _builtins
import os as _os

from . import _C
from ._device import device
from ._dtype import ALIASES as _ALIASES, BY_NAME as _BY_NAME, dtype
from ._size import Size
from ._tensor import Tensor, install_op_overrides as _install_op_overrides, install_tensor_api as _install_tensor_api
from ._tensor import name_tensor_members as _name_tensor_members
from ._creation import as_tensor, from_numpy, randperm, tensor, wrap_factories as _wrap_factories
from ._session import Session, connect, default_session, stats, synchronize
from ._memory import (empty_cache, max_memory_allocated, memory_allocated, memory_reserved, memory_stats,
                      reset_peak_memory_stats)
from ._meta_value import DLDeviceType, TensorMeta
from . import _ops
from ._einsum import einsum

_C._register_types(dtype, device, _os.path.dirname(_os.path.abspath(__file__)) + _os.sep)
_install_tensor_api()
_functions, _methods = _ops.install(globals(), Tensor)
_install_op_overrides(Tensor)
_wrap_factories(globals(), _C.op_table())
from . import _reduction  # noqa: E402  (torch.norm's Python-level arguments)
_reduction.install(globals(), Tensor)
from . import _isclose  # noqa: E402  (isclose/allclose: composites of table ops)
_isclose.install(globals(), Tensor)
_name_tensor_members(Tensor)  # pickle finds tensord.Tensor.<name> (after every install above)
return_types = _ops.return_types
from . import autograd  # noqa: E402
from . import library, ops  # noqa: E402  (ops defined at run time: tensord.library.define, tensord.ops.<ns>.<name>)
from . import cpp_extension  # noqa: E402  (kernel artifacts from C++/CUDA source)
from .autograd import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,  # noqa: E402
                       no_grad, set_grad_enabled)


def manual_seed(seed):
    """Seeds the random number generators of the current session, one per
    device as in PyTorch (the ops rand, randn, uniform_, normal_, dropout, ...
    draw from their device's), and of every session opened later in this
    process, so runs repeat. ``seed`` is an int (negative
    values wrap modulo 2**64, as PyTorch). Returns None."""
    if not isinstance(seed, _builtins.int) or isinstance(seed, _builtins.bool):  # int/bool are dtypes here
        raise TypeError(f"manual_seed expected an int, got {type(seed).__name__}")
    _C.manual_seed(seed & 0xFFFFFFFFFFFFFFFF)

# dtypes: canonical names and PyTorch's aliases (these shadow builtins such as
# `float` and `bool` inside this module only, as in torch).
globals().update(_BY_NAME)
globals().update(_ALIASES)

from . import nn, optim  # noqa: E402  (tensord.nn, tensord.optim)
from . import cuda  # noqa: E402  (tensord.cuda: torch.cuda's device queries and memory functions)
from . import backends  # noqa: E402  (tensord.backends: torch.backends' switches)
from .backends import get_float32_matmul_precision, set_float32_matmul_precision  # noqa: E402
from .serialization import load, save  # noqa: E402  (safetensors files)
_atexit.register(_C.shutdown)

OutOfMemoryError = _C.OutOfMemoryError


def is_tensor(obj):
    """True when ``obj`` is a tensord.Tensor (of any device, meta included), as
    torch.is_tensor."""
    return isinstance(obj, Tensor)


__all__ = (["Tensor", "Size", "device", "dtype", "tensor", "from_numpy", "as_tensor", "connect", "Session",
            "default_session", "synchronize", "stats", "return_types", "autograd", "no_grad", "enable_grad",
            "set_grad_enabled", "is_grad_enabled", "inference_mode", "is_inference_mode_enabled",
            "manual_seed", "is_tensor", "OutOfMemoryError", "TensorMeta", "DLDeviceType", "einsum", "isclose",
            "allclose", "randperm", "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
            "reset_peak_memory_stats", "empty_cache", "backends", "set_float32_matmul_precision",
            "get_float32_matmul_precision"]
           + sorted(_functions) + sorted(_BY_NAME) + sorted(_ALIASES))
__version__ = "0.1.0"
