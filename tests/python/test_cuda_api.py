"""CUDA as a user sees it from Python: ``tensord.cuda`` (torch.cuda's names),
``Tensor.cuda()/.cpu()/.is_cuda``, ``nn.Module.cuda()``, the error at the
call site for a tensor on a CUDA device the daemon lacks, what a session
says of the daemon's devices, ``tensord devices``, and CUDA programs under
``tensord check``.

Most tests run against the daemon the suite starts, whatever it has: on a
machine without a GPU (CI) they check the answers for no CUDA device; the
tests marked ``needs_cuda`` run only where the daemon reports one, and skip
with the daemon's reason otherwise.
"""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensord
import tensord.nn as nn
from conftest import DAEMON_BIN, Daemon, subprocess_env

needs_daemon = pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")


@pytest.fixture
def no_cuda(session):
    """The suite's session, for tests of a daemon without a CUDA device."""
    if session.cuda_unavailable_reason == "":
        pytest.skip("the daemon serves a CUDA device")
    return session


@pytest.fixture
def cuda(session):
    """The suite's session, for tests that need a CUDA device of the daemon."""
    if not tensord.cuda.is_available():
        pytest.skip(f"no CUDA device: {session.cuda_unavailable_reason}")
    return session


# ---------------------------------------------------------------- what a session says

@needs_daemon
def test_a_session_describes_each_device_and_the_daemons_cuda(session):
    info = session.device_info
    assert [d["name"] for d in info] == session.devices
    cpu = info[0]
    assert (cpu["name"], cpu["type"], cpu["index"], cpu["major"], cpu["minor"]) == ("cpu", "cpu", 0, 0, 0)
    assert "core" in cpu["description"]
    for d in info:
        assert 0 < d["free_memory"] <= d["total_memory"], d
    has_cuda = any(d["type"] == "cuda" for d in info)
    assert (session.cuda_unavailable_reason == "") == has_cuda
    assert session.server_version == tensord.__version__
    version = re.compile(r"^[0-9]+\.[0-9]+$")
    if session.cuda_runtime_version:
        assert version.match(session.cuda_runtime_version)
    else:
        assert session.cuda_unavailable_reason.startswith("this daemon was built without CUDA")
    if session.cuda_driver_version:
        assert version.match(session.cuda_driver_version)
    else:
        assert not has_cuda


# ---------------------------------------------------------------- tensord.cuda without a CUDA device

@needs_daemon
def test_without_a_cuda_device_the_queries_answer_as_torchs_do(no_cuda):
    reason = no_cuda.cuda_unavailable_reason
    assert tensord.cuda.is_available() is False
    assert tensord.cuda.device_count() == 0
    assert tensord.cuda.is_initialized() is False
    expected = rf"^tensord\.cuda: the tensord daemon at {re.escape(no_cuda.address)} has no CUDA device: " \
               rf"{re.escape(reason)} \(it serves cpu\)$"
    for fn in (tensord.cuda.current_device, tensord.cuda.init, tensord.cuda.get_device_name,
               tensord.cuda.get_device_capability, tensord.cuda.get_device_properties, tensord.cuda.synchronize,
               tensord.cuda.reset_peak_memory_stats, lambda: tensord.cuda.set_device(0)):
        with pytest.raises(RuntimeError, match=expected):
            fn()
    # As torch.cuda before CUDA is initialized: nothing counted, nothing to empty.
    assert tensord.cuda.memory_stats() == {}
    assert tensord.cuda.memory_allocated() == 0
    assert tensord.cuda.max_memory_allocated(0) == 0
    assert tensord.cuda.memory_reserved("cuda:0") == 0
    assert tensord.cuda.empty_cache() is None
    tensord.cuda.set_device(-1)                         # torch ignores a negative device
    tensord.cuda.manual_seed(3)                         # deferred, as torch's: never raises
    tensord.cuda.manual_seed_all(3)
    a = tensord.rand(4).tolist()
    tensord.manual_seed(3)
    assert tensord.rand(4).tolist() == a


