"""``tensord.cuda``: ``torch.cuda``'s device queries and memory functions, for
the CUDA devices of the daemon the current session talks to::

    if tensord.cuda.is_available():
        print(tensord.cuda.get_device_name(), tensord.cuda.get_device_capability())
        x = tensord.randn(1024, 1024, device="cuda")
        print(tensord.cuda.memory_allocated())       # bytes of this session's storages on cuda:0

The devices are the daemon's, not this machine's: a laptop without a GPU
driving a GPU server sees the server's GPUs. The device queries answer from
what the daemon said when the session opened (no round trip); the first
call opens the current session (this thread's ``with session:``, else the
default one, from ``$TENSORD_ADDRESS`` or an embedded daemon) as creating a
tensor would. ``is_available()`` and ``device_count()`` never raise: a
daemon that cannot be reached has no CUDA device (a warning says why, once
per reason), and under ``tensord check`` (no daemon at all) they answer
False and 0 without a warning.

What differs from ``torch.cuda``:

- there is no current-device state: ``"cuda"`` always means ``cuda:0``
  (in ``device=`` arguments too), so ``current_device()`` is 0 and
  ``set_device`` accepts only cuda:0 (another device raises
  NotImplementedError; name it in ``device=`` or use
  ``with tensord.device("cuda:1"):``).
- ``manual_seed`` and ``manual_seed_all`` are ``tensord.manual_seed``: one
  seed for the generators of every device of the session, the CPU's included.
- ``get_device_properties`` carries name, major, minor and total_memory
  (what the daemon reports; no multi_processor_count).
- memory statistics are the session's own (its storages), except
  ``memory_reserved``, which is the device allocator's for all of the
  daemon's sessions; ``max_memory_reserved`` does not exist (the daemon
  keeps no peak of it).
"""
import builtins as _builtins
import os as _os
import warnings as _warnings

from . import _C
from . import _memory
from ._device import device as _device

__all__ = ["is_available", "device_count", "is_initialized", "init", "current_device", "set_device",
           "get_device_name", "get_device_capability", "get_device_properties", "synchronize", "memory_stats",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "reset_peak_memory_stats",
           "empty_cache", "manual_seed", "manual_seed_all", "OutOfMemoryError"]

# torch.cuda.OutOfMemoryError is a RuntimeError; tensord's is one too, and a
# MemoryError (what the client raised for out of memory before it existed).
OutOfMemoryError = _C.OutOfMemoryError

_warned = set()


def _no_daemon_allowed():
    v = _os.environ.get("TENSORD_NO_DAEMON", "")
    return v not in ("", "0")


def _session():
    """The raw session the functions answer for: the current one, opened
    (as a tensor's creation would) when there is none. Raises the
    connection's RuntimeError."""
    raw = _C.current_session_if_any()
    if raw is None or raw.closed:
        raw = _C.current_session()
    return raw


def _cuda_devices(raw):
    return [d for d in raw.device_info if d["type"] == "cuda"]


def _session_quiet():
    """``_session()``, or None when no session can be opened (with a warning
    saying why, once per reason, except under ``tensord check``)."""
    try:
        return _session()
    except RuntimeError as e:
        if not _no_daemon_allowed():
            reason = str(e)
            if reason not in _warned:
                _warned.add(reason)
                _warnings.warn(f"tensord.cuda: no CUDA device, the daemon cannot be reached: {reason}",
                               RuntimeWarning, stacklevel=3)
        return None


def _lazy_init():
    """The session when its daemon serves a CUDA device; otherwise
    RuntimeError naming the daemon, the devices it serves and its reason
    (what torch raises as "Found no NVIDIA driver on your system")."""
    if _no_daemon_allowed():
        raise RuntimeError("tensord.cuda: no CUDA device under tensord check (meta mode: there is no daemon; "
                           "tensors made with device='cuda' are meta tensors)")
    raw = _session()
    if not _cuda_devices(raw):
        reason = raw.cuda_unavailable_reason or "it gave no reason"
        raise RuntimeError(f"tensord.cuda: the tensord daemon at {raw.address} has no CUDA device: {reason} "
                           f"(it serves {', '.join(raw.devices) or 'no device'})")
    return raw


