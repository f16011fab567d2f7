"""The data plane: uploads and fetches through shared memory (same host, Unix
socket, automatic) and through the stream (TENSORD_SHM=0) give the same
data for every size; large uploads are adopted (the daemon's storage is the
client's segment) and the segment comes back for reuse once the storage is
freed, views and in-place ops included; a client killed mid-session leaves
nothing in /dev/shm and nothing mapped in the daemon, which keeps serving."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tensord
from conftest import subprocess_env

# 0, 1, a size that is not a multiple of the page, just past the inline
# limit (64 KiB), and past one 4 MiB stream chunk.
SIZES = [0, 1, 1000, 16385, 1_500_001]


def _connect(address, shm):
    old = os.environ.get("TENSORD_SHM")
    os.environ["TENSORD_SHM"] = "1" if shm else "0"
    try:
        return tensord.connect(address, set_default=False)
    finally:
        if old is None:
            del os.environ["TENSORD_SHM"]
        else:
            os.environ["TENSORD_SHM"] = old


@pytest.fixture(scope="module")
def two_sessions(daemon):
    fast, slow = _connect(daemon.address, True), _connect(daemon.address, False)
    yield fast, slow
    fast.close()
    slow.close()


def test_shared_memory_is_automatic_on_unix_sockets_and_off_with_env(two_sessions):
    fast, slow = two_sessions
    assert fast.uses_shared_memory
    assert not slow.uses_shared_memory


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16])
def test_round_trip_equal_through_both_paths(two_sessions, n, dtype):
    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * 100).astype(dtype)
    big = a.nbytes > 64 * 1024
    for s in two_sessions:
        before = s.stats()
        with s:
            t = tensord.from_numpy(a)
            back = t.numpy()
            doubled = (t * 2).numpy()                      # computed in the daemon from the upload
        np.testing.assert_array_equal(back, a)
        np.testing.assert_array_equal(doubled, a * 2)
        after = s.stats()
        used = s.uses_shared_memory and big
        assert after["shm_uploads"] - before["shm_uploads"] == (1 if used else 0)
        assert after["shm_fetches"] - before["shm_fetches"] == (2 if used else 0)


def test_strided_fetch_and_reused_segments(two_sessions):
    fast, slow = two_sessions
    a = np.arange(600 * 700, dtype=np.float32).reshape(600, 700)
    with fast:
        t = tensord.from_numpy(a)
        for _ in range(3):                                # the same segments serve again
            np.testing.assert_array_equal(t.T.numpy(), a.T)
            np.testing.assert_array_equal(t[::2, 1::3].numpy(), a[::2, 1::3])
    with slow:
        np.testing.assert_array_equal(tensord.from_numpy(a).T.numpy(), a.T)


def test_fetched_arrays_outlive_the_next_fetch_and_the_session(daemon):
    s = _connect(daemon.address, True)
    assert s.uses_shared_memory
    a = np.arange(1 << 20, dtype=np.float32)
    with s:
        t = tensord.from_numpy(a)
        first = t.numpy()
        second = (t + 1).numpy()                          # must not overwrite `first`
    s.close()
    np.testing.assert_array_equal(first, a)
    np.testing.assert_array_equal(second, a + 1)
    first[0] = 5.0                                        # writable, like a torch .numpy()
    assert first[0] == 5.0


ADOPT_MIN = 1 << 20  # TransportOptions::shm_adopt_min_bytes' default (SessionOptions::transport)


# Bytes just under, at and past the adoption threshold (the last not a
# multiple of the page), in two dtypes.
@pytest.mark.parametrize("nbytes", [ADOPT_MIN - 4, ADOPT_MIN, ADOPT_MIN + 4100, 5 * ADOPT_MIN + 12])
@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_large_uploads_are_adopted_and_round_trip(two_sessions, nbytes, dtype):
    fast, _ = two_sessions
    n = nbytes // np.dtype(dtype).itemsize
    a = (np.random.default_rng(nbytes).standard_normal(n) * 100).astype(dtype)
    before = fast.stats()
    with fast:
        t = tensord.from_numpy(a)
        np.testing.assert_array_equal(t.numpy(), a)
        np.testing.assert_array_equal((t + 1).numpy(), a + 1)
        del t
        fast.synchronize()
    after = fast.stats()
    assert after["shm_uploads"] - before["shm_uploads"] == 1
    assert after["shm_adopted_uploads"] - before["shm_adopted_uploads"] == (1 if a.nbytes >= ADOPT_MIN else 0)


def test_an_adopted_segment_comes_back_and_is_reused(daemon):
    s = _connect(daemon.address, True)
    a = np.arange(3 << 20, dtype=np.float32)              # 12 MiB
    with s:
        for i in range(5):
            t = tensord.from_numpy(a)
            assert t[-1].item() == a[-1]
            del t
            s.synchronize()                               # released first; its reply says the segment is free
        stats = s.stats()
    s.close()
    assert stats["shm_adopted_uploads"] == 5
    assert stats["shm_segments_created"] == 1             # one segment served all five


def test_views_and_in_place_ops_on_an_adopted_tensor(two_sessions):
    fast, _ = two_sessions
    a = np.arange(700 * 800, dtype=np.float32).reshape(700, 800)
    before = fast.stats()
    with fast:
        t = tensord.from_numpy(a)
        v = t.T[1::3]                                     # a view of the adopted storage
        t.mul_(2)                                         # in place, through the base
        del t
        fast.synchronize()                                # the base's handle is gone; the view holds the storage
        np.testing.assert_array_equal(v.numpy(), (a * 2).T[1::3])
        v.add_(1)                                         # in place, through the view
        np.testing.assert_array_equal(v.numpy(), (a * 2).T[1::3] + 1)
        w = tensord.from_numpy(a)                         # another upload needs another segment meanwhile
        np.testing.assert_array_equal(w.numpy(), a)
        del v, w
        fast.synchronize()
    assert fast.stats()["shm_adopted_uploads"] - before["shm_adopted_uploads"] == 2


def _daemon_memfd_mappings(pid):
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for line in f if "memfd:tensord-shm" in line)


CHILD = r"""
import sys, time
import numpy as np
import tensord
s = tensord.connect(sys.argv[1])
assert s.uses_shared_memory
x = tensord.from_numpy(np.ones(3 << 20, dtype=np.float32))
assert float(x.numpy()[-1]) == 1.0
assert s.stats()["shm_adopted_uploads"] == 1   # the daemon's storage is the client's segment
print("ready", flush=True)
time.sleep(60)
"""


def test_killed_client_leaves_nothing_behind(daemon, session):
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    maps_before = _daemon_memfd_mappings(daemon.proc.pid)
    child = subprocess.Popen([sys.executable, "-c", CHILD, daemon.address], stdout=subprocess.PIPE,
                             env=subprocess_env())
    try:
        assert child.stdout.readline().strip() == b"ready"
        assert _daemon_memfd_mappings(daemon.proc.pid) > maps_before
        if os.path.isdir("/dev/shm"):
            assert not any("tensord" in n for n in set(os.listdir("/dev/shm")) - shm_before)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    deadline = time.monotonic() + 20
    while _daemon_memfd_mappings(daemon.proc.pid) > maps_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _daemon_memfd_mappings(daemon.proc.pid) == maps_before
    if os.path.isdir("/dev/shm"):
        assert not any("tensord" in n for n in set(os.listdir("/dev/shm")) - shm_before)
    assert daemon.proc.poll() is None
    with session:                                         # the daemon keeps serving
        assert tensord.from_numpy(np.ones(1 << 18, dtype=np.float32)).sum().item() == float(1 << 18)


REFUSED_FETCH_CHILD = r"""
import sys
import tensord
if sys.argv[1]:
    tensord.connect(sys.argv[1])
