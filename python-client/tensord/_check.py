"""``tensord check SCRIPT [ARGS...]`` (also ``python3 -m tensord._check SCRIPT
[ARGS...]``): runs a Python script with every tensor forced onto the meta
device, so a CI job validates a model's shapes, dtypes and strides without a
daemon, data or a GPU.

How: ``$TENSORD_NO_DAEMON=1`` makes the client refuse to connect to or spawn
a daemon (``tensord.connect(...)`` gives a stand-in session whose sync points
do nothing); the default device is ``meta`` on the main thread; ``device=``
arguments of every op (in every thread, whatever ``with tensord.device(...)``
says), ``tensord.tensor``/``from_numpy``, ``Tensor.to``/``.cpu()``/``.cuda()``
and ``tensord.load`` (which then reads only the file's header) are
redirected to meta (``device="cuda"`` too: a CUDA program's shapes are
checked with no GPU, and its tensors' device is meta; ``tensord.cuda.is_available()``
is False and ``device_count()`` 0, without a warning); ``tensord.save`` writes meta tensors as zeros (a sparse
file), so a script that saves and reloads a checkpoint runs. A script that logs a
value goes on: ``item()`` of a one-element meta tensor (and so ``float()``,
``int()``, ``bool()`` and f-strings of it) gives a placeholder of its dtype's
kind (``1.0`` for floating types, ``1`` for integers, ``False`` for bool:
finite and non-zero, so ``math.isfinite(loss)`` guards and divisions go on), and
the first such read is noted once on stderr. What needs more data than one
value (``numpy()``, ``tolist()``, printing a tensor's values, data-dependent
ops such as ``nonzero``) raises, and that is reported like any other error.

An exception in a thread the script starts fails the check like one in the
main thread (the script's threads are waited for first).

Exit status: 0 when the script completes (or calls ``sys.exit(0)``); 1 with
the first error on stderr, as
``SCRIPT:LINE: RuntimeError: matmul: size mismatch, self is [8, 4], other is [3, 2] (4 != 3)``
followed by the source line (the innermost frame in user code: the script
or a module it imports, not the tensord package; for a SyntaxError the line
that does not parse); 2 for a usage error;
a script's own ``sys.exit(n)`` gives ``n``.
"""
import os
import sys
import threading
import traceback

__all__ = ["main", "run"]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def _force_meta(tensord):
    """Redirects every device choice of the tensord API to meta (main thread)."""
    from . import _C

    _C._force_meta_device()             # every device= and factory, in every thread, is meta
    tensord.device("meta").__enter__()  # and the main thread's default device

    def meta_kwargs(kwargs):
        if kwargs.get("device") is not None:
            kwargs["device"] = "meta"
        return kwargs

    # Ops are forced in the client (_force_meta_device); uploads are not ops.
    for name in ("tensor", "as_tensor"):
        fn = getattr(tensord, name, None)
        if fn is None:
            continue

        def wrapped(*args, _fn=fn, **kwargs):
            return _fn(*args, **meta_kwargs(kwargs))
        wrapped.__name__ = getattr(fn, "__name__", name)
        wrapped.__doc__ = getattr(fn, "__doc__", None)
        setattr(tensord, name, wrapped)

    def from_numpy(ndarray):
        import numpy as np
        if not isinstance(ndarray, np.ndarray):
            raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
        return tensord.tensor(ndarray, device="meta")
    tensord.from_numpy = from_numpy

    T = tensord.Tensor
    T.cpu = lambda self: self
    _placeholder_item(T)
    T.cuda = lambda self, device=None, non_blocking=False: self

    from . import serialization
    serialization._zeros_for_meta = True   # save() of meta tensors writes zeros (a sparse file)
    original_load = tensord.load

    def load(f, map_location=None, **kwargs):
        return original_load(f, map_location="meta", **kwargs)   # only the header is read
    load.__doc__ = original_load.__doc__
    tensord.load = load

    def connect(address=None, *, set_default=True, flush_interval=None):
        return _CheckSession()     # a script written for a shared daemon runs too; nothing is contacted
    connect.__doc__ = tensord.connect.__doc__
    tensord.connect = connect