def _device_index(device, fn, optional=True):
    """The CUDA index ``device`` names, as torch.cuda's ``_get_device_index``
    reads it: an int, a ``tensord.device`` or a name ("cuda", "cuda:1");
    None (when ``optional``) and "cuda" without an index are the current
    device, 0. ValueError for another kind of device, TypeError for another
    type."""
    if device is None:
        if optional:
            return 0
        raise ValueError(f"{fn}: expected a cuda device with a specified index or an integer, but got: None")
    if isinstance(device, _builtins.bool):
        raise TypeError(f"{fn}: expected a cuda device, a device name or an int, got bool")
    if isinstance(device, _builtins.int):
        return device
    if isinstance(device, str):
        device = _device(device)
    if isinstance(device, _device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return 0 if device.index is None else device.index
    raise TypeError(f"{fn}: expected a cuda device, a device name or an int, got {type(device).__name__}")


def _properties_of(raw, index, fn):
    devices = _cuda_devices(raw)
    if index < 0 or index >= len(devices):
        raise AssertionError(f"Invalid device id: {fn} of cuda:{index}, but the tensord daemon at {raw.address} "
                             f"serves {len(devices)} CUDA device{'' if len(devices) == 1 else 's'}")
    for d in devices:
        if d["index"] == index:
            return d
    raise AssertionError(f"Invalid device id: {fn} of cuda:{index}: the daemon at {raw.address} serves "
                         f"{', '.join(d['name'] for d in devices)}")


# ---------------------------------------------------------------- availability

def is_available():
    """True when the current session's daemon serves a CUDA device, as
    ``torch.cuda.is_available``. Opens the current session when none is
    open; never raises (False, with a warning, when no daemon can be
    reached; False under ``tensord check``)."""
    return device_count() > 0


def device_count():
    """How many CUDA devices the current session's daemon serves (int), as
    ``torch.cuda.device_count``; 0 when no daemon can be reached. Opens the
    current session when none is open."""
    raw = _session_quiet()
    return 0 if raw is None else len(_cuda_devices(raw))


def is_initialized():
    """True when a session is open whose daemon serves a CUDA device (what
    ``torch.cuda.is_initialized`` says of CUDA's state). Opens nothing."""
    raw = _C.current_session_if_any()
    return raw is not None and not raw.closed and bool(_cuda_devices(raw))


def init():
    """Opens the current session if none is open and raises RuntimeError when
    its daemon has no CUDA device, as ``torch.cuda.init``."""
    _lazy_init()


def current_device():
    """The index of the current CUDA device: always 0 (``"cuda"`` means
    cuda:0 in tensord). RuntimeError when the daemon has no CUDA device, as
    ``torch.cuda.current_device``."""
    _lazy_init()
    return 0


def set_device(device):
    """``torch.cuda.set_device``: cuda:0 (an int, a name or a
    ``tensord.device``) is accepted and changes nothing; a negative int is
    ignored, as torch ignores it. Another CUDA device raises
    NotImplementedError (tensord has no current-device state: name the
    device in ``device=``, or ``with tensord.device("cuda:1"):``), an
    index the daemon lacks AssertionError, a non-cuda device ValueError, and
    a daemon without CUDA RuntimeError."""
    index = _device_index(device, "set_device", optional=False)
    if index < 0:
        return
    raw = _lazy_init()
    _properties_of(raw, index, "set_device")
    if index != 0:
        raise NotImplementedError(f"tensord.cuda.set_device(cuda:{index}): tensord has no current CUDA device to "
                                  f"change ('cuda' always means cuda:0); pass device='cuda:{index}' to the ops, "
                                  f"or use `with tensord.device('cuda:{index}'):` for factories")


# ---------------------------------------------------------------- properties

class _CudaDeviceProperties:
    """What ``get_device_properties`` gives (torch's ``_CudaDeviceProperties``):
    ``name`` (str), ``major`` and ``minor`` (compute capability) and
    ``total_memory`` (bytes), as the daemon reported them when the session
    opened."""

    __slots__ = ("name", "major", "minor", "total_memory")

    def __init__(self, info):
        self.name = info["description"]
        self.major = info["major"]
        self.minor = info["minor"]
        self.total_memory = info["total_memory"]

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB)")


def get_device_properties(device=None):
    """The properties of a CUDA device of the daemon (an int, a name, a
    ``tensord.device``; None: cuda:0), as ``torch.cuda.get_device_properties``.
    No round trip. RuntimeError when the daemon has no CUDA device,
    AssertionError ("Invalid device id") for an index it lacks, ValueError
    for a non-cuda device."""
    index = _device_index(device, "get_device_properties")
    return _CudaDeviceProperties(_properties_of(_lazy_init(), index, "get_device_properties"))


def get_device_name(device=None):
    """The name of a CUDA device ("NVIDIA H100 80GB HBM3"), as
    ``torch.cuda.get_device_name``; arguments and errors as
    ``get_device_properties``."""
    return get_device_properties(device).name