@needs_daemon
def test_device_arguments_are_read_as_torch_cuda_reads_them(session):
    with pytest.raises(ValueError, match=r"^Expected a cuda device, but got: cpu$"):
        tensord.cuda.get_device_name("cpu")
    with pytest.raises(ValueError, match="Expected a cuda device, but got: meta"):
        tensord.cuda.memory_allocated(tensord.device("meta"))
    with pytest.raises(TypeError, match="got bool"):
        tensord.cuda.get_device_capability(True)
    with pytest.raises(TypeError, match="got float"):
        tensord.cuda.memory_stats(1.5)
    with pytest.raises(RuntimeError, match="Expected one of"):
        tensord.cuda.get_device_name("gpu:0")


def test_out_of_memory_error_is_torchs_kind():
    assert tensord.cuda.OutOfMemoryError is tensord.OutOfMemoryError
    assert issubclass(tensord.cuda.OutOfMemoryError, RuntimeError)
    assert issubclass(tensord.cuda.OutOfMemoryError, MemoryError)   # what tensord raised before it existed
    assert set(tensord.cuda.__all__) <= set(dir(tensord.cuda))


# ---------------------------------------------------------------- errors at the call site

@needs_daemon
def test_a_tensor_on_cuda_fails_at_the_call_naming_the_devices_and_the_reason(no_cuda):
    tail = f"is not available: this daemon serves cpu; it has no CUDA device: {no_cuda.cuda_unavailable_reason}"
    x = tensord.ones(3)
    lin = nn.Linear(2, 2)
    cases = [
        ("zeros", "cuda:0", lambda: tensord.zeros(3, device="cuda")),
        ("randn", "cuda:1", lambda: tensord.randn(2, 2, device=tensord.device("cuda", 1))),
        ("tensor", "cuda:0", lambda: tensord.tensor([1.0, 2.0], device="cuda")),
        ("tensor", "cuda:0", lambda: tensord.as_tensor(np.ones(3, dtype=np.float32), device="cuda:0")),
        ("to.device", "cuda:0", lambda: x.cuda()),
        ("to.device", "cuda:2", lambda: x.cuda(2)),
        ("to.device", "cuda:0", lambda: x.cuda(non_blocking=True)),
        ("to.device", "cuda:0", lambda: x.to("cuda")),
        ("to.device", "cuda:0", lambda: lin.cuda()),
        ("zeros_like", "cuda:0", lambda: tensord.zeros_like(x, device="cuda")),
    ]
    for op, dev, fn in cases:
        before = tensord.stats()
        with pytest.raises(RuntimeError) as e:
            fn()
        assert type(e.value) is RuntimeError
        assert re.match(rf"^{re.escape(op)}(\.[a-z_]+)?: device {dev} {re.escape(tail)}", str(e.value)), str(e.value)
        after = tensord.stats()        # raised before anything was streamed
        assert (after["ops_issued"], after["uploads"]) == (before["ops_issued"], before["uploads"]), op
    with tensord.device("cuda"):
        with pytest.raises(RuntimeError, match=rf"^ones: device cuda:0 {re.escape(tail)}"):
            tensord.ones(2)
    assert all(p.is_cpu for p in lin.parameters())
    # The session goes on, with no error pending.
    y = x + 1
    tensord.synchronize()
    assert y.tolist() == [2.0, 2.0, 2.0]


@needs_daemon
def test_the_test_device_is_named_among_those_served(tmp_path):
    with Daemon(DAEMON_BIN, extra_args=["--test-device"]) as d:
        s = tensord.connect(d.address, set_default=False)
        try:
            with s:
                if s.cuda_unavailable_reason == "":
                    pytest.skip("the daemon serves a CUDA device")
                with pytest.raises(RuntimeError, match=r"^zeros: device cuda:0 is not available: this daemon serves "
                                                       r"cpu, privateuseone:0; it has no CUDA device: "):
                    tensord.zeros(1, device="cuda")
                with pytest.raises(RuntimeError, match=r"^to.device: device privateuseone:1 is not available: this "
                                                       r"daemon serves cpu, privateuseone:0$"):
                    tensord.ones(1).to("privateuseone:1")
                # Two devices in one op: PyTorch's error, from meta, at the call.
                a = tensord.ones(3, device="privateuseone")
                with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device, but found "
                                                       r"at least two devices, privateuseone:0 and cpu!"):
                    a + tensord.ones(3)
        finally:
            s.close()


# ---------------------------------------------------------------- Tensor and Module