# 2**62 elements over 4 bytes: their bytes (2**64) cannot be counted in int64.
x = tensord.zeros(1).expand(2**31, 2**31)
try:
    x.numpy()
    raise SystemExit("the fetch of an uncountable size did not raise")
except RuntimeError as e:
    assert "4611686018427387904 elements x 4 bytes overflows int64" in str(e), e
tensord.synchronize()
assert (tensord.ones(3) * 2).sum().item() == 6.0
# 2**62 bytes fit int64 but no machine here: refused before it is sent,
# rather than streamed for ever to a client that gave up on it.
y = tensord.zeros(1, dtype=tensord.uint8).expand(2**31, 2**31)
try:
    y.numpy()
    raise SystemExit("the fetch of 2**62 bytes did not raise")
except tensord.OutOfMemoryError as e:
    assert "4611686018427387904 bytes exceed this machine's memory" in str(e), e
tensord.synchronize()
assert tensord.arange(4).sum().item() == 6
print("ok", flush=True)
"""


@pytest.mark.parametrize("shm,same_host", [("1", "1"), ("0", "1"), ("0", "0"), ("embedded", "1")])
def test_a_refused_fetch_leaves_the_session_usable(daemon, shm, same_host):
    # In a child with a time limit: a session left waiting fails the test
    # instead of hanging it.
    env = subprocess_env(TENSORD_SHM="1" if shm == "embedded" else shm, TENSORD_SAME_HOST_STREAM=same_host)
    env.pop("TENSORD_ADDRESS", None)
    address = "" if shm == "embedded" else daemon.address  # "": the client spawns its own daemon
    try:
        r = subprocess.run([sys.executable, "-c", REFUSED_FETCH_CHILD, address], capture_output=True, env=env,
                           timeout=60)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the session hung after a refused fetch: {e.stdout!r} {e.stderr!r}")
    assert r.returncode == 0 and r.stdout.strip() == b"ok", r.stderr.decode()
    assert daemon.proc.poll() is None
