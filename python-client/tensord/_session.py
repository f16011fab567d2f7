"""Sessions with a tensord daemon: ``tensord.connect``, ``tensord.synchronize``,
``tensord.stats``. A default session is created lazily (from
``$TENSORD_ADDRESS``, else an embedded daemon on a private Unix socket) the
first time a real (non-meta) tensor is created; importing tensord starts
nothing, and meta tensors never need a session.
"""
import os

from . import _C

__all__ = ["Session", "connect", "synchronize", "stats", "default_session"]

_STAT_KEYS = ("ops_issued", "messages_sent", "timed_flushes", "round_trips", "predicted_backwards", "uploads",
              "releases", "shm_uploads", "shm_fetches", "shm_adopted_uploads", "shm_segments_created",
              "artifact_bytes_sent")


class Session:
    """A session with a tensord daemon: its own handle table, memory accounting
    and in-order op stream. Tensors belong to the session that created them;
    using tensors of two sessions in one op raises RuntimeError.

    Use it as a context manager to make factories on this thread create their
    tensors in this session::

        s = tensord.connect("unix:/run/tensord.sock")
        with s:
            x = tensord.ones(3)

    ``close()`` frees everything the session owned in the daemon (and stops an
    embedded daemon); later use of its tensors raises RuntimeError.
    """

    def __init__(self, raw):
        self._raw = raw
        self._previous = []

    @property
    def session_id(self):
        """The daemon's id of this session (int). Error messages and the
        daemon's log lines print it as 16 hex digits ("tensord session
        00000000075bcd15"), as does repr()."""
        return self._raw.session_id

    @property
    def address(self):
        """The daemon's address ('unix:/path' or 'host:port')."""
        return self._raw.address

    @property
    def daemon_pid(self):
        """The pid of the embedded daemon, or 0 for an external one."""
        return self._raw.daemon_pid

    @property
    def closed(self):
        """True once close() ran."""
        return self._raw.closed

    @property
    def uses_shared_memory(self):
        """True when large uploads and fetches of this session go through
        shared memory (same host, Unix socket, daemon's side channel accepted,
        ``$TENSORD_SHM`` not "0" when the session opened); False: the stream."""
        return self._raw.uses_shared_memory

    @property
    def uses_same_host_stream(self):
        """True when this session's ops, sync points and replies travel over
        the daemon's side-channel Unix socket (same host, daemon's side
        channel accepted, ``$TENSORD_SAME_HOST_STREAM`` not "0" when the
        session opened): the same messages as the gRPC stream without gRPC's
        per-message cost. False: the gRPC stream carries them."""
        return self._raw.uses_same_host_stream

    @property
    def uses_tcp_stream(self):
        """True when this session reached the daemon at HOST:PORT and its
        ops, sync points and replies travel over a TCP connection of their
        own to that port (the daemon accepted it, ``$TENSORD_TCP_STREAM`` not
        "0" when the session opened): the same messages as the gRPC stream,
        length-prefixed, without gRPC's per-message cost. False: the gRPC
        stream (or, over a Unix socket, see ``uses_same_host_stream``)."""
        return self._raw.uses_tcp_stream

    @property
    def devices(self):
        """The devices the daemon reported when it opened the session (['cpu', 'cuda:0', ...])."""
        return list(self._raw.devices)

    @property
    def device_info(self):
        """The devices the daemon serves as it described them when the session
        opened, in its order (the cpu first): a list of dicts with ``name``
        ('cuda:0'), ``type`` ('cuda'), ``index``, ``description`` ('2 cores',
        a GPU's name), ``total_memory`` and ``free_memory`` (bytes; free as
        the device saw it then, other processes' use included) and ``major``
        and ``minor`` (compute capability; 0 and 0 for the cpu)."""
        return self._raw.device_info

    @property
    def server_version(self):
        """The daemon's release ('0.1.0')."""
        return self._raw.server_version

    @property
    def cuda_driver_version(self):
        """The CUDA version of the daemon's NVIDIA driver ('13.0'); '' without a driver."""
        return self._raw.cuda_driver_version

    @property
    def cuda_runtime_version(self):
        """The CUDA runtime the daemon was built with ('13.0'); '' for a daemon built without CUDA."""
        return self._raw.cuda_runtime_version

    @property
    def cuda_unavailable_reason(self):
        """Why the daemon serves no CUDA device, as a phrase ('no NVIDIA driver
        is loaded (...)', 'this daemon was built without CUDA (...)'); '' when
        it serves one."""
        return self._raw.cuda_unavailable_reason

    def stats(self):
        """Client counters of this session: dict with ops_issued, messages_sent,
        timed_flushes (messages sent because a batch was flush_interval old),
        round_trips (blocking waits for the daemon), predicted_backwards
        (backward() calls streamed without a wait), uploads, releases, and
        shm_uploads / shm_fetches (transfers that went through shared memory),
        shm_adopted_uploads (of shm_uploads, those whose segment became the
        tensor's storage in the daemon: one copy in all) and
        shm_segments_created (segments made; the other transfers reused them),
        artifact_bytes_sent (bytes of kernel artifacts uploaded: none for one
        the daemon holds already)."""
        return self._raw.stats()

    def synchronize(self):
        """Waits until the daemon has executed everything sent so far; raises the
        first error not reported before (naming the failed op, its call id and
        the call site), with its exception type (RuntimeError, MemoryError, ...)."""
        self._raw.synchronize()

    def close(self):
        """Ends the session (idempotent). Work still queued for it is dropped:
        the daemon finishes the op it is running and skips the rest; a thread
        waiting at a sync point of this session raises RuntimeError. Its
        tensors can no longer be used. If it was the default session, the
        next real tensor opens a new default one (from ``$TENSORD_ADDRESS``,
        else a private daemon). On the same-host and TCP streams it returns
        within about 15 seconds even if the daemon stopped reading (hung or
        stopped): another thread's upload blocked on it fails after 5
        seconds."""
        self._raw.close()

    def __enter__(self):
        self._previous.append(_C.exchange_thread_session(self._raw))
        return self

    def __exit__(self, *exc):
        _C.exchange_thread_session(self._previous.pop())
        return False

    def __eq__(self, other):
        # default_session() and connect() give new Session objects for the
        # same session: compare what they wrap.
        return isinstance(other, Session) and self._raw is other._raw

    def __hash__(self):
        return hash(self._raw.session_id)

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"<tensord.Session {self.session_id:016x} at {self.address} ({state})>"