@needs_daemon
def test_tensor_device_properties_and_moves(session):
    x = tensord.ones(2)
    assert x.is_cpu and not x.is_cuda and x.get_device() == -1
    assert x.cpu() is x                                # nothing to move: self, as torch
    m = tensord.empty(2, device="meta")
    assert not m.is_cuda and not m.is_cpu
    assert m.get_device() == -1                        # no device index, as torch's meta tensors
    with pytest.raises(ValueError, match="Invalid device, must be cuda device"):
        x.cuda("cpu")
    model = nn.Linear(3, 2)
    assert model.cpu() is model and all(p.is_cpu for p in model.parameters())
    assert str(tensord.device("cuda")) == "cuda" and tensord.device("cuda:1").index == 1


# ---------------------------------------------------------------- with a CUDA device

@needs_daemon
def test_cuda_device_names_and_properties(cuda):
    cudas = [d for d in cuda.device_info if d["type"] == "cuda"]
    assert tensord.cuda.is_available() and tensord.cuda.is_initialized()
    assert tensord.cuda.device_count() == len(cudas)
    assert tensord.cuda.current_device() == 0
    tensord.cuda.set_device(0)
    tensord.cuda.set_device("cuda:0")
    tensord.cuda.init()
    for i, d in enumerate(cudas):
        p = tensord.cuda.get_device_properties(i)
        assert p.name == d["description"] == tensord.cuda.get_device_name(i) and p.name
        assert (p.major, p.minor) == tensord.cuda.get_device_capability(f"cuda:{i}") == (d["major"], d["minor"])
        assert p.major >= 3 and p.total_memory == d["total_memory"] > 0
        assert f"name='{p.name}'" in repr(p)
    assert tensord.cuda.get_device_name() == tensord.cuda.get_device_name(0)
    with pytest.raises(AssertionError, match="Invalid device id"):
        tensord.cuda.get_device_name(len(cudas))
    if len(cudas) > 1:
        with pytest.raises(NotImplementedError, match="no current CUDA device to change"):
            tensord.cuda.set_device(1)
    assert cuda.cuda_driver_version and cuda.cuda_runtime_version


@needs_daemon
def test_cuda_tensors_modules_and_memory_statistics(cuda):
    MiB = 1 << 20
    tensord.cuda.empty_cache()
    base = tensord.cuda.memory_allocated()
    x = tensord.zeros(MiB, device="cuda")            # 4 MiB
    assert x.is_cuda and x.get_device() == 0 and str(x.device) == "cuda:0"
    assert tensord.cuda.memory_allocated() == base + 4 * MiB
    assert tensord.cuda.max_memory_allocated() >= base + 4 * MiB
    assert tensord.cuda.memory_reserved() >= tensord.cuda.memory_allocated()
    assert tensord.cuda.memory_stats()["allocated_bytes.all.current"] == base + 4 * MiB
    del x
    assert tensord.cuda.memory_allocated() == base
    tensord.cuda.reset_peak_memory_stats()
    assert tensord.cuda.max_memory_allocated() == base
    tensord.cuda.empty_cache()
    y = tensord.tensor([1.0, 2.0, 3.0]).cuda()
    assert y.cuda() is y and y.to("cuda:0") is y
    assert (y * 2).cpu().tolist() == [2.0, 4.0, 6.0]
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device, but found at least two "
                                           r"devices, cuda:0 and cpu!"):
        y + tensord.ones(3)
    model = nn.Linear(3, 2).cuda()
    assert all(p.is_cuda for p in model.parameters())
    assert model(y.unsqueeze(0)).is_cuda
    tensord.cuda.synchronize()
    tensord.cuda.synchronize(0)


# ---------------------------------------------------------------- no daemon reachable

def test_is_available_without_a_reachable_daemon_is_false_and_quick(tmp_path):
    code = textwrap.dedent('''\
        import time, warnings
        import tensord
        t = time.monotonic()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            print("available", tensord.cuda.is_available(), tensord.cuda.device_count())
        print("seconds", time.monotonic() - t)
        print("warned", [str(x.message) for x in w])
        print("initialized", tensord.cuda.is_initialized(), tensord.cuda.memory_allocated())
    ''')
    env = subprocess_env(TENSORD_ADDRESS="unix:" + str(tmp_path / "no-daemon.sock"))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "available False 0" in proc.stdout
    assert float(re.search(r"seconds ([0-9.]+)", proc.stdout).group(1)) < 5
    assert "the daemon cannot be reached" in proc.stdout and "no-daemon.sock" in proc.stdout
    assert "initialized False 0" in proc.stdout


