"""Sessions from Python: round trips, deferred errors with op and call site,
releases, isolation of two sessions, and the embedded daemon."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tensord
from conftest import DAEMON_BIN, Daemon, subprocess_env


def test_thousand_small_ops_then_item_are_O1_round_trips(session, daemon):
    # Message counts are exact only without the time flush (a slow machine
    # would send more, smaller batches): this session sends full batches only.
    s = tensord.connect(daemon.address, set_default=False, flush_interval=0)
    with s:
        x = tensord.zeros(4)
        before = s.stats()
        for _ in range(1000):
            x = x + 1
        assert x.sum().item() == 4000.0
        after = s.stats()
    s.close()
    assert after["ops_issued"] - before["ops_issued"] == 1001
    assert after["round_trips"] - before["round_trips"] <= 3
    assert after["messages_sent"] - before["messages_sent"] <= 12
    assert after["timed_flushes"] == 0


@pytest.mark.parametrize("same_host", ["1", "0"])
def test_the_session_stream_uses_the_same_host_socket_unless_told_not_to(session, daemon, monkeypatch, same_host):
    # Over a Unix socket the stream runs on the daemon's side-channel socket;
    # TENSORD_SAME_HOST_STREAM=0 keeps it on gRPC. Both give the same values,
    # the same deferred errors (op and call site), and sync points that wait.
    monkeypatch.setenv("TENSORD_SAME_HOST_STREAM", same_host)
    s = tensord.connect(daemon.address, set_default=False)
    with s:
        assert s.uses_same_host_stream == (same_host == "1")
        x = tensord.arange(100000, dtype=tensord.float32)  # 400 KB: several records
        y = (x * 2).reshape(100, 1000)
        np.testing.assert_array_equal(y.numpy(), np.arange(100000, dtype=np.float32).reshape(100, 1000) * 2)
        assert y.sum().item() == pytest.approx(float(np.arange(100000, dtype=np.float64).sum() * 2), rel=1e-5)
        bad = tensord.tensor([1.0, 2.0]).index_select(0, tensord.tensor([5]))  # only the daemon can tell
        with pytest.raises(IndexError) as e:
            bad.item()
        assert "index_select" in str(e.value) and "test_session.py" in str(e.value)
        assert (x[:3] + 1).tolist() == [1.0, 2.0, 3.0]  # the session goes on
    s.close()


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
@pytest.mark.parametrize("tcp_stream", ["1", "0"])
def test_over_tcp_the_session_stream_takes_a_connection_of_its_own_unless_told_not_to(monkeypatch, tcp_stream):
    # At HOST:PORT the stream runs on a second TCP connection to the same
    # port (the daemon tells it from gRPC's); TENSORD_TCP_STREAM=0 keeps it
    # on gRPC. Both give the same values, errors and uploads of any size.
    d = Daemon(DAEMON_BIN, extra_args=["--listen", "127.0.0.1:0"])
    try:
        tcp = d.tcp_address
        monkeypatch.setenv("TENSORD_TCP_STREAM", tcp_stream)
        s = tensord.connect(tcp, set_default=False)
        with s:
            assert s.uses_tcp_stream == (tcp_stream == "1")
            assert not s.uses_same_host_stream and not s.uses_shared_memory
            big = np.arange(3_000_000, dtype=np.float32)  # 12 MB: uploaded and fetched in chunks
            x = tensord.tensor(big)
            np.testing.assert_array_equal((x * 2).numpy(), big * 2)
            # Around the inline limit (64 KiB) and the size from which the
            # TCP stream receives a chunk's data straight into the storage
            # or the fetch's buffer; odd byte counts, a strided fetch.
            for n, dtype in ((16_384, np.float32), (16_385, np.float32), (65_539, np.uint8), (262_147, np.float64),
                             (1_048_579, np.float32)):
                a = (np.arange(n) % 251).astype(dtype)
                t = tensord.tensor(a)
                np.testing.assert_array_equal(t.numpy(), a)
                np.testing.assert_array_equal((t + 1).numpy(), a + 1)
                np.testing.assert_array_equal(t[::3].numpy(), a[::3])
            bad = tensord.tensor([1.0, 2.0]).index_select(0, tensord.tensor([5]))
            with pytest.raises(IndexError) as e:
                bad.item()
            assert "index_select" in str(e.value)
            assert (x[:3] + 1).tolist() == [1.0, 2.0, 3.0]
        s.close()
        # The gRPC clients of the same port were served all along: a second
        # session on the Unix socket sees the daemon alive.
        other = tensord.connect(d.address, set_default=False)
        with other:
            assert tensord.ones(2).sum().item() == 2.0
        other.close()
    finally:
        d.stop()


FIRST_UPLOAD_SCRIPT = r"""
import sys
import numpy as np
import tensord
for n in map(int, sys.argv[2:]):
    with tensord.connect(sys.argv[1], set_default=False) as s:
        assert not s.uses_same_host_stream and not s.uses_tcp_stream and not s.uses_shared_memory
        a = (np.arange(n) % 251).astype(np.uint8)
        t = tensord.tensor(a)  # the stream's first message after attach
        np.testing.assert_array_equal(t.numpy(), a)
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
@pytest.mark.parametrize("where", ["unix", "tcp"])
def test_an_upload_of_64_to_256_kib_as_the_first_message_on_a_grpc_stream_returns(where):
    # Above 64 KiB the gRPC stream sends an upload around the caller's bytes
    # and waits until gRPC lets go of them. gRPC's transparent retries kept
    # the messages of a call that had no reply yet (up to 256 KiB) for a
    # replay, so such an upload as a session's first message never returned.
    d = Daemon(DAEMON_BIN, extra_args=["--listen", "127.0.0.1:0"])
    try:
        address = d.address if where == "unix" else d.tcp_address
        run_script_ok(FIRST_UPLOAD_SCRIPT, address, ["65537", "100000", "250000", "262143", "1148576"],
                      TENSORD_SHM="0", TENSORD_SAME_HOST_STREAM="0", TENSORD_TCP_STREAM="0")
    finally:
        d.stop()


