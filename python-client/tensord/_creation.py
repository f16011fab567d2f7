"""Tensors from host data: ``tensord.tensor``, ``tensord.from_numpy``,
``tensord.as_tensor``. The data is gathered into a C-contiguous NumPy buffer
and handed to the C++ client, which uploads it (inline when small, chunked
when large) or, for ``device='meta'``, keeps only its shape. Also
``tensord.randperm``, a factory composed of the table's rand and topk.
"""
import numpy as np

from . import _C
from ._dtype import BY_NAME, dtype as _dtype_cls, from_numpy_dtype
from ._device import device as _device_cls

__all__ = ["tensor", "from_numpy", "as_tensor", "randperm"]

_NUMPY_NAMES = {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"}


def _device_arg(device):
    if device is None:
        return None
    if isinstance(device, (_device_cls, str)):
        return str(device)
    raise TypeError(f"device must be a str or tensord.device, not {type(device).__name__}")


def _check_dtype(dtype):
    if dtype is not None and not isinstance(dtype, _dtype_cls):
        raise TypeError(f"dtype must be a tensord.dtype (e.g. tensord.float32), not {type(dtype).__name__}")


def _upload(arr, dtype, device):
    """Uploads a NumPy array (any layout) as ``dtype``: directly when NumPy has
    the dtype, else as float32 converted by the daemon (bfloat16, float8)."""
    name = dtype._name if dtype._name in _NUMPY_NAMES else "float32"
    # np.ascontiguousarray would turn a 0-dim array into a 1-dim one.
    src = np.asarray(arr, dtype=np.dtype(name))
    if not src.flags.c_contiguous or src.dtype.byteorder == ">":
        src = np.array(src, dtype=np.dtype(name).newbyteorder("="), order="C")
    t = _C.from_buffer(src.reshape(-1), list(src.shape), BY_NAME[name]._code, _device_arg(device))
    return t if name == dtype._name else _C.call_method("to", t, dtype)


def _infer(data):
    """NumPy array and tensord dtype of Python data, with PyTorch's inference:
    bools -> bool, ints -> int64, floats (or mixed) -> float32."""
    try:
        arr = np.array(data)
    except ValueError as e:
        raise ValueError(f"tensor(): the data is not a rectangular nested sequence of numbers ({e})") from None
    kind = arr.dtype.kind
    if arr.size == 0 and kind == "f":
        return arr, BY_NAME["float32"]
    if kind == "b":
        return arr, BY_NAME["bool"]
    if kind in "iu":
        return arr, BY_NAME["int64"]
    if kind == "f":
        return arr, BY_NAME["float32"]
    if kind == "O":
        raise TypeError("tensor(): could not infer a dtype: the data holds objects that are not numbers "
                        "(or ints too large for int64)")
    raise TypeError(f"tensor(): could not infer a dtype from data of NumPy kind {kind!r} ({arr.dtype})")


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data``.

    Args:
        data: a Python number or bool, a (nested) sequence of them, a NumPy
            array, or a tensord.Tensor (copied).
        dtype: the element type; by default inferred as PyTorch does: bools
            give ``tensord.bool``, ints ``tensord.int64``, floats (or a mix
            with ints) ``tensord.float32``; NumPy arrays keep their dtype.
        device: 'cpu' (default, or the innermost ``with tensord.device(...)``),
            'cuda:N', or 'meta' (a meta tensor of the data's shape: nothing is
            uploaded and no daemon is needed).
        requires_grad: make the new tensor a leaf that requires grad
            (RuntimeError for non-floating dtypes).

    Returns a Tensor of the data's shape (0-dim for a number). The upload is
    streamed, not waited for. Raises ValueError for ragged sequences and
    TypeError for data that is not numeric.
    """
    _check_dtype(dtype)
    if isinstance(data, _C.Tensor):
        # A copy without history (PyTorch's tensor(t) is t.clone().detach()).
        out = _C.call_method("clone", _C.call_method("detach", data))
        if dtype is not None:
            out = _C.call_method("to", out, dtype)
        if device is not None:
            out = _C.call_method("to", out, _device_arg(device))
    else:
        if isinstance(data, np.ndarray):
            arr, inferred = data, from_numpy_dtype(data.dtype)
        else:
            arr, inferred = _infer(data)
        out = _upload(arr, dtype or inferred, device)
    if requires_grad:
        out._set_requires_grad(True)
    return out


def wrap_factories(module_dict, op_table):
    """Adds PyTorch's ``requires_grad=False`` keyword to every generated function
    whose op takes ``device=`` (factories and ``*_like``): the result is made a
    leaf that requires grad when it is True."""
    names = {e["name"] for e in op_table if e["is_function"] and "device" in e["arguments"]}
    for name in names:
        fn = module_dict.get(name)
        if fn is None:
            continue
        if isinstance(fn, _C.OpFunction):
            # The same op function taking requires_grad= in C (no Python frame).
            wrapped = _C.OpFunction(fn.op_name, "function", requires_grad_kw=True)
        else:
            def wrapped(*args, requires_grad=False, _fn=fn, **kwargs):
                out = _fn(*args, **kwargs)
                if requires_grad:
                    out._set_requires_grad(True)
                return out
        wrapped.__name__ = fn.__name__
        wrapped.__qualname__ = fn.__qualname__
        wrapped.__module__ = fn.__module__
        wrapped.__doc__ = (fn.__doc__ or "") + ("\n\n``requires_grad=True`` makes the result a leaf that requires "
                                                 "grad (floating dtypes only).")
        module_dict[name] = wrapped


def from_numpy(ndarray):
    """A cpu tensor holding a copy of a NumPy array, keeping its dtype and shape.

    Supported dtypes: bool, uint8, int8, int16, int32, int64, float16,
    float32, float64; others raise TypeError (as torch.from_numpy). Any memory
    layout is accepted (the copy is contiguous). Unlike torch.from_numpy the
    tensor does not share memory with the array: its data lives in the daemon.
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return _upload(ndarray, from_numpy_dtype(ndarray.dtype), "cpu")


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor``, but a tensord.Tensor is returned as is when it already has
    the requested dtype and device (else converted with ``to``, an alias when
    nothing changes)."""
    _check_dtype(dtype)
    if isinstance(data, _C.Tensor):
        out = data
        if dtype is not None and out.dtype is not dtype:
            out = _C.call_method("to", out, dtype)
        if device is not None and str(out.device) != str(_device_cls(_device_arg(device))):
            out = _C.call_method("to", out, _device_arg(device))
        return out
    return tensor(data, dtype=dtype, device=device)


def randperm(n, *, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 .. n-1`` as a 1-D tensor of ``n`` elements,
    drawn from the session's generator (seeded by ``tensord.manual_seed``),
    as PyTorch 1.13's torch.randperm (the permutations themselves differ
    from PyTorch's for the same seed).

    Computed in the daemon, with no round trip, as the order of ``n``
    uniform float64 keys (``topk(rand(n, dtype=float64), n).indices``). Every
    order is equally likely except that two of the n keys may be equal
    (each key has 53 random bits; the chance of any tie is below
    n**2 / 2**54, about 6e-5 for n = 10**6), in which case those two keep
    their index order. Sorting costs O(n log n) in the daemon.

    ``dtype``: default int64; integer and floating dtypes as PyTorch
    (RuntimeError for bool, for an integer dtype that cannot hold n - 1,
    "value cannot be converted to type int8_t without overflow", and for
    float16 with n > 2049). ``device`` as the other factories (``'meta'``
    gives a meta tensor). ``requires_grad=True`` needs a floating dtype
    (RuntimeError otherwise). PyTorch's ``generator``, ``out``, ``layout``
    and ``pin_memory`` are not accepted (TypeError). TypeError for a
    non-int ``n``; RuntimeError for a negative one.
    """
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"randperm(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    _check_dtype(dtype)
    dtype = BY_NAME["int64"] if dtype is None else dtype
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    name = dtype._name
    if name == "bool" or name.startswith("float8"):
        raise RuntimeError(f'"randperm" not implemented for \'{dtype._c10}\'')
    if not dtype.is_floating_point and n > 0 and n - 1 > np.iinfo(name).max:
        raise RuntimeError(f"value cannot be converted to type {name}_t without overflow")
    if name == "float16" and n > 2049:
        raise RuntimeError("n cannot be greater than 2049 for Half type.")
    if requires_grad and not dtype.is_floating_point:
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
    keys = _C.call("rand", [n], dtype=BY_NAME["float64"], device=_device_arg(device))
    out = _C.call("topk", keys, n)[1]   # (values, indices)
    if name != "int64":
        out = _C.call_method("to", out, dtype)
    if requires_grad:
        out._set_requires_grad(True)
    return out