# ---------------------------------------------------------------- tensord devices

def _devices(*args, **env):
    return subprocess.run([DAEMON_BIN, "devices", *args], env=subprocess_env(**env), capture_output=True, text=True,
                          timeout=60)


@needs_daemon
def test_tensord_devices_lists_the_daemons_devices(session):
    proc = _devices("--address", session.address)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"tensord {session.server_version} at {session.address}"
    rows = lines[1:1 + len(session.devices)]
    for row, d in zip(rows, session.device_info):
        cells = row.split()
        assert cells[:3] == [d["name"], d["type"], "total"], row
        assert "free" in cells and "capability" in cells and row.endswith(d["description"])
        cap = cells[cells.index("capability") + 1]
        assert cap == ("-" if d["type"] != "cuda" else f"{d['major']}.{d['minor']}")
    cuda_line = lines[1 + len(session.devices)]
    if session.cuda_unavailable_reason:
        assert cuda_line.startswith(f"no CUDA device: {session.cuda_unavailable_reason}")
    else:
        assert cuda_line == f"CUDA driver {session.cuda_driver_version}, CUDA runtime {session.cuda_runtime_version}"
    if session.cuda_runtime_version:
        assert f"CUDA runtime {session.cuda_runtime_version}" in cuda_line
    # $TENSORD_ADDRESS is read the same way (free memory may have moved since).
    again = _devices(TENSORD_ADDRESS=session.address).stdout.splitlines()
    assert len(again) == len(lines) and again[0] == lines[0] and again[-1] == lines[-1]


@needs_daemon
def test_tensord_devices_without_an_address_reports_this_machine(tmp_path):
    env = dict(os.environ)
    env.pop("TENSORD_ADDRESS", None)
    proc = subprocess.run([DAEMON_BIN, "devices", "--test-device"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "on this machine (no daemon address" in lines[0]
    assert lines[1].split()[:2] == ["cpu", "cpu"] and lines[2].split()[:2] == ["privateuseone:0", "privateuseone"]
    assert lines[3].startswith(("no CUDA device: ", "CUDA driver "))
    proc = _devices("--address", "unix:" + str(tmp_path / "none.sock"))
    assert proc.returncode == 1 and "tensord devices: cannot connect" in proc.stderr


# ---------------------------------------------------------------- tensord check (meta, no daemon)

CUDA_PROGRAM = textwrap.dedent('''\
    import warnings
    import tensord
    import tensord.nn as nn
    warnings.simplefilter("error")              # no warning about a daemon: none is wanted here
    assert tensord.cuda.is_available() is False and tensord.cuda.device_count() == 0
    assert tensord.cuda.memory_allocated() == 0 and tensord.cuda.memory_stats() == {}
    device = tensord.device("cuda")
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).cuda()
    x = tensord.randn(3, 8, device=device)
    assert x.is_meta and str(x.device) == "meta"    # every tensor is meta, whatever device= said
    y = model(x.cuda(non_blocking=True)).to("cuda:0")
    z = tensord.zeros(3, 4, device="cuda:1") + y
    with tensord.device("cuda"):
        w = tensord.ones(4, 2)
    assert tuple((z @ w).shape) == (3, 2)
    tensord.cuda.manual_seed_all(0)
    tensord.cuda.synchronize()                      # timing code: nothing to wait for on meta
    assert x.get_device() == -1
    try:
        tensord.cuda.get_device_name()
    except RuntimeError as e:
        assert "under tensord check" in str(e), e
    else:
        raise AssertionError("get_device_name answered with no daemon")
    model(tensord.zeros(3, 7, device="cuda"))       # the shape bug CI is there to catch
''')


@needs_daemon   # the binary runs `tensord check` (no daemon is started)
def test_a_cuda_program_runs_on_meta_under_tensord_check(tmp_path):
    script = tmp_path / "train_cuda.py"
    script.write_text(CUDA_PROGRAM)
    env = subprocess_env(TENSORD_BIN=str(tmp_path / "no-daemon-here"))
    env.pop("TENSORD_ADDRESS", None)
    proc = subprocess.run([DAEMON_BIN, "check", str(script)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{script}:25: RuntimeError: "), proc.stderr
    assert "3x7" in first, first