class ConnectProxy:
    """An HTTP CONNECT proxy on 127.0.0.1 (port `port`) that tunnels every
    connection it is asked for, recording the targets in `targets`."""

    def __init__(self):
        import socket
        import threading
        self._socket, self._threading = socket, threading
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.targets = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            self._threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        head = b""
        while b"\r\n\r\n" not in head:
            got = c.recv(4096)
            if not got:
                return
            head += got
        line = head.split(b"\r\n", 1)[0].decode()
        method, target, _ = line.split(" ", 2)
        self.targets.append(f"{method} {target}")
        host, port = target.rsplit(":", 1)
        up = self._socket.create_connection((host, int(port)))
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            up.sendall(rest)

        def pump(a, b):
            try:
                while (data := a.recv(65536)):
                    b.sendall(data)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(self._socket.SHUT_RDWR)
                except OSError:
                    pass

        t = self._threading.Thread(target=pump, args=(up, c), daemon=True)
        t.start()
        pump(c, up)
        t.join()

    def close(self):
        self.listener.close()


PROXIED_SCRIPT = r"""
import sys
import tensord
with tensord.connect(sys.argv[1], set_default=False) as s:
    assert not s.uses_tcp_stream
    assert (tensord.arange(4) * 2).tolist() == [0, 2, 4, 6]
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_through_a_proxy_the_session_stays_on_grpc():
    # gRPC goes through $grpc_proxy; its peer is then the proxy, which the
    # daemon's name does not resolve to. The TCP stream's hello carries the
    # session's token: it is not sent to the proxy (nor anywhere else), and
    # the session runs on the gRPC stream through the proxy.
    d = Daemon(DAEMON_BIN, extra_args=["--listen", "127.0.0.1:0"])
    proxy = ConnectProxy()
    try:
        tcp = d.tcp_address
        run_script_ok(PROXIED_SCRIPT, tcp, grpc_proxy=f"http://127.0.0.1:{proxy.port}", no_proxy="", NO_PROXY="")
        assert proxy.targets == [f"CONNECT {tcp}"]
    finally:
        proxy.close()
        d.stop()


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_the_tcp_stream_goes_where_grpc_connected():
    # A daemon on [::1] only, reached as localhost:PORT: getaddrinfo may give
    # 127.0.0.1 first (or only) where gRPC's resolver reached ::1. The stream
    # connects to the address gRPC chose (the call's peer), not the name.
    try:
        d = Daemon(DAEMON_BIN, extra_args=["--listen", "[::1]:0"])
    except RuntimeError as e:
        pytest.skip(f"no IPv6 loopback here: {e}")
    try:
        port = next(a for a in d.addresses if a.startswith("[::1]:")).rsplit(":", 1)[1]
        try:
            s = tensord.connect(f"localhost:{port}", set_default=False)
        except RuntimeError as e:
            pytest.skip(f"gRPC does not resolve localhost to ::1 here: {e}")
        with s:
            assert s.uses_tcp_stream
            assert (tensord.arange(4) * 2).tolist() == [0, 2, 4, 6]
        s.close()
    finally:
        d.stop()


SHUTDOWN_SCRIPT = r"""
import sys
import tensord
s = tensord.connect(sys.argv[1], set_default=False)
with s:
    assert {"same-host": s.uses_same_host_stream, "tcp": s.uses_tcp_stream,
            "grpc": not s.uses_same_host_stream, "tcp-grpc": not s.uses_tcp_stream}[sys.argv[2]]
    x = tensord.ones(4)
    assert x.sum().item() == 4.0
    print("ready", flush=True)
    sys.stdin.readline()  # the daemon has stopped
    try:
        (x + 1).sum().item()
    except RuntimeError as e:
        # An idle gRPC client on a Unix socket cannot read the StreamEnd: its
        # write to the closed socket fails first, and gRPC drops what the
        # daemon sent. It says what most likely happened instead. Over TCP
        # the first write after the daemon closed still succeeds, but a
        # second one fails the same way: the first batch after a sync point
        # goes out by itself once it is 50 us old, so the ops below may be
        # two writes.
        if sys.argv[2] == "grpc":
            expect = ("the daemon may have stopped",)
        elif sys.argv[2] == "tcp-grpc":
            expect = ("the daemon is shutting down", "the daemon may have stopped")
        else:
            expect = ("the daemon is shutting down",)
        assert any(m in str(e) for m in expect), str(e)
    else:
        raise AssertionError("a sync point after the daemon stopped succeeded")
