"""pytest setup for the Python client's tests.

- Makes the in-tree package (python-client/) importable, or the copy in
  the folder $TENSORD_PYTHON_CLIENT names (scripts/gpu-check.sh: the pack's,
  whose _C module was built with it).
- Finds the daemon binary ($TENSORD_BIN, else build*/bin/tensord, else PATH).
- `daemon` (session-scoped): a `tensord serve` on a temporary Unix socket,
  waited for via its ready line and stopped at the end; it fills the storages
  it does not zero with 0xFF bytes (TENSORD_UNINITIALIZED_FILL), so a kernel
  that leaves an output element unwritten fails the value checks.
- `session`: the default tensord session, connected to that daemon. Tests
  that need a daemon ask for it; they skip visibly when no binary exists.
Meta-mode tests ask for neither and run with no daemon at all.
- Sets TENSORD_CHECK_SAVED_READS=1 for the daemons it starts.
- `on_device` and `device_params`: tests parametrized over the devices
  beside the CPU (the test device, always; CUDA, where the daemon has one).
"""
import glob
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON_CLIENT = os.environ.get("TENSORD_PYTHON_CLIENT") or os.path.join(ROOT, "python-client")
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


# ---------------------------------------------------------------- devices beside the cpu

TEST_DEVICE = "privateuseone:0"
CUDA_DEVICE = "cuda:0"


def _machine_has_cuda():
    """Whether `tensord devices` lists a CUDA device on this machine: what the
    suite's daemon (the same binary, the same machine) will serve. Asked at
    collection, before any daemon runs, so that without a GPU each device
    test collects one CUDA item (a visible skip) instead of one per case."""
    if not DAEMON_BIN:
        return False
    try:
        proc = subprocess.run([DAEMON_BIN, "devices"], capture_output=True, text=True, timeout=60,
                              env={k: v for k, v in os.environ.items() if k != "TENSORD_ADDRESS"})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(line.split()[1:2] == ["cuda"] for line in proc.stdout.splitlines()[1:])


MACHINE_HAS_CUDA = _machine_has_cuda()


def device_params(cases, cuda_cases=None):
    """Parameters for ``@pytest.mark.parametrize("on_device,<case args>", ...,
    indirect=["on_device"])``: every case (a pytest.param) on the test device
    and every one of `cuda_cases` (default: `cases`) on CUDA. Without a CUDA
    device on this machine the CUDA half is one parameter, ``cuda``, whose
    `on_device` skips with the daemon's reason (its case arguments are None)."""
    cuda_cases = cases if cuda_cases is None else cuda_cases
    out = [pytest.param(TEST_DEVICE, *c.values, id=f"testdevice-{c.id}", marks=c.marks) for c in cases]
    if MACHINE_HAS_CUDA:
        out += [pytest.param(CUDA_DEVICE, *c.values, id=f"cuda-{c.id}", marks=c.marks) for c in cuda_cases]
    elif cuda_cases:
        out.append(pytest.param(CUDA_DEVICE, *([None] * len(cuda_cases[0].values)), id="cuda"))
    return out


CUDA_MISSING_FILE = os.path.join(ROOT, "tests", "kernels", "cuda_missing_ops.txt")


def _cuda_missing_ops():
    """{op full name: reason} from tests/kernels/cuda_missing_ops.txt (the
    CUDA kernels' to-do list); the reason names the list and the section
    comment above the op's line."""
    out, section = {}, ""
    with open(CUDA_MISSING_FILE) as f:
        for line in f:
            text = line.strip()
            if text.startswith("#"):
                section = text.lstrip("# ").strip()
                continue
            name = text.split("#")[0].strip()
            if name:
                out[name] = f"{name}: no CUDA kernel yet (tests/kernels/cuda_missing_ops.txt: {section})"
    return out


CUDA_MISSING = _cuda_missing_ops()


