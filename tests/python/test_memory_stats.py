"""tensord.memory_stats, memory_allocated, max_memory_allocated,
memory_reserved and reset_peak_memory_stats (torch.cuda's names), on the CPU
and the test device (privateuseone:0) of a daemon started with
--test-device: each device counts the session's storages apart, exactly by
their sizes; a deleted tensor stops counting at the next query; peaks and
their reset are per device; a device the daemon does not serve is a
RuntimeError; with no session (and under `tensord check`) nothing is
counted and no daemon starts."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

import tensord
from conftest import DAEMON_BIN, Daemon, PYTHON_CLIENT

MiB = 1 << 20
DEV = "privateuseone:0"

needs_daemon = pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")


@pytest.fixture(scope="module")
def dev_session():
    if not DAEMON_BIN:
        pytest.skip("no tensord daemon binary")
    d = Daemon(DAEMON_BIN, extra_args=["--test-device"])
    s = tensord.connect(d.address, set_default=False)
    yield s
    s.close()
    d.stop()


@needs_daemon
def test_each_device_counts_its_own_storages_exactly(dev_session):
    with dev_session:
        cpu0, dev0 = tensord.memory_allocated(), tensord.memory_allocated(DEV)
        a = tensord.zeros(1000)                                            # 4,000 bytes on the cpu
        assert tensord.memory_allocated() - cpu0 == 4000
        assert tensord.memory_allocated(DEV) == dev0
        b = tensord.zeros(250, dtype=tensord.float64, device="privateuseone")   # 2,000 bytes there
        assert tensord.memory_allocated("cpu") - cpu0 == 4000
        assert tensord.memory_allocated(tensord.device("privateuseone", 0)) - dev0 == 2000
        v = a.view(10, 100)                                                # a view adds nothing
        assert tensord.memory_allocated(tensord.device("cpu")) - cpu0 == 4000
        # A deleted tensor stops counting at the next query (no synchronize).
        del a
        assert tensord.memory_allocated() - cpu0 == 4000                   # the view holds the storage
        del v
        assert tensord.memory_allocated() == cpu0
        assert tensord.memory_allocated(DEV) - dev0 == 2000
        del b
        assert tensord.memory_allocated(DEV) == dev0


@needs_daemon
def test_peaks_are_per_device_and_reset_to_what_is_in_use(dev_session):
    with dev_session:
        keep = tensord.ones(16)                                            # 64 bytes stay
        tensord.reset_peak_memory_stats()
        tensord.reset_peak_memory_stats(DEV)
        cpu0, dev0 = tensord.memory_allocated(), tensord.memory_allocated(DEV)
        assert tensord.max_memory_allocated() == cpu0
        assert tensord.max_memory_allocated(DEV) == dev0
        t = tensord.empty(4096)                                            # 16 KiB on the cpu
        d = tensord.empty(2048, device=DEV)                                # 8 KiB there
        del t, d
        assert tensord.memory_allocated() == cpu0
        assert tensord.max_memory_allocated() == cpu0 + 16384
        assert tensord.max_memory_allocated(DEV) == dev0 + 8192
        assert tensord.reset_peak_memory_stats() is None
        assert tensord.max_memory_allocated() == cpu0                      # the cpu's peak starts again
        assert tensord.max_memory_allocated(DEV) == dev0 + 8192            # the other device keeps its own
        u = tensord.empty(100)
        del u
        assert tensord.max_memory_allocated() == cpu0 + 400
        assert keep.numel() == 16


@needs_daemon
def test_memory_stats_has_pytorchs_keys_and_reserved_counts_the_allocators_blocks(dev_session):
    with dev_session:
        st = tensord.memory_stats(DEV)
        assert set(st) == {"allocated_bytes.all.current", "allocated_bytes.all.peak",
                           "requested_bytes.all.current", "requested_bytes.all.peak", "reserved_bytes.all.current"}
        assert all(isinstance(v, int) for v in st.values())
        assert st["allocated_bytes.all.current"] == tensord.memory_allocated(DEV)
        assert st["requested_bytes.all.current"] == st["allocated_bytes.all.current"]
        assert st["reserved_bytes.all.current"] >= st["allocated_bytes.all.current"]
        reserved0 = tensord.memory_reserved(DEV)
        # 3 MiB + 5 bytes: its storage counts as asked; the device's caching
        # allocator maps a 20 MiB segment for it (PyTorch's size for requests
        # of 1 to 10 MiB), and keeps it when the tensor goes.
        t = tensord.zeros(3 * MiB + 5, dtype=tensord.uint8, device="privateuseone")
        after = tensord.memory_stats(DEV)
        assert after["allocated_bytes.all.current"] - st["allocated_bytes.all.current"] == 3 * MiB + 5
        assert after["reserved_bytes.all.current"] - reserved0 == 20 * MiB
        del t
        assert tensord.memory_allocated(DEV) == st["allocated_bytes.all.current"]
        assert tensord.memory_reserved(DEV) == reserved0 + 20 * MiB
        # The next tensors of that size reuse the cached block: nothing more is reserved.
        u = tensord.ones(3 * MiB + 5, dtype=tensord.uint8, device="privateuseone")
        v = tensord.ones(MiB, dtype=tensord.uint8, device="privateuseone")
        assert tensord.memory_reserved(DEV) == reserved0 + 20 * MiB
        assert int(u.sum().item()) == 3 * MiB + 5 and int(v.sum().item()) == MiB
        del u, v
        # On the cpu too (this daemon's only session is this one): the
        # storage as asked, the granules it takes in reserved.
        big = tensord.zeros(3 * MiB + 5, dtype=tensord.uint8)
        assert tensord.memory_reserved() >= tensord.memory_allocated() + MiB - 5
        del big


@needs_daemon
def test_the_devices_reserved_memory_is_back_to_its_start_once_every_session_closed():
    # A daemon of its own: no other session may hold memory meanwhile.
    with Daemon(DAEMON_BIN, extra_args=["--test-device"]) as d:
        first = tensord.connect(d.address, set_default=False)
        with first:
            start = tensord.memory_reserved(DEV)
            kept = [tensord.ones(n, device=DEV) for n in (10, 1000, MiB, 3 * MiB)]   # small, medium and large blocks
            (kept[2] * 2).sum().item()
        second = tensord.connect(d.address, set_default=False)
        with second:
            mine = tensord.randn(512, 512, device=DEV) @ tensord.randn(512, 512, device=DEV)
            moved = mine.to("cpu").to(DEV)
            assert tensord.memory_reserved(DEV) > start
        with first:
            del kept[0]
            assert tensord.memory_reserved(DEV) > start
        first.close()
        second.close()                                                     # tensors still held by both
        del kept, mine, moved
        third = tensord.connect(d.address, set_default=False)
        with third:
            deadline = time.monotonic() + 30                               # a session may close on the closer thread
            while tensord.memory_reserved(DEV) != start and time.monotonic() < deadline:
                time.sleep(0.05)
            assert tensord.memory_reserved(DEV) == start
            assert tensord.memory_allocated(DEV) == 0
        third.close()


@needs_daemon
def test_a_device_not_served_is_a_runtime_error_naming_what_is(dev_session):
    with dev_session:
        with pytest.raises(RuntimeError, match=r"^memory_stats: device cuda:3 is not available: "
                                               r"this daemon serves cpu, privateuseone:0; it has no CUDA device: "):
            tensord.memory_allocated("cuda:3")
        with pytest.raises(RuntimeError, match="device cuda:0 is not available"):
            tensord.memory_stats(0)                                        # an int is a CUDA index, as torch.cuda
        with pytest.raises(RuntimeError, match="device privateuseone:1 is not available"):
            tensord.reset_peak_memory_stats("privateuseone:1")
        with pytest.raises(RuntimeError, match="device meta is not available: meta tensors exist only in the client"):
            tensord.max_memory_allocated("meta")
        with pytest.raises(RuntimeError):
            tensord.memory_reserved("gpu:0")                               # not a device name
        with pytest.raises(TypeError, match="memory_allocated: expected a device"):
            tensord.memory_allocated(True)
        with pytest.raises(TypeError, match="memory_stats: expected a device"):
            tensord.memory_stats(1.5)
        # The session goes on.
        x = tensord.ones(3)
        assert x.tolist() == [1.0, 1.0, 1.0]
        assert tensord.memory_allocated() >= 12


@needs_daemon
def test_a_query_is_not_a_sync_point_for_errors(dev_session):
    with dev_session:
        x = tensord.zeros(2, 3)
        x[:, tensord.tensor([3])] = 4.0                                   # fails in the daemon, later
        assert tensord.memory_allocated() >= 24                           # answered, without the error
        with pytest.raises(IndexError, match="out of bounds"):
            dev_session.synchronize()                                      # which the next sync point raises
        dev_session.synchronize()


def _run_without_daemon(tmp_path, script_text, check):
    """Runs `script_text` in a child Python (under `tensord check` when
    `check`) whose TENSORD_BIN would leave a marker if a daemon were started."""
    marker = tmp_path / "daemon-started"
    fake = tmp_path / "fake-tensord"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    fake.chmod(0o755)
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(script_text))
    env = dict(os.environ, TENSORD_BIN=str(fake),
               PYTHONPATH=PYTHON_CLIENT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TENSORD_ADDRESS", None)
    args = [sys.executable, "-m", "tensord._check", str(script)] if check else [sys.executable, str(script)]
    proc = subprocess.run(args, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert not marker.exists(), "a memory query started (or tried to start) a daemon"
    return proc


NOTHING_COUNTED = '''\
    import tensord
    assert tensord.memory_stats() == {}
    assert tensord.memory_stats("cuda:1") == {}
    assert tensord.memory_allocated() == 0 and tensord.memory_allocated(0) == 0
    assert tensord.max_memory_allocated("privateuseone") == 0
    assert tensord.memory_reserved(tensord.device("cpu")) == 0
    assert tensord.reset_peak_memory_stats() is None
    try:
        tensord.memory_allocated(2.0)
    except TypeError:
        pass
    else:
        raise AssertionError("a float device was accepted")
    print("nothing counted")
'''


def test_with_no_session_nothing_is_counted_and_no_daemon_starts(tmp_path):
    proc = _run_without_daemon(tmp_path, NOTHING_COUNTED, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "nothing counted" in proc.stdout


def test_under_tensord_check_nothing_is_counted(tmp_path):
    # Every tensor is meta and no daemon is used: the queries answer as with
    # no session, also after tensors were made and connect() was called.
    proc = _run_without_daemon(tmp_path, NOTHING_COUNTED + '''\
    x = tensord.ones(1000, device="cuda")
    with tensord.connect("unix:/nonexistent.sock"):
        y = x * 2
    assert y.is_meta and tensord.memory_allocated("cuda") == 0 and tensord.memory_stats() == {}
    ''', check=True)
    assert proc.returncode == 0, proc.stderr
    assert "nothing counted" in proc.stdout and "tensord check: OK" in proc.stderr


@needs_daemon
def test_empty_cache_gives_back_the_device_allocators_freed_segments(dev_session):
    with dev_session:
        dev = "privateuseone:0"
        tensord.empty_cache(dev)                                      # what earlier tests left cached
        t = tensord.zeros(3 << 20, dtype=tensord.uint8, device=dev)   # a 20 MiB segment of the caching allocator
        held = tensord.memory_reserved(dev)
        assert held >= 20 << 20
        del t
        assert tensord.memory_reserved(dev) == held                   # freed, kept cached for reuse
        assert tensord.empty_cache(dev) is None
        assert tensord.memory_reserved(dev) == held - (20 << 20)
        assert tensord.memory_allocated(dev) == 0
        tensord.empty_cache()                                         # the cpu's, by default
        with pytest.raises(RuntimeError, match="device privateuseone:1 is not available"):
            tensord.empty_cache("privateuseone:1")