def get_device_capability(device=None):
    """The compute capability of a CUDA device as ``(major, minor)``, as
    ``torch.cuda.get_device_capability``; arguments and errors as
    ``get_device_properties``."""
    p = get_device_properties(device)
    return (p.major, p.minor)


def synchronize(device=None):
    """Waits until the daemon has executed everything the current session sent
    (on every device: the session's requests run in one order) and raises
    the first error not reported yet, as ``tensord.synchronize``. Checks
    ``device`` as ``torch.cuda.synchronize`` does: RuntimeError when the
    daemon has no CUDA device, AssertionError for an index it lacks. Under
    ``tensord check`` it does nothing, as ``tensord.synchronize`` (there is
    no work to wait for), so timing code runs there unguarded."""
    index = _device_index(device, "synchronize")
    if _no_daemon_allowed():
        return
    raw = _lazy_init()
    _properties_of(raw, index, "synchronize")
    raw.synchronize()


# ---------------------------------------------------------------- memory
#
# As torch.cuda's: with no session open, or one whose daemon has no CUDA
# device ("CUDA not initialized"), the statistics are {} and 0 and
# empty_cache does nothing; reset_peak_memory_stats raises, as torch's does.

def _initialized_index(device, fn):
    index = _device_index(device, fn)
    if not is_initialized():
        return None
    return index


def memory_stats(device=None):
    """``tensord.memory_stats`` of ``cuda:<device>`` (None: cuda:0; an int, a
    name or a ``tensord.device``), as ``torch.cuda.memory_stats``; ``{}``
    when no session with a CUDA device is open. One round trip."""
    index = _initialized_index(device, "memory_stats")
    return {} if index is None else _memory.memory_stats(f"cuda:{index}")


def memory_allocated(device=None):
    """Bytes of the current session's storages on the CUDA device now, as
    ``torch.cuda.memory_allocated``; 0 when no session with a CUDA device is
    open. See ``tensord.memory_allocated``."""
    index = _initialized_index(device, "memory_allocated")
    return 0 if index is None else _memory.memory_allocated(f"cuda:{index}")


def max_memory_allocated(device=None):
    """The most bytes the current session's storages on the CUDA device held
    at once since the session opened or ``reset_peak_memory_stats``, as
    ``torch.cuda.max_memory_allocated``; 0 when no session with a CUDA
    device is open."""
    index = _initialized_index(device, "max_memory_allocated")
    return 0 if index is None else _memory.max_memory_allocated(f"cuda:{index}")


def memory_reserved(device=None):
    """Bytes the daemon's allocator for the CUDA device holds for all of its
    sessions (live storages, their rounding, its cache), as
    ``torch.cuda.memory_reserved``; 0 when no session with a CUDA device is
    open."""
    index = _initialized_index(device, "memory_reserved")
    return 0 if index is None else _memory.memory_reserved(f"cuda:{index}")


def reset_peak_memory_stats(device=None):
    """Makes ``max_memory_allocated(device)`` start again from what the
    session holds there now, as ``torch.cuda.reset_peak_memory_stats``.
    RuntimeError when the daemon has no CUDA device (torch raises too)."""
    index = _device_index(device, "reset_peak_memory_stats")
    _properties_of(_lazy_init(), index, "reset_peak_memory_stats")
    _memory.reset_peak_memory_stats(f"cuda:{index}")


def empty_cache():
    """Has the daemon's allocator of every CUDA device give back the freed
    blocks it keeps for reuse, as ``torch.cuda.empty_cache`` (the cache is the
    daemon's, shared by its sessions, as a process's is in PyTorch; the
    sessions' storages stay). One round trip per device; does nothing when
    no session with a CUDA device is open."""
    raw = _C.current_session_if_any()
    if raw is None or raw.closed:
        return
    for d in _cuda_devices(raw):
        raw.memory_stats(d["name"], False, True)


# ---------------------------------------------------------------- random

def manual_seed(seed):
    """``tensord.manual_seed(seed)``: seeds the generators of every device of
    the current session (the CPU's too: tensord has one seed for all of
    them) and of sessions opened later. Opens no session, and does not
    raise without CUDA, as ``torch.cuda.manual_seed`` does not."""
    import tensord
    tensord.manual_seed(seed)


def manual_seed_all(seed):
    """``tensord.manual_seed(seed)`` (see ``manual_seed``)."""
    import tensord
    tensord.manual_seed(seed)