def xfail_if_cuda_kernel_missing(on_device, error):
    """pytest.xfail when `error` (an exception, or None) is the daemon's
    NotImplementedError for a CUDA kernel that cuda_missing_ops.txt lists
    (the op may be the one called or one its backward runs); returns
    otherwise, so that any other error still fails the test."""
    if not (on_device.is_cuda and isinstance(error, NotImplementedError)):
        return
    # "op: no kernel ..." at the call, "op (call N at file:line): no kernel ..." at a sync point.
    m = re.search(r"([\w.]+)(?: \(call \d+ at [^)]*\))?: no kernel for device cuda", str(error))
    if m and m.group(1) in CUDA_MISSING:
        pytest.xfail(CUDA_MISSING[m.group(1)])


class OnDevice:
    """What a device test runs on: `device` ('privateuseone:0' or 'cuda:0')
    and the `session` serving it (the current session during the test)."""

    def __init__(self, device, session):
        self.device = device
        self.session = session

    @property
    def is_cuda(self):
        return self.device.startswith("cuda")


@pytest.fixture(scope="session")
def test_device_session():
    """A session on a `tensord serve --test-device` daemon (not the default
    session), shared by the device tests."""
    if not DAEMON_BIN:
        pytest.skip("no tensord daemon binary: build the `tensord` target or set TENSORD_BIN")
    import tensord

    d = Daemon(DAEMON_BIN, extra_args=["--test-device"])
    s = tensord.connect(d.address, set_default=False)
    yield s
    s.close()
    d.stop()


@pytest.fixture
def on_device(request):
    """An OnDevice for the parameter of `device_params`; the test runs with
    its session current. CUDA skips, with the daemon's reason, when the
    suite's daemon has no CUDA device."""
    import tensord

    if request.param == TEST_DEVICE:
        s = request.getfixturevalue("test_device_session")
    else:
        s = request.getfixturevalue("session")
        if not tensord.cuda.is_available():
            pytest.skip(f"no CUDA device: {s.cuda_unavailable_reason}")
        # `tensord devices` found none at collection, so only a placeholder was collected.
        assert MACHINE_HAS_CUDA, "the daemon serves CUDA but `tensord devices` listed no CUDA device at collection"
    # float32 convolutions may use TF32 by default (tensord.backends.cudnn.allow_tf32,
    # as PyTorch); the comparisons with the CPU are at float32's tolerances, so
    # the device tests run without it, as PyTorch's own test suite does.
    # The test device runs CPU kernels, which ignore the switch: left as it is.
    on = OnDevice(request.param, s)
    conv_tf32 = tensord.backends.cudnn.allow_tf32
    with s:
        if on.is_cuda:
            tensord.backends.cudnn.allow_tf32 = False
        try:
            yield on
        finally:
            if on.is_cuda:
                tensord.backends.cudnn.allow_tf32 = conv_tf32


def build_kernel(directory, name, source):
    """Writes `source` to DIRECTORY/NAME.cc, builds it with `tensord
    build-kernel` into DIRECTORY/NAME.tdk (library NAME) and returns that
    path; the build's stderr on failure."""
    import pathlib
    directory = pathlib.Path(directory)
    (directory / f"{name}.cc").write_text(source)
    out = directory / f"{name}.tdk"
    r = subprocess.run([DAEMON_BIN, "build-kernel", "-o", str(out), str(directory / f"{name}.cc")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def run_tensord_check(script):
    """`python -m tensord._check SCRIPT` (what `tensord check` runs) in a child
    process with the in-tree client and no TENSORD_ADDRESS: meta mode, no
    daemon. Returns the CompletedProcess (text stdout and stderr)."""
    env = dict(os.environ)
    env.pop("TENSORD_ADDRESS", None)
    env["PYTHONPATH"] = os.path.join(ROOT, "python-client") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "tensord._check", str(script)], env=env, capture_output=True,
                          text=True, timeout=120)