class _CheckSession:
    """What ``tensord.connect`` gives under ``tensord check``: a session whose
    ops all run on meta (sync points do nothing, counters stay 0)."""
    session_id = 0
    devices = ["meta"]
    device_info = []
    server_version = ""
    cuda_driver_version = ""
    cuda_runtime_version = ""
    cuda_unavailable_reason = "tensord check runs every tensor on meta, with no daemon"
    uses_shared_memory = False
    uses_same_host_stream = False
    uses_tcp_stream = False
    closed = False

    def synchronize(self):
        pass

    def stats(self):
        from ._session import _STAT_KEYS
        return {k: 0 for k in _STAT_KEYS}

    def close(self):
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _placeholder_item(T):
    """Tensor.item (and what calls it: float(), int(), bool(), __format__) of a
    one-element meta tensor gives a placeholder (1.0, 1 or False by dtype):
    finite and non-zero, so guards such as ``math.isfinite(loss)``, ``int()``
    and divisions by a logged value go on as in a real run."""
    original_item = T.item
    noted = []

    def item(self):
        if not self.is_meta:
            return original_item(self)
        n = self.numel()
        if n != 1:
            raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar")
        if not noted:
            noted.append(True)
            frame = sys._getframe(1)
            while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PKG_DIR + os.sep):
                frame = frame.f_back
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"
            sys.stderr.write(f"tensord check: note: {where}: item() of a meta tensor gives a placeholder "
                             f"(1.0, 1 or False by dtype; values are not computed under check)\n")
        dt = self.dtype
        if dt.is_floating_point:
            return 1.0
        return False if dt._name == "bool" else 1
    item.__doc__ = original_item.__doc__
    T.item = item
    original_format = T.__format__

    def fmt(self, spec):
        if self.is_meta and self.dim() == 0:
            return format(self.item(), spec)
        return original_format(self, spec)
    T.__format__ = fmt


def _user_frame(tb, script):
    """The innermost traceback entry in user code: outside the tensord package
    and the runpy machinery (a module the script imports counts: a bug in
    model.py is reported in model.py)."""
    entries = traceback.extract_tb(tb)
    for fs in reversed(entries):
        f = os.path.abspath(fs.filename)
        if not f.startswith(_PKG_DIR + os.sep) and os.path.basename(f) != "runpy.py" and not f.startswith("<"):
            return fs
    return entries[-1] if entries else None


def _report(exc, script, shown):
    if isinstance(exc, SyntaxError) and exc.filename:   # the file that does not parse, not runpy
        fs = traceback.FrameSummary(exc.filename, exc.lineno or 0, None, line=exc.text or "")
        exc = SyntaxError(exc.msg)
    else:
        fs = _user_frame(exc.__traceback__, script)
    message = str(exc).strip() or "(no message)"
    where = shown
    if fs is not None:
        name = shown if os.path.abspath(fs.filename) == script else fs.filename
        where = f"{name}:{fs.lineno}"
    sys.stderr.write(f"{where}: {type(exc).__name__}: {message}\n")
    if fs is not None and fs.line:
        sys.stderr.write(f"    {fs.line.strip()}\n")
    sys.stderr.write(f"tensord check: FAILED: {shown} (the first error is above; every tensor ran on meta, no "
                     f"daemon)\n")


def run(script, args=()):
    """Runs `script` (a path) with `args` as its sys.argv[1:] on meta; returns
    the exit status (see the module docstring)."""
    import runpy

    os.environ["TENSORD_NO_DAEMON"] = "1"
    os.environ.pop("TENSORD_ADDRESS", None)
    import tensord
    from . import _C

    shown = script
    path = os.path.abspath(script)
    if not os.path.isfile(path):
        sys.stderr.write(f"tensord check: no such file: {script}\n")
        return 2
    _force_meta(tensord)
    sys.argv = [script] + list(args)
    sys.path[0:0] = [os.path.dirname(path)]
    thread_errors = []
    default_hook = threading.excepthook

    def hook(args):      # an error in a thread the script starts fails the check too
        if args.exc_type is not SystemExit:
            thread_errors.append(args.exc_value)
        default_hook(args)
    threading.excepthook = hook
    try:
        runpy.run_path(path, run_name="__main__")
        for t in threading.enumerate():   # as interpreter shutdown would: wait for the script's threads
            if t is not threading.current_thread() and not t.daemon:
                t.join()
        if thread_errors:
            _report(thread_errors[0], path, shown)
            return 1
    except SystemExit as e:
        code = e.code
        if code is None:
            code = 0
        if not isinstance(code, int):
            sys.stderr.write(f"{code}\n")
            code = 1
        if code != 0:
            sys.stderr.write(f"tensord check: FAILED: {shown} exited with status {code}\n")
        return code
    except BaseException as e:  # noqa: BLE001 (the script's error is the result)
        _report(e, path, shown)
        return 1
    sys.stderr.write(f"tensord check: OK: {shown} ({_C.meta_ops_run()} ops on meta)\n")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write("usage: tensord check SCRIPT [ARGS...]\n")
        return 2 if not argv else 0
    return run(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main())
