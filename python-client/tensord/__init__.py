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
import os as _os

from . import _C
from ._device import device
from ._dtype import ALIASES as _ALIASES, BY_NAME as _BY_NAME, dtype
from ._size import Size
from ._tensor import Tensor, install_tensor_api as _install_tensor_api
from ._creation import as_tensor, from_numpy, tensor
from ._session import Session, connect, default_session, stats, synchronize
from . import _ops

_C._register_types(dtype, device, _os.path.dirname(_os.path.abspath(__file__)) + _os.sep)
_install_tensor_api()
_functions, _methods = _ops.install(globals(), Tensor)
return_types = _ops.return_types

# dtypes: canonical names and PyTorch's aliases (these shadow builtins such as
# `float` and `bool` inside this module only, as in torch).
globals().update(_BY_NAME)
globals().update(_ALIASES)

_atexit.register(_C.shutdown)

__all__ = (["Tensor", "Size", "device", "dtype", "tensor", "from_numpy", "as_tensor", "connect", "Session",
            "default_session", "synchronize", "stats", "return_types"]
           + sorted(_functions) + sorted(_BY_NAME) + sorted(_ALIASES))
__version__ = "0.1.0"