print("ok")
"""


BUSY_SHUTDOWN_SCRIPT = r"""
import sys
import tensord
s = tensord.connect(sys.argv[1], set_default=False)
with s:
    assert s.uses_same_host_stream is False and s.uses_tcp_stream is False
    a = tensord.ones(2048, 2048)
    y = a
    for _ in range(30):  # seconds of matmuls: the daemon is busy when SIGTERM comes
        y = a @ y
    print("ready", flush=True)
    try:
        y.sum().item()
    except RuntimeError as e:
        # Unavailable (gRPC code 14), as the socket streams' end record says it
        assert "the daemon is shutting down (gRPC code 14)" in str(e), str(e)
    else:
        raise AssertionError("the sync point across the daemon's shutdown succeeded")
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
@pytest.mark.parametrize("where", ["grpc", "tcp-grpc"])
def test_a_grpc_stream_waiting_on_the_daemon_hears_why_it_stopped(where):
    # A client waiting in a sync point reads the StreamEnd that SIGTERM sends
    # on its gRPC stream while the daemon is still busy with its ops.
    with Daemon(DAEMON_BIN, extra_args=["--listen", "127.0.0.1:0"]) as d:
        address, env = address_and_env(d, where)
        p = subprocess.Popen([sys.executable, "-c", BUSY_SHUTDOWN_SCRIPT, address], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=subprocess_env(**env))
        try:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
            time.sleep(0.5)  # the item() is sent and waiting
            d.proc.terminate()
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0 and out.strip() == "ok", out + err
        assert d.proc.wait(timeout=60) == 0


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
@pytest.mark.parametrize("where", ["same-host", "tcp", "grpc", "tcp-grpc"])
def test_a_session_stream_says_when_the_daemon_shut_down(where):
    # SIGTERM ends each same-host or TCP stream with an end record, and a
    # gRPC stream with a StreamEnd message before cancelling it; the
    # client's next sync point raises with the daemon's reason (the gRPC
    # stream once said only "Cancelled on the server side").
    with Daemon(DAEMON_BIN, extra_args=["--listen", "127.0.0.1:0"]) as d:
        address, env = address_and_env(d, where)
        p = subprocess.Popen([sys.executable, "-c", SHUTDOWN_SCRIPT, address, where], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(**env))
        try:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
            d.proc.terminate()
            assert d.proc.wait(timeout=30) == 0
            out, err = p.communicate("\n", timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0 and out.strip() == "ok", out + err


def test_a_burst_of_ops_is_sent_without_a_sync_point(session, daemon):
    # The time flush: ops streamed and then left alone (no sync, no full
    # batch) reach the daemon anyway; the daemon's session statistics show
    # them executed. Polls with a generous deadline: no timing threshold.
    s = tensord.connect(daemon.address, set_default=False, flush_interval=0.001)
    with s:
        x = tensord.zeros(4)
        for _ in range(5):
            x = x + 1
        deadline = time.monotonic() + 60
        while s.stats()["timed_flushes"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        st = s.stats()
        # The gRPC stream's first message is the attach; the same-host
        # stream's hello is not a message.
        attach = 0 if s.uses_same_host_stream else 1
        assert st["timed_flushes"] >= 1 and st["messages_sent"] >= 1 + attach and st["round_trips"] == 0
        assert x.sum().item() == 20.0
    s.close()
    os.environ["TENSORD_FLUSH_US"] = "1000"      # an explicit flush_interval wins over the environment
    try:
        off = tensord.connect(daemon.address, set_default=False, flush_interval=0)
    finally:
        del os.environ["TENSORD_FLUSH_US"]
    with off:
        sent = off.stats()["messages_sent"]
        y = tensord.zeros(4) + 1
        time.sleep(0.05)
        assert off.stats()["messages_sent"] == sent     # waits for a full batch or a sync point
        assert y.sum().item() == 4.0
    off.close()
    with pytest.raises(ValueError, match="flush_interval"):
        tensord.connect(daemon.address, set_default=False, flush_interval=-1)


def test_stats_keys(session):
    s = tensord.stats()
    for k in ("ops_issued", "messages_sent", "round_trips", "uploads", "releases", "meta_ops"):
        assert isinstance(s[k], int) and s[k] >= 0
    assert s == {**session.stats(), "meta_ops": s["meta_ops"]}


def test_deferred_error_names_op_and_call_site(session):
    x = tensord.tensor([[1.0, 2.0], [3.0, 4.0]])
    bad = tensord.tensor([[0, 5], [1, 0]])
    y = x.gather(1, bad)        # an out-of-range index: only the kernel can tell
    line = sys._getframe().f_lineno - 1
    z = y * 2                   # depends on the failed op
    assert z.shape == (2, 2)    # metadata is known; no error yet
    with pytest.raises((RuntimeError, IndexError)) as e:
        z.numpy()
    msg = str(e.value)
    assert "gather" in msg and f"test_session.py:{line}" in msg
    rows = tensord.tensor([0, 7])
    x.index_select(0, rows)
    line2 = sys._getframe().f_lineno - 1
    with pytest.raises(IndexError) as e:     # the kernel's error kind survives the wire
        tensord.synchronize()
    assert "index_select" in str(e.value) and f"test_session.py:{line2}" in str(e.value)
    tensord.synchronize()       # reported once
    assert x.sum().item() == 10.0


def test_synchronize_waits_for_the_threads_session(session, daemon):
    """Inside ``with s:`` tensord.synchronize() is a sync point of s (where
    the thread's ops went), as tensord.cuda.synchronize(): it raises s's
    deferred error, and the default session's stays for its own sync."""
    s = tensord.connect(daemon.address, set_default=False)
    try:
        with s:
            x = tensord.tensor([1.0, 2.0])
            x.index_select(0, tensord.tensor([3]))
            with pytest.raises(IndexError, match="index_select.*index 3 is out of bounds"):
                tensord.synchronize()
            tensord.synchronize()   # reported once
            assert (x + 1).tolist() == [2.0, 3.0]
    finally:
        s.close()
    tensord.synchronize()


def test_releases_are_batched(session, daemon):
    s = tensord.connect(daemon.address, set_default=False, flush_interval=0)   # exact message counts
    with s:
        before = s.stats()
        for _ in range(300):
            tensord.ones(3)         # dropped at once
        s.synchronize()
        after = s.stats()
    s.close()
    assert after["releases"] - before["releases"] >= 300
    assert after["messages_sent"] - before["messages_sent"] <= 4


def test_two_sessions_are_isolated(session, daemon):
    other = tensord.connect(daemon.address, set_default=False)
    try:
        assert other.session_id != session.session_id
        a = tensord.ones(3)                 # default session
        with other:
            b = tensord.full((3,), 2.0)     # the other session
            c = b * 5
        assert c.tolist() == [10.0, 10.0, 10.0]
        with pytest.raises(RuntimeError, match="different sessions"):
            a + b
        other.close()
        with pytest.raises(RuntimeError, match="closed"):
            b + 1
        assert (a + 1).tolist() == [2.0, 2.0, 2.0]
    finally:
        other.close()


def test_the_default_session_equals_the_session_connect_returned(session, daemon):
    s = tensord.connect(daemon.address, set_default=False)
    other = tensord.connect(daemon.address, set_default=False)
    try:
        previous = tensord.default_session()
        assert previous != s
        tensord._C.set_default_session(s._raw)
        try:
            assert tensord.default_session() == s and hash(tensord.default_session()) == hash(s)
            assert tensord.default_session() != other and len({s, tensord.default_session(), other}) == 2
        finally:
            tensord._C.set_default_session(previous._raw if previous is not None else None)
    finally:
        s.close()
        other.close()


def test_connect_errors_are_clear():
    with pytest.raises(RuntimeError, match="nonexistent"):
        tensord.connect("unix:/nonexistent/dir/tensord.sock", set_default=False)
    # A socket path without unix: (a DNS error from gRPC before) and a host without a port.
    with pytest.raises(RuntimeError, match="for this socket write unix:/tmp/tensord.sock"):
        tensord.connect("/tmp/tensord.sock", set_default=False)
    with pytest.raises(RuntimeError, match=r"'localhost' is not a daemon address \(expected unix:/path or host:port\)"):
        tensord.connect("localhost", set_default=False)


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_embedded_daemon_starts_on_first_real_tensor_and_stops_at_exit():
    code = r"""
import os, tensord
assert tensord.default_session() is None
x = tensord.ones(2, 2)              # the first real tensor spawns a private daemon
s = tensord.default_session()
assert s is not None and s.daemon_pid > 0 and s.address.startswith("unix:")
print(s.daemon_pid, s.address)
print((x @ x).sum().item())
"""
    env = subprocess_env()
    env.pop("TENSORD_ADDRESS", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    pid_line, value = r.stdout.split("\n")[:2]
    pid, address = pid_line.split()
    assert float(value) == 8.0
    # The daemon was stopped and its private socket removed at exit.
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert not os.path.exists(address[len("unix:"):])


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_killed_client_leaves_no_private_daemon_directory(tmp_path):
    """A client killed with SIGKILL: its embedded daemon stops (parent-death
    signal) and removes its private directory (socket and logs)."""
    code = r"""
import sys, tensord
x = tensord.ones(2)
s = tensord.default_session()
print(s.daemon_pid, s.address, flush=True)
x.sum().item()
sys.stdin.read()                     # wait to be killed
"""
    env = subprocess_env(TMPDIR=str(tmp_path))
    env.pop("TENSORD_ADDRESS", None)
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        pid, address = p.stdout.readline().split()
        private_dir = os.path.dirname(address[len("unix:"):])
        assert os.path.basename(private_dir).startswith("tensord-") and os.path.isdir(private_dir)
    finally:
        p.kill()
        p.wait(timeout=30)
    deadline = time.monotonic() + 30
    while os.path.exists(private_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(private_dir), os.listdir(private_dir)
    assert os.listdir(tmp_path) == []


def test_data_dependent_ops_wait_once(session):
    x = tensord.from_numpy(np.array([[0, 1, 0], [2, 3, 0]], dtype=np.float32))
    before = tensord.stats()["round_trips"]
    nz = x.nonzero()
    assert tensord.stats()["round_trips"] - before == 1
    assert nz.shape == (3, 2) and nz.tolist() == [[0, 1], [1, 0], [1, 1]]
    assert x[x > 0].tolist() == [1.0, 2.0, 3.0]


def test_error_of_an_unread_result_raises_at_the_next_read(session):
    """A failed op whose output nobody reads (an advanced-index write, an
    in-place op) raises at the next sync point of any kind, once, with its
    call site; the tensor it would have written keeps its values (as after a
    PyTorch exception)."""
    x = tensord.zeros(2, 3)
    x[:, tensord.tensor([3])] = 4.0
    line = sys._getframe().f_lineno - 1
    y = x + 1                   # queued behind the failed write
    with pytest.raises(IndexError) as e:
        y.tolist()
    assert "index 3 is out of bounds for dimension 1 with size 3" in str(e.value)
    assert f"test_session.py:{line}" in str(e.value)
    assert y.tolist() == [[1.0] * 3] * 2     # reported once; x was not written
    x[tensord.tensor([-3])] = 4.0
    with pytest.raises(IndexError, match="index -3 is out of bounds for dimension 0 with size 2"):
        x.sum().item()
    x.add_(tensord.zeros(3).index_select(0, tensord.tensor([9])))   # in-place on a failed input
    with pytest.raises(IndexError, match="index_select.*index 9 is out of bounds"):
        print(x)
    x[tensord.tensor([1]), tensord.tensor([2])] = 4.0     # a good write still lands
    assert x.tolist() == [[0.0] * 3, [0.0, 0.0, 4.0]]


OUT_OF_MEMORY_SCRIPT = r"""
import sys
import numpy as np
import tensord
with tensord.connect(sys.argv[1], set_default=False) as s:
    # sizes for each way an upload travels: chunked on the stream, or (shared
    # memory) copied through a segment or adopted as the storage
    for n in (1_500_000, 3_000_000, 20_000_000):
        try:
            tensord.tensor(np.zeros(n, dtype=np.uint8)).sum().item()  # line 10 of <string>
        except tensord.OutOfMemoryError as e:
            msg = str(e)
            assert isinstance(e, RuntimeError) and isinstance(e, MemoryError), type(e).__mro__
            assert msg.startswith("upload (call ") and " at <string>:10): out of memory: tried to allocate " in msg, msg
            assert f"({n} bytes); this session has 0 bytes in use of its 1.00 MiB limit (1048576 bytes)" in msg, msg
        else:
            raise AssertionError(f"an upload of {n} bytes over a 1 MiB limit did not fail")
    try:
        tensord.zeros(2_000_000, dtype=tensord.uint8).sum().item()
    except RuntimeError as e:
        assert type(e) is tensord.OutOfMemoryError and "zeros (call " in str(e), repr(e)
    else:
        raise AssertionError("zeros over the limit did not fail")
    assert (tensord.ones(3) + 1).tolist() == [2.0, 2.0, 2.0]  # the session goes on
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
@pytest.mark.parametrize("path", ["shm", "same-host", "grpc", "tcp"])
def test_out_of_session_memory_is_a_runtime_error_naming_the_line_on_every_path(path):
    # PyTorch raises RuntimeError when an allocation fails; tensord's
    # OutOfMemoryError is one, and a MemoryError. An upload's error names
    # the line that made the tensor, and reads the same whichever way its
    # bytes travelled (the shared-memory adoption once said it otherwise).
    run_script_on_path(OUT_OF_MEMORY_SCRIPT, path, ["--session-memory-limit", "1MiB"])


# For the scripts below: out_of_memory(read, what) runs read() and returns
# the tensord.OutOfMemoryError it raises (AssertionError naming `what` if it
# raises none).
OUT_OF_MEMORY_HELPER = r"""
import tensord
def out_of_memory(read, what):
    try:
        read()
    except tensord.OutOfMemoryError as e:
        return e
    raise AssertionError(f"{what} did not fail")
"""

FAILED_SHM_UPLOADS_SCRIPT = OUT_OF_MEMORY_HELPER + r"""
import sys
import numpy as np
import tensord
with tensord.connect(sys.argv[1], set_default=False) as s:
    assert s.uses_shared_memory
    held = tensord.zeros(40 << 18)  # 40 MiB of the 64 MiB limit
    arr = np.ones(30 << 20, np.uint8)
    for _ in range(30):
        t = tensord.tensor(arr)  # adopted from a segment of its own, over the limit
        out_of_memory(lambda: t.sum().item(), "an upload over the limit")
        del t
    st = s.stats()
    # the failed syncs' replies hand each segment back: one or two in turn
    assert st["shm_segments_created"] <= 3 and st["shm_adopted_uploads"] == 30, st
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_failed_shared_memory_uploads_give_their_segments_back():
    # Once, only successful replies listed freed segments: a session whose
    # syncs kept failing made a new segment for every upload, until it gave
    # up adopting (17 segments for 30 uploads).
    run_script_on_path(FAILED_SHM_UPLOADS_SCRIPT, "shm", ["--session-memory-limit", "64MiB"])


ADOPTED_UPLOAD_SYNC_SCRIPT = OUT_OF_MEMORY_HELPER + r"""
import sys
import numpy as np
import tensord
with tensord.connect(sys.argv[1], set_default=False) as s:
    assert s.uses_shared_memory
    a = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: adopted
    before = s.stats()
    t = tensord.tensor(a)
    sent = s.stats()["messages_sent"] - before["messages_sent"]
    assert sent == 1, sent  # the upload went out at once, with a sync of its own
    s.synchronize()
    st = s.stats()
    # synchronize waited for that sync's reply and sent nothing more
    assert st["messages_sent"] - before["messages_sent"] == 1, (before, st)
    assert st["round_trips"] - before["round_trips"] == 1, (before, st)
    assert st["shm_adopted_uploads"] - before["shm_adopted_uploads"] == 1, (before, st)
    assert t[-1].item() == a[-1] and t.sum().item() == float(a.astype(np.float64).sum())
    s.synchronize()  # nothing new since: an ordinary sync
    big = np.ones(70 << 20, np.uint8)  # over the 64 MiB limit
    line = sys._getframe().f_lineno + 1
    u = tensord.tensor(big)
    e = out_of_memory(s.synchronize, "a sync right after an upload over the limit")
    assert str(e).startswith("upload (call ") and f"at <string>:{line}): out of memory" in str(e), e
    line = sys._getframe().f_lineno + 1
    u = tensord.tensor(big)
    v = tensord.ones(3) + 1  # sent with the next sync, after the upload's own
    e = out_of_memory(s.synchronize, "a sync after an upload over the limit and an op")
    assert f"at <string>:{line}): out of memory" in str(e) and "more error" not in str(e), e
    line = sys._getframe().f_lineno + 1
    u = tensord.tensor(big)
    e = out_of_memory(lambda: v.tolist(), "a fetch after an upload over the limit")
    assert f"at <string>:{line}): out of memory" in str(e) and "more error" not in str(e), e
    e = out_of_memory(lambda: u.sum().item(), "reading the upload that failed")
    assert f"at <string>:{line}): out of memory" in str(e) and "more error" not in str(e), e
    # a backward through an upload that failed carries its error: raised
    # once, there, and not again at the next sync point
    w = tensord.ones(3, requires_grad=True)
    s.synchronize()
    line = sys._getframe().f_lineno + 1
    u = tensord.tensor(big)
    (w * u[:3].float()).sum().backward()
    e = out_of_memory(lambda: w.grad.tolist(), "the grad of a backward through an upload over the limit")
    assert str(e).startswith("backward (at ") and f"at <string>:{line}): out of memory" in str(e), e
    s.synchronize()
    assert v.tolist() == [2.0, 2.0, 2.0] and t[7].item() == 7.0  # the session goes on
    s.synchronize()
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_a_sync_right_after_an_adopted_upload_waits_for_the_sync_sent_with_it():
    # An adopting upload goes out before its bytes are copied into the
    # segment, with a sync: the daemon adopts the segment meanwhile, and a
    # synchronize() that follows waits for that sync's reply (no round trip
    # of its own after the copy). Its errors reach whichever sync point
    # comes next, as any op's do.
    run_script_on_path(ADOPTED_UPLOAD_SYNC_SCRIPT, "shm", ["--session-memory-limit", "64MiB"])


BACKWARD_OUT_OF_MEMORY_SCRIPT = OUT_OF_MEMORY_HELPER + r"""
import sys
import tensord
import tensord.nn as nn
with tensord.connect(sys.argv[1], set_default=False) as s:
    m = nn.Linear(1024, 1024)  # 4 MiB of weight; its grad does not fit in the 8 MiB limit
    loss = m(tensord.randn(64, 1024)).pow(2).mean()
    loss.backward()
    msg = str(out_of_memory(lambda: m.weight.grad.sum().item(), "a backward over the limit"))
    assert "in the backward of linear (matmul): " in msg and ": out of memory: tried to allocate" in msg, msg
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_an_out_of_memory_in_backward_names_the_forward_op():
    # The message once ran "in the backward of linear (matmul)matmul: out of memory".
    run_script_on_path(BACKWARD_OUT_OF_MEMORY_SCRIPT, "same-host", ["--session-memory-limit", "8MiB"])


FREED_THEN_ALLOCATED_SCRIPT = r"""
import sys
import numpy as np
import tensord
with tensord.connect(sys.argv[1], set_default=False) as s:
    for _ in range(3):
        a = np.full(196608, 7, dtype=np.uint8)
        t = tensord.tensor(a)
        assert np.array_equal(t.numpy(), a)
        del t  # 192 KiB of the 1 MiB limit, queued for release
        b = np.arange(900000, dtype=np.uint8)
        u = tensord.tensor(b)  # 879 KiB: fits once t is gone
        assert np.array_equal(u.numpy(), b)
        del u
        x = tensord.zeros(200000, dtype=tensord.uint8) + 1
        assert x.sum().item() == 200000
        del x
        y = tensord.ones(900000, dtype=tensord.uint8)  # an op's output, likewise
        assert y[:3].tolist() == [1, 1, 1]
        del y
        big = tensord.ones(1040000, dtype=tensord.uint8)  # nearly all of the limit
        assert big[:1].tolist() == [1]
        del big
        small = tensord.ones(16384, dtype=tensord.uint8)  # 16 KiB: fits once big is gone
        assert small.sum().item() == 16384
        del small
        big = tensord.ones(1040000, dtype=tensord.uint8)
        row = big[:1]  # a view of one element keeps all of it
        del big
        assert row.tolist() == [1]
        del row
        small = tensord.ones(16384, dtype=tensord.uint8)
        assert small.sum().item() == 16384
        del small
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
@pytest.mark.parametrize("path", ["shm", "same-host", "grpc", "tcp"])
def test_a_tensor_freed_before_a_large_allocation_is_released_first(path):
    # Releases are batched; they go before a request that allocates 64 KiB
    # or more, or before any that allocates once 64 KiB wait for release,
    # so that a session near its memory limit can reuse what it freed (the
    # shared-memory path once raised out of memory here, and a small op
    # after a large tensor's del on every path).
    run_script_on_path(FREED_THEN_ALLOCATED_SCRIPT, path, ["--session-memory-limit", "1MiB"])


def test_kernel_scratch_counts_against_the_session_memory_limit():
    """Temporaries inside kernels (conv2d's im2col buffer, the contiguous copy
    of an expanded matmul operand) are charged to the session like outputs: over
    --session-memory-limit they raise MemoryError, and the session goes on."""
    from conftest import DAEMON_BIN, Daemon
    import tensord.nn.functional as F

    if not DAEMON_BIN:
        pytest.skip("no tensord daemon binary")
    d = Daemon(DAEMON_BIN, extra_args=["--session-memory-limit", "100000000"])
    try:
        s = tensord.connect(d.address, set_default=False)
        with s:
            # output 1x1x107x107 is small; im2col is 10,000 x 11,449 floats (458 MB)
            y = F.conv2d(tensord.zeros(1, 1, 8, 8), tensord.zeros(1, 1, 100, 100), padding=99)
            with pytest.raises(MemoryError):
                y.numpy()
            # a [20000, 15000] stride-0 operand copied contiguous for BLAS (1.2 GB)
            z = tensord.zeros(1, 1).expand(20000, 15000) @ tensord.zeros(15000, 1)
            with pytest.raises(MemoryError):
                z.numpy()
            # topk's sort slots: 7M x (float, int64) pairs (112 MB) for a 28 MB input
            v, i = tensord.zeros(7_000_000).topk(1)
            with pytest.raises(MemoryError):
                v.numpy()
            assert (tensord.ones(3) + 1).tolist() == [2.0, 2.0, 2.0]
        s.close()
    finally:
        d.stop()


def test_empty_strided_with_huge_stride_zero_dims_is_immediate(session):
    """empty_strided((2**62,), (0,)) addresses one element: the daemon zeroes
    that element's storage, not 2**62 logical elements (which would pin it)."""
    t = tensord.empty_strided((2 ** 62,), (0,))
    assert t.shape == (2 ** 62,) and t.stride() == (0,)
    assert t[5].item() == 0.0
    m = tensord.empty_strided((2 ** 20, 2 ** 20), (0, 0))
    assert m[7, 9].item() == 0.0


def run_script_ok(script, address, argv=(), **env):
    """Runs `script` in a fresh Python (argv[1] = `address`, then `argv`;
    `env` added to the environment) and checks that it exits 0 after printing
    "ok"."""
    r = subprocess.run([sys.executable, "-c", script, address, *argv], capture_output=True, text=True, timeout=120,
                       env=subprocess_env(**env))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "ok"


# How a client reaches a daemon on each transport path: by its TCP address
# (else its Unix socket), with these environment variables.
PATHS = {
    "shm": (False, {}),
    "same-host": (False, {"TENSORD_SHM": "0"}),
    "grpc": (False, {"TENSORD_SHM": "0", "TENSORD_SAME_HOST_STREAM": "0"}),
    "tcp": (True, {}),
    "tcp-grpc": (True, {"TENSORD_TCP_STREAM": "0"}),
}


def address_and_env(daemon, path):
    """The address a client on `path` (a key of PATHS) connects to, and the
    environment it needs; the daemon must also listen on a TCP port."""
    tcp, env = PATHS[path]
    return (daemon.tcp_address if tcp else daemon.address), env


def run_script_on_path(script, path, daemon_args=()):
    """Starts a daemon with `daemon_args` (and a TCP port), and runs
    `script` as run_script_ok does, from a client on `path`."""
    with Daemon(DAEMON_BIN, extra_args=[*daemon_args, "--listen", "127.0.0.1:0"]) as d:
        address, env = address_and_env(d, path)
        run_script_ok(script, address, **env)


GRPC_STREAMS_SCRIPT = r"""
import sys
import tensord
held = [tensord.connect(sys.argv[1], set_default=False) for _ in range(8)]
try:
    tensord.connect(sys.argv[1], set_default=False)
except RuntimeError as e:
    msg = str(e)
    assert "already serves 8 Stream calls on gRPC" in msg and "TENSORD_SAME_HOST_STREAM" in msg, msg
else:
    raise AssertionError("a ninth session stream on gRPC connected to a daemon with 24 gRPC threads")
for s in held:
    with s:
        assert (tensord.ones(3) + 1).tolist() == [2.0, 2.0, 2.0]
held.pop().close()                    # frees a stream
with tensord.connect(sys.argv[1], set_default=False) as s:
    assert tensord.ones(2).sum().item() == 2.0
print("ok")
"""


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
@pytest.mark.parametrize("path", ["grpc", "tcp-grpc"])
def test_a_session_stream_the_daemon_has_no_grpc_thread_for_fails_connect(path):
    # --grpc-threads 24 leaves 8 for session streams on gRPC (16 are kept
    # for health checks and opening and closing sessions): the ninth is
    # refused, and connect() says so, instead of the first sync point.
    run_script_on_path(GRPC_STREAMS_SCRIPT, path, ["--grpc-threads", "24"])


FORK_SCRIPT = r"""
import os, sys
import tensord
s = tensord.connect(sys.argv[1])
x = tensord.ones(3)
assert x.sum().item() == 3.0
pid = os.fork()
if pid == 0:
    try:
        (x + 1).sum().item()
        print("child used the parent's session")
        os._exit(3)
    except RuntimeError as e:
        assert "was forked from it" in str(e) and str(os.getppid()) in str(e), e
    # A session of its own would need a new gRPC connection, which hangs or
    # crashes in a child of a process whose gRPC threads ran: refused, at once.
    for attempt in (lambda: tensord.connect(sys.argv[1]), lambda: tensord.connect(sys.argv[1], set_default=False)):
        try:
            attempt()
            print("child connected")
            os._exit(4)
        except RuntimeError as e:
            assert "forked from one that had already connected" in str(e) and "'spawn'" in str(e), e
    sys.exit(0)  # a normal exit: atexit closes sessions, which must spare the parent's
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert (x * 2).sum().item() == 6.0  # the parent's session and stream are intact
s.close()  # CloseSession: a unary call on the parent's connection, which must still work
print("ok")
"""


@pytest.mark.parametrize("same_host", ["1", "0"])
def test_a_forked_child_neither_uses_nor_closes_the_parents_session(daemon, same_host):
    # os.fork() copies the client's sessions: using one from the child would
    # interleave messages on the parent's stream, and closing it at the
    # child's exit would end the parent's session (before, the child's exit
    # hung joining the parent's flusher thread). The child's own session has
    # a connection of its own: through gRPC's shared subchannel pool it took
    # the parent's inherited connection, and the parent's next call hung.
    # Opening one in the child is refused (gRPC does not survive fork: with
    # two children connecting, most runs hung or crashed).
    run_script_ok(FORK_SCRIPT, daemon.address, TENSORD_SAME_HOST_STREAM=same_host)


FORK_BEFORE_CONNECT_SCRIPT = r"""
import os, sys
import tensord
pids = []
for k in range(2):  # forked before this process touched gRPC: each child may connect
    pid = os.fork()
    if pid == 0:
        tensord.connect(sys.argv[1])
        os._exit(0 if (tensord.ones(2) * (k + 1)).sum().item() == 2.0 * (k + 1) else 5)
    pids.append(pid)
tensord.connect(sys.argv[1])
assert tensord.ones(3).sum().item() == 3.0
codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]
assert codes == [0, 0], codes
print("ok")
"""


def test_children_forked_before_the_first_connection_open_sessions_of_their_own(daemon):
    run_script_ok(FORK_BEFORE_CONNECT_SCRIPT, daemon.address)


FORK_AFTER_OPENMP_SCRIPT = r"""
import os, signal, sys
import numpy as np
import torch
if sys.argv[2] == "before":
    import tensord
torch.set_num_threads(2)
(torch.ones(1 << 22) * 2).sum()  # GNU OpenMP's team of threads exists in this process now
pid = os.fork()
if pid == 0:
    signal.alarm(60)  # a hang ends the child instead of the test
    import tensord  # (already loaded when argv[2] is "before")
    tensord.connect(sys.argv[1])
    x = np.arange(5 << 20, dtype=np.float32)  # 20 MiB: a copy split across threads when a core is idle
    t = tensord.from_numpy(x)
    back = t.numpy()
    st = tensord.stats()
    os._exit(0 if np.array_equal(back, x) and st["shm_uploads"] == 1 and st["shm_fetches"] == 1 else 5)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
assert code == 0, code
print("ok")
"""


@pytest.mark.parametrize("tensord_imported", ["before", "after"])
def test_large_same_host_copies_work_in_a_child_forked_after_openmp_ran(daemon, tensord_imported):
    # Copies of 16 MiB and more through shared memory are split across
    # threads. GNU OpenMP's threads do not survive fork: in a child of a
    # process that had a team (here torch's), a new team waits for them
    # forever, and the child may load tensord only after the fork (a
    # multiprocessing worker), where it cannot know of it. With OpenMP the
    # child's upload hung (SIGALRM after 60 s); the copies use threads of
    # tensord's own.
    run_script_ok(FORK_AFTER_OPENMP_SCRIPT, daemon.address, argv=[tensord_imported])
