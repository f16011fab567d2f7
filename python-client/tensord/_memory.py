"""Memory statistics of the current session, per device, with the names of
``torch.cuda``'s: ``tensord.memory_allocated``, ``max_memory_allocated``,
``memory_reserved``, ``reset_peak_memory_stats``, ``memory_stats`` and
``empty_cache``.

The daemon counts each session's storages on each device (their sizes as
asked, before its allocator rounds them up), now and at their peak, and
what each device's allocator holds for all its sessions. Each query is one
round trip, answered once the daemon has executed every op sent before it;
tensors deleted before the query no longer count. It is not a sync point:
an error of an earlier op is still raised by the next one (``numpy()``,
``item()``, ``tensord.synchronize()``).

The session is the one factories on this thread use (``with session:``,
else the default one). With no session open (nothing has run on a daemon
yet, and under ``tensord check``, which runs everything on meta with no
daemon) there is nothing to count: ``memory_stats`` returns ``{}`` and the
others 0, as ``torch.cuda``'s do before CUDA is initialized.
"""
import builtins as _builtins

from . import _C
from ._device import device as _device

__all__ = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved", "reset_peak_memory_stats",
           "empty_cache"]


def _device_name(device, fn):
    """The name of the device a memory statistics function was given (see
    memory_stats for what ``device`` may be)."""
    if device is None:
        return "cpu"
    if isinstance(device, _builtins.bool):   # bool is an int: refuse it as torch does
        raise TypeError(f"{fn}: expected a device, a device name or a CUDA device index (int), got bool")
    if isinstance(device, _builtins.int):
        return str(_device("cuda", device))
    if isinstance(device, (str, _device)):
        return str(_device(device))
    raise TypeError(f"{fn}: expected a device, a device name or a CUDA device index (int), "
                    f"got {type(device).__name__}")


def _query(device, fn, reset_peak=False, empty_cache=False):
    """The raw statistics dict of the current session on ``device``, or None
    when no session is open. With ``empty_cache``, the device's allocator
    first gives back the freed blocks it keeps (``tensord.cuda.empty_cache``)."""
    name = _device_name(device, fn)
    raw = _C.current_session_if_any()
    if raw is None:
        return None
    return raw.memory_stats(name, reset_peak, empty_cache)


def memory_stats(device=None):
    """The current session's memory statistics on a device, as
    ``torch.cuda.memory_stats``: a dict from PyTorch's key names to ints, in
    bytes. One round trip (see the module's description).

    Keys (those of PyTorch's that tensord can fill):

    - ``"allocated_bytes.all.current"``: the bytes of this session's
      storages on the device now (their sizes as asked; a view adds
      nothing; storages the daemon's allocator rounds up count as asked);
    - ``"allocated_bytes.all.peak"``: the most that has been, since the
      session opened or since ``reset_peak_memory_stats(device)``;
    - ``"requested_bytes.all.current"``, ``"requested_bytes.all.peak"``: the
      same two numbers (PyTorch's name for bytes as asked);
    - ``"reserved_bytes.all.current"``: the bytes the device's allocator
      holds for all of the daemon's sessions: their live storages, those
      rounded up to the allocator's blocks, and freed blocks it keeps for
      reuse (on the cpu, storages of 2 MiB and more, kept until a session
      closes or 5 seconds pass without large allocations).

    Args:
        device: a ``tensord.device`` or a device name (``"cpu"``,
            ``"privateuseone:0"``, ``"cuda:1"``); an int ``N`` means
            ``cuda:N``, as ``torch.cuda``'s functions read it. None means the
            CPU.

    Returns ``{}`` when no session is open (nothing has been counted yet).

    Raises:
        RuntimeError: the daemon does not serve the device (``meta``
            included: meta tensors hold no memory); the message names the
            devices it serves. Also for a device name that does not parse.
        TypeError: ``device`` is of another type.
    """
    r = _query(device, "memory_stats")
    if r is None:
        return {}
    return {
        "allocated_bytes.all.current": r["allocated_bytes"],
        "allocated_bytes.all.peak": r["peak_allocated_bytes"],
        "requested_bytes.all.current": r["allocated_bytes"],
        "requested_bytes.all.peak": r["peak_allocated_bytes"],
        "reserved_bytes.all.current": r["reserved_bytes"],
    }


def memory_allocated(device=None):
    """Bytes of the current session's storages on ``device`` now (int), as
    ``torch.cuda.memory_allocated``: ``memory_stats(device)["allocated_bytes.all.current"]``.
    0 when no session is open. ``device`` and errors as in ``memory_stats``."""
    r = _query(device, "memory_allocated")
    return 0 if r is None else r["allocated_bytes"]


def max_memory_allocated(device=None):
    """The most bytes the current session's storages on ``device`` have held at
    once (int), since the session opened or since
    ``reset_peak_memory_stats(device)``, as ``torch.cuda.max_memory_allocated``.
    0 when no session is open. ``device`` and errors as in ``memory_stats``."""
    r = _query(device, "max_memory_allocated")
    return 0 if r is None else r["peak_allocated_bytes"]


def memory_reserved(device=None):
    """Bytes the daemon's allocator for ``device`` holds for all of its sessions
    (int): live storages, their rounding up to the allocator's blocks and the
    freed blocks it keeps for reuse, as ``torch.cuda.memory_reserved``. 0 when
    no session is open. ``device`` and errors as in ``memory_stats``."""
    r = _query(device, "memory_reserved")
    return 0 if r is None else r["reserved_bytes"]


def reset_peak_memory_stats(device=None):
    """Makes ``max_memory_allocated(device)`` start again from what the current
    session holds on ``device`` now, as ``torch.cuda.reset_peak_memory_stats``
    (other devices keep their peaks). Returns None; does nothing when no
    session is open. ``device`` and errors as in ``memory_stats``."""
    _query(device, "reset_peak_memory_stats", reset_peak=True)


def empty_cache(device=None):
    """Has the daemon's allocator for ``device`` give back the freed blocks it
    keeps for reuse (every segment no live storage uses), as
    ``torch.cuda.empty_cache`` does for a GPU; for any device the daemon
    serves (``tensord.cuda.empty_cache()`` does every CUDA device). The cache
    is the daemon's, shared by its sessions; their storages stay. Returns
    None; does nothing when no session is open. ``device`` and errors as in
    ``memory_stats``."""
    _query(device, "empty_cache", empty_cache=True)
