"""pytest setup for the Python client's tests.

- Makes the in-tree package (python-client/) importable.
- Finds the daemon binary ($TENSORD_BIN, else build*/bin/tensord, else PATH).
- `daemon` (session-scoped): a `tensord serve` on a temporary Unix socket,
  waited for via its ready line and stopped at the end; it fills the storages
  it does not zero with 0xFF bytes (TENSORD_UNINITIALIZED_FILL), so a kernel
  that leaves an output element unwritten fails the value checks.
- `session`: the default tensord session, connected to that daemon. Tests
  that need a daemon ask for it; they skip visibly when no binary exists.
Meta-mode tests ask for neither and run with no daemon at all.
- Sets TENSORD_CHECK_SAVED_READS=1 for the daemons it starts.
"""
import glob
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON_CLIENT = os.path.join(ROOT, "python-client")
sys.path.insert(0, PYTHON_CLIENT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def find_daemon_binary():
    env = os.environ.get("TENSORD_BIN")
    if env and os.access(env, os.X_OK):
        return env
    preferred = os.path.join(ROOT, "build", "bin", "tensord")
    if os.access(preferred, os.X_OK):
        return preferred
    built = [p for p in glob.glob(os.path.join(ROOT, "build*", "bin", "tensord")) if os.access(p, os.X_OK)]
    if built:
        return max(built, key=os.path.getmtime)
    return shutil.which("tensord")


# Every daemon the tests start checks each derivative formula's reads of
# saved tensors against the table meta-mode backward predicts them from
# (tensord/meta/autograd_rules.h): a mismatch fails that backward.
os.environ.setdefault("TENSORD_CHECK_SAVED_READS", "1")

DAEMON_BIN = find_daemon_binary()
if DAEMON_BIN:
    # Subprocesses (examples) and the embedded-daemon path find it too.
    os.environ["TENSORD_BIN"] = DAEMON_BIN


def subprocess_env(**extra):
    """Environment for child Python processes: in-tree package, daemon binary."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_CLIENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if DAEMON_BIN:
        env["TENSORD_BIN"] = DAEMON_BIN
    env.update(extra)
    return env


class Daemon:
    """A `tensord serve --listen unix:<tmp>/sock [extra_args]` child process.
    `addresses`: every address it listens on, as its ready line gives them
    (a TCP port 0 replaced by the port chosen). A context manager: `with
    Daemon(...) as d:` stops it on exit, as stop() does."""

    def __init__(self, binary, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="tensord-pytest-")
        self.address = "unix:" + os.path.join(self.dir, "sock")
        self.stderr = open(os.path.join(self.dir, "stderr.log"), "w+")
        # Storages the daemon hands out unzeroed (a kernel's dense outputs)
        # start as 0xFF bytes (NaN, -1), so that a kernel that skips elements
        # fails the value checks instead of showing plausible stale bytes.
        env = dict(os.environ, TENSORD_UNINITIALIZED_FILL="255")
        self.proc = subprocess.Popen([binary, "serve", "--listen", self.address, *extra_args], stdout=subprocess.PIPE,
                                     stderr=self.stderr, stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 30
        line = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                line = self.proc.stdout.readline()
                if line.startswith(b"tensord: listening on "):
                    self.addresses = line.decode().strip()[len("tensord: listening on "):].split(", ")
                    return
                if not line and self.proc.poll() is not None:
                    break
            elif self.proc.poll() is not None:
                break
        self.stop()
        self.stderr.seek(0)
        raise RuntimeError(f"tensord daemon did not become ready: {line!r}; stderr: {self.stderr.read()[-2000:]}")

    @property
    def tcp_address(self):
        """The first HOST:PORT it listens on (give it `--listen HOST:0`)."""
        return next(a for a in self.addresses if not a.startswith("unix:"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon():
    if not DAEMON_BIN:
        pytest.skip("no tensord daemon binary: build the `tensord` target or set TENSORD_BIN")
    d = Daemon(DAEMON_BIN)
    yield d
    d.stop()


@pytest.fixture(scope="session")
def session(daemon):
    import tensord

    os.environ["TENSORD_ADDRESS"] = daemon.address
    s = tensord.connect(daemon.address)
    yield s
    s.close()