def connect(address=None, *, set_default=True, flush_interval=None):
    """Opens a session and (unless ``set_default=False``) makes it the default
    one; returns the Session.

    Args:
        address: 'unix:/path/to.sock' or 'host:port' of a running daemon
            (``tensord serve --listen ...``). None uses ``$TENSORD_ADDRESS``,
            and when that is unset spawns a private daemon on a Unix socket in
            a temporary directory, stopped when the session closes or Python
            exits.
        flush_interval: seconds (float) after which a batch of streamed ops
            that is not full is sent anyway, so the daemon starts on it while
            Python computes or waits; None keeps the default (0.002, or
            ``$TENSORD_FLUSH_US`` microseconds), 0 sends only full batches
            (128 requests) and at sync points. The first batch after a sync
            point (when the daemon has nothing of this session's left to
            run) goes out once it is 50 microseconds old instead, if that is
            shorter, with the next op call that finds it so (with no further
            call, after flush_interval as any batch).

    Raises RuntimeError when the daemon cannot be reached, refuses the
    handshake (different op table: the message says what differs), has no
    gRPC thread left for a session stream on gRPC (only with
    TENSORD_SAME_HOST_STREAM=0 or TENSORD_TCP_STREAM=0: see ``tensord serve
    --grpc-threads``), or the daemon binary cannot be found.
    """
    if address is None:
        address = os.environ.get("TENSORD_ADDRESS") or None
    us = -1 if flush_interval is None else int(round(float(flush_interval) * 1e6))
    if us < -1:
        raise ValueError(f"connect: flush_interval must be >= 0 seconds, got {flush_interval}")
    raw = _C.connect(address, us) if address else _C.spawn_embedded(us)
    if set_default:
        _C.set_default_session(raw)
    return Session(raw)


def default_session():
    """The default Session, or None when none was created yet (never creates one)."""
    raw = _C.default_session()
    return None if raw is None else Session(raw)


def synchronize():
    """Waits for the current session's daemon (this thread's ``with
    session:``, else the default session) to execute everything sent so far
    and raises the first unreported error (see Session.synchronize). Does
    nothing when no session exists."""
    # The session the thread's ops went to, as tensord.cuda.synchronize.
    raw = _C.current_session_if_any()
    if raw is not None and not raw.closed:
        raw.synchronize()


def stats():
    """Counters of the default session as a dict: ops_issued (op calls streamed),
    messages_sent (stream messages), timed_flushes (of those, sent by the
    time flush), round_trips (blocking waits for the
    daemon), predicted_backwards (backward() calls streamed without a wait),
    uploads, releases; plus meta_ops (ops run in meta mode in this
    process). All zero when no session exists."""
    raw = _C.default_session()
    out = raw.stats() if raw is not None else {k: 0 for k in _STAT_KEYS}
    out["meta_ops"] = _C.meta_ops_run()
    return out
