#!/usr/bin/python3
"""The Python-side figures of `make bench`, each beside a peer
measured in the same run. Not a test: nothing here passes or fails.

    /usr/bin/python3 bench/py_bench.py [--json FILE] [--only 1,4,6,7] [--quick]

Figures (numbering as in bench/RESULTS.md):
  1  pipelined small ops: 100,000 ``c = a + b`` on 64-element float32 tensors,
     then one ``item()``; microseconds per op through a daemon on a Unix socket
     (with the same-host stream, unless $TENSORD_SAME_HOST_STREAM=0) and on
     loopback TCP, beside the same loop in local PyTorch on CPU; and a loop
     that interleaves ops with Python work (30 ops on 65,536 floats, ten
     small ops with 20 us of Python before each, one ``item()``), in
     microseconds per iteration on the Unix socket, beside local PyTorch;
  4  CPU kernels in the daemon (add, mul, exp, sum, softmax over 16M float32,
     matmul 1024x1024 float32) in GB/s or GFLOP/s, beside NumPy (and
     OpenBLAS's cblas_sgemm called directly for matmul);
  6  one epoch of the digits MLP (examples/digits_mlp.py) through the daemon,
     in seconds, beside the same epoch in local PyTorch;
  7  16 client processes streaming 20,000 small ops each and syncing every
     100: aggregate ops/s beside 16 local PyTorch processes running the same
     loop, p50/p99 sync latency, errors, and the daemon's resident memory
     before the clients and after they disconnect.

Every figure is the median of repeated runs. Figures 1 and 6 run the
PyTorch loop and tensord's in turn (7 pairs; 9 epochs each for figure 6), so
that drift on a shared machine hits both sides; their rows carry
pair_ratio_min and pair_ratio_max (the least and greatest ratio of one pair)
and client_cpu_share and daemon_cpu_share: CPU seconds per wall second of
the Python client and of the daemon while tensord ran (1.0 = one core busy). The daemon is spawned from
$TENSORD_BIN (default build/bin/tensord) listening on a temporary Unix socket
and on 127.0.0.1 port 0; nothing reaches the network. Rows are dicts with
figure, name, unit, ours, peer, peer_name, ratio (ours / peer) and target
(the issue's goal for the ratio, e.g. "<= 1.5").
"""
import argparse
import ctypes
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python-client"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import numpy as np  # noqa: E402

import tensord  # noqa: E402


def daemon_binary():
    """The tensord binary: $TENSORD_BIN, else build/bin/tensord in the tree."""
    return os.environ.get("TENSORD_BIN") or os.path.join(ROOT, "build", "bin", "tensord")


class Daemon:
    """`tensord serve` on a temporary Unix socket and 127.0.0.1 port 0.

    Attributes: unix (the "unix:PATH" address), tcp ("127.0.0.1:PORT"), pid.
    Raises RuntimeError when the daemon does not report its addresses within
    30 seconds."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tensord-bench-")
        self.unix = "unix:" + os.path.join(self.dir, "sock")
        self.log = open(os.path.join(self.dir, "stderr.log"), "w+")
        self.proc = subprocess.Popen([daemon_binary(), "serve", "--listen", self.unix, "--listen", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                line = self.proc.stdout.readline().decode()
                if line.startswith("tensord: listening on "):
                    addrs = [a.strip() for a in line[len("tensord: listening on "):].split(",")]
                    self.tcp = next(a for a in addrs if not a.startswith("unix:"))
                    return
            if self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError("the tensord daemon did not start (see its stderr)")

    def rss_bytes(self, field="VmRSS"):
        """The daemon's resident memory in bytes: `field` of /proc/PID/status,
        VmRSS (all of it) or RssAnon (without the code and files it has
        mapped, which the kernel can drop and read again)."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu_seconds(self):
        """CPU seconds (user + system, all threads) the daemon has used so far."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def row(figure, name, unit, ours, peer, peer_name, target, **extra):
    r = dict(figure=figure, name=name, unit=unit, ours=ours, peer=peer, peer_name=peer_name,
             ratio=(ours / peer) if peer else None, target=target)
    r.update(extra)
    return r


def median_of(fn, repeats):
    return statistics.median(fn() for _ in range(repeats))


def pair_ratios(ours, peer):
    """The spread of a figure measured in alternating pairs: the least and the
    greatest of ours[i] / peer[i] (each pair taken one right after the other),
    as row fields pair_ratio_min and pair_ratio_max."""
    r = [o / p for o, p in zip(ours, peer) if p]
    return dict(pair_ratio_min=min(r), pair_ratio_max=max(r)) if r else {}


class CpuShare:
    """CPU seconds per wall second of this process and of the daemon while the
    `with` block runs (1.0 = one core busy): which side a figure waits on.
    Accumulates over several blocks; `shares()` gives the row fields."""

    def __init__(self, daemon):
        self.daemon, self.client, self.server, self.wall = daemon, 0.0, 0.0, 0.0

    def __enter__(self):
        self._t = (time.process_time(), self.daemon.cpu_seconds(), time.perf_counter())
        return self

    def __exit__(self, *exc):
        c, d, w = self._t
        self.client += time.process_time() - c
        self.server += self.daemon.cpu_seconds() - d
        self.wall += time.perf_counter() - w

    def shares(self):
        return dict(client_cpu_share=self.client / self.wall, daemon_cpu_share=self.server / self.wall)


# ---------------------------------------------------------------- figure 1

def fig1_pipelined(daemon, n_ops, repeats):
    import torch

    def tensord_loop(session, cpu):
        with session:
            a, b = tensord.randn(64), tensord.randn(64)
            c = a + b
            c.sum().item()                        # warm: the session, the op path
            with cpu:
                t0 = time.perf_counter()
                for _ in range(n_ops):
                    c = a + b
                c[0].item()
                return (time.perf_counter() - t0) / n_ops * 1e6

    def torch_loop():
        a, b = torch.randn(64), torch.randn(64)
        t0 = time.perf_counter()
        for _ in range(n_ops):
            c = a + b
        c[0].item()
        return (time.perf_counter() - t0) / n_ops * 1e6

    torch.set_num_threads(1)
    torch_loop()                                  # warm
    sessions = []
    for transport, address in (("unix socket", daemon.unix), ("loopback TCP", daemon.tcp)):
        s = tensord.connect(address, set_default=False)
        if s.uses_same_host_stream:
            transport += ", same-host stream"
        if s.uses_tcp_stream:
            transport += ", tcp stream"
        sessions.append((transport, s, CpuShare(daemon), []))
    # PyTorch's loop and each transport's in turn, `repeats` times: drift on
    # a shared machine hits every side alike.
    peer_t = []
    for _ in range(repeats):
        peer_t.append(torch_loop())
        for _, s, cpu, ours_t in sessions:
            ours_t.append(tensord_loop(s, cpu))
    rows = []
    for transport, s, cpu, ours_t in sessions:
        s.close()
        rows.append(row(1, f"pipelined c = a + b, 64 floats ({transport})", "us/op", statistics.median(ours_t),
                        statistics.median(peer_t), f"PyTorch {torch.__version__} local", "<= 1.5",
                        **pair_ratios(ours_t, peer_t), **cpu.shares()))
    return rows


def _spin(us):
    """Busy Python work for `us` microseconds (stands for a step's own code)."""
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def fig1_interleaved(daemon, iters, repeats):
    """Figure 1's second kind of row: ops interleaved with Python work, as in a
    training step. Each iteration streams 30 `c = c * 1.0001` on 65,536 float32
    (the daemon's work), then ten `y = y + 1` on 64 floats with 20 us of Python
    before each (the client's), then one `item()`: microseconds per iteration
    through the daemon on the Unix socket, beside the same loop in local
    PyTorch (one thread, as figure 1). The daemon overlaps its work with the
    client's only once the batch has been sent before the sync point."""
    import torch

    def loop(a, x):
        t0 = time.perf_counter()
        for _ in range(iters):
            c = a
            for _ in range(30):
                c = c * 1.0001
            y = x
            for _ in range(10):
                _spin(20)
                y = y + 1
            (c[0] + y[0]).item()
        return (time.perf_counter() - t0) / iters * 1e6

    def tensord_loop(session, cpu):
        with session:
            a, x = tensord.randn(65536), tensord.randn(64)
            loop(a, x)                            # warm: the session, the op path, the caches
            with cpu:
                return loop(a, x)

    torch.set_num_threads(1)
    ta, tx = torch.randn(65536), torch.randn(64)
    loop(ta, tx)
    s = tensord.connect(daemon.unix, set_default=False)
    transport = "unix socket, same-host stream" if s.uses_same_host_stream else "unix socket"
    cpu = CpuShare(daemon)
    ours_t, peer_t = [], []
    for _ in range(repeats):                      # alternately, as figure 1's first rows
        peer_t.append(loop(ta, tx))
        ours_t.append(tensord_loop(s, cpu))
    s.close()
    return [row(1, f"30 ops on 64K floats, 10 small ops between Python work, item ({transport})", "us/iter",
                statistics.median(ours_t), statistics.median(peer_t), f"PyTorch {torch.__version__} local", "<= 1.5",
                **pair_ratios(ours_t, peer_t), **cpu.shares())]


# ---------------------------------------------------------------- figure 4

def _openblas_sgemm():
    """cblas_sgemm from libopenblas, or None when the library is missing."""
    for name in ("libopenblas.so.0", "libopenblas.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        f = lib.cblas_sgemm
        f.restype = None
        f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                      ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
        return f
    return None


def fig4_kernels(daemon, repeats):
    n = 16 * 1024 * 1024
    rng = np.random.default_rng(0)
    xa = rng.standard_normal(n, dtype=np.float32)
    xb = rng.standard_normal(n, dtype=np.float32)
    m = 1024
    ma = rng.standard_normal((m, m), dtype=np.float32)
    mb = rng.standard_normal((m, m), dtype=np.float32)
    rows = []
    s = tensord.connect(daemon.unix, set_default=False)
    with s:
        a, b = tensord.from_numpy(xa), tensord.from_numpy(xb)
        a2 = a.view(4096, 4096)
        ta, tb = tensord.from_numpy(ma), tensord.from_numpy(mb)
        s.synchronize()

        def daemon_time(fn):
            # One op then a sync, minus a bare sync: the op's time in the daemon.
            def once():
                t0 = time.perf_counter()
                r = fn()
                s.synchronize()
                dt = time.perf_counter() - t0
                del r
                s.synchronize()
                return dt
            once()
            op = median_of(once, repeats)
            def bare():
                t0 = time.perf_counter()
                s.synchronize()
                return time.perf_counter() - t0
            return max(op - median_of(bare, repeats), 1e-9)

        def np_time(fn):
            fn()
            def once():
                t0 = time.perf_counter()
                fn()
                return time.perf_counter() - t0
            return median_of(once, repeats)

        def np_softmax(x):
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            e /= e.sum(axis=-1, keepdims=True)
            return e

        x2 = xa.reshape(4096, 4096)
        gb = 1e-9
        cases = [
            ("add 16M float32", 3 * 4 * n, lambda: a + b, lambda: np.add(xa, xb)),
            ("mul 16M float32", 3 * 4 * n, lambda: a * b, lambda: np.multiply(xa, xb)),
            ("exp 16M float32", 2 * 4 * n, lambda: a.exp(), lambda: np.exp(xa)),
            ("sum 16M float32", 4 * n, lambda: a.sum(), lambda: xa.sum()),
            ("softmax 4096x4096 float32 (dim=-1)", 2 * 4 * n, lambda: a2.softmax(-1), lambda: np_softmax(x2)),
        ]
        for name, nbytes, ours_fn, np_fn in cases:
            ours = nbytes * gb / daemon_time(ours_fn)
            peer = nbytes * gb / np_time(np_fn)
            rows.append(row(4, name, "GB/s", ours, peer, f"NumPy {np.__version__}", ">= 0.9"))
        flops = 2.0 * m * m * m * 1e-9
        ours = flops / daemon_time(lambda: ta @ tb)
        sgemm = _openblas_sgemm()
        if sgemm is not None:
            out = np.empty((m, m), dtype=np.float32)
            def blas():
                sgemm(101, 111, 111, m, m, m, 1.0, ma.ctypes.data, m, mb.ctypes.data, m, 0.0, out.ctypes.data, m)
            peer, peer_name = flops / np_time(blas), "OpenBLAS cblas_sgemm"
        else:
            peer, peer_name = flops / np_time(lambda: ma @ mb), f"NumPy {np.__version__} matmul"
        rows.append(row(4, "matmul 1024x1024 float32", "GFLOP/s", ours, peer, peer_name, ">= 0.9"))
    s.close()
    return rows


# ---------------------------------------------------------------- figure 6

class _NoBar:
    def __init__(self, *a, **k):
        pass

    def set_postfix_str(self, s):
        pass

    def update(self, k=1):
        pass

    def close(self):
        pass


# Figure 6 waits this long (seconds) before each timed run, so that neither
# run starts while the other's idle threads still poll, on the cores the
# daemon and this client need: PyTorch's OpenMP workers spin for
# milliseconds after its last op (libgomp's GOMP_SPINCOUNT), and OpenBLAS's
# for up to 2^28 cycles (0.1 s at 2.7 GHz; the daemon shortens its own,
# server/src/main.cc).
_SETTLE_S = 0.12


def fig6_digits_epoch(daemon, repeats):
    import digits_mlp
    from digits_knn import split

    digits_mlp.progress = _NoBar
    x_train, y_train, x_test, y_test = split()
    data = (x_train / 16.0, y_train, x_test / 16.0, y_test)
    args = argparse.Namespace(lr=3e-3, seed=0, batch_size=32, epochs=1)
    plan = digits_mlp.batches(len(x_train), args.batch_size, 1, args.seed)
    ours_t, peer_t = [], []
    cpu = CpuShare(daemon)
    transport = "unix socket"
    for _ in range(repeats):
        time.sleep(_SETTLE_S)
        s = tensord.connect(daemon.unix, set_default=False)
        if s.uses_same_host_stream:
            transport = "unix socket, same-host stream"
        with s, cpu:
            initial, _, _, sec = digits_mlp.train_tensord(data, plan, args)
        s.close()
        ours_t.append(sec)
        time.sleep(_SETTLE_S)
        _, _, tsec, ver = digits_mlp.train_torch(data, plan, initial, args)
        peer_t.append(tsec)
    return [row(6, f"digits MLP, one epoch ({len(plan[0])} steps of batch 32, {transport})", "s",
                statistics.median(ours_t), statistics.median(peer_t), f"PyTorch {ver} local", "<= 1.5",
                **pair_ratios(ours_t, peer_t), **cpu.shares())]


# ---------------------------------------------------------------- figure 7

_CLIENT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
mode, address, n_ops, every = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
lat, errors = [], 0
if mode == "tensord":
    import tensord
    s = tensord.connect(address)
    a, b = tensord.randn(64), tensord.randn(64)
    s.synchronize()
else:
    import torch
    torch.set_num_threads(1)
    a, b = torch.randn(64), torch.randn(64)
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()                       # start together
t0 = time.perf_counter()
for i in range(n_ops):
    c = a + b
    if (i + 1) % every == 0:
        ts = time.perf_counter()
        try:
            float(c[0].item())
        except Exception:
            errors += 1
        lat.append(time.perf_counter() - ts)
total = time.perf_counter() - t0
print(json.dumps({"seconds": total, "lat": lat, "errors": errors}), flush=True)
if mode == "tensord":
    s.close()
"""


def _run_clients(mode, address, n_clients, n_ops, every):
    procs = [subprocess.Popen([sys.executable, "-c", _CLIENT, os.path.join(ROOT, "python-client"), mode, address,
                               str(n_ops), str(every)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(n_clients)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a {mode} client failed to start")
    t0 = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [json.loads(p.stdout.readline()) for p in procs]   # each client's last line
    wall = time.perf_counter() - t0                                 # before the processes' teardown
    for p in procs:
        p.communicate(timeout=600)
    return wall, results


def fig7_many_clients(daemon, n_clients, n_ops, every):
    before = daemon.rss_bytes()
    anon_before = daemon.rss_bytes("RssAnon")
    wall, res = _run_clients("tensord", daemon.unix, n_clients, n_ops, every)
    time.sleep(1.0)                          # let the daemon close the sessions
    after = daemon.rss_bytes()
    anon_after = daemon.rss_bytes("RssAnon")
    # A second round, not timed: what the first added that a second does not
    # (thread pools, touched code pages) is warm-up, not growth per client.
    _run_clients("tensord", daemon.unix, n_clients, n_ops, every)
    time.sleep(1.0)
    after_second = daemon.rss_bytes()
    lat = sorted(x for r in res for x in r["lat"])
    errors = sum(r["errors"] for r in res)
    ours = n_clients * n_ops / wall
    twall, _ = _run_clients("torch", "", n_clients, n_ops, every)
    peer = n_clients * n_ops / twall
    p50 = lat[len(lat) // 2] * 1e6
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e6
    # The clients (other processes) take the same-host stream unless told not to.
    transport = "unix socket" if os.environ.get("TENSORD_SAME_HOST_STREAM") == "0" else "unix socket, same-host stream"
    return [row(7, f"{n_clients} clients x {n_ops} ops, sync every {every} ({transport})", "ops/s", ours, peer,
                f"{n_clients} local PyTorch processes", "(none)", p50_sync_us=p50, p99_sync_us=p99,
                errors=errors, daemon_rss_before=before, daemon_rss_after=after,
                daemon_rss_after_second=after_second, daemon_anon_before=anon_before,
                daemon_anon_after=anon_after)]


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument("--only", default="1,4,6,7", help="comma-separated figure numbers (default 1,4,6,7)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats and ops (a smoke run, not figures)")
    args = ap.parse_args(argv)
    only = {int(x) for x in args.only.split(",") if x}
    reps = 3 if args.quick else 7
    d = Daemon()
    rows = []
    try:
        if 1 in only:
            rows += fig1_pipelined(d, 10_000 if args.quick else 100_000, reps)
            rows += fig1_interleaved(d, 50 if args.quick else 200, reps)
        if 4 in only:
            rows += fig4_kernels(d, reps)
        if 6 in only:
            rows += fig6_digits_epoch(d, 1 if args.quick else 9)
        if 7 in only:
            rows += fig7_many_clients(d, 16, 2_000 if args.quick else 20_000, 100)
    finally:
        d.stop()
    for r in rows:
        extra = ""
        if r["figure"] == 7:
            extra = (f"  p50 {r['p50_sync_us']:.0f} us, p99 {r['p99_sync_us']:.0f} us, {r['errors']} errors, "
                     f"daemon RSS {r['daemon_rss_before'] / 2**20:.1f} -> {r['daemon_rss_after'] / 2**20:.1f} MiB "
                     f"(after a second round {r['daemon_rss_after_second'] / 2**20:.1f} MiB; anonymous "
                     f"{r['daemon_anon_before'] / 2**20:.1f} -> {r['daemon_anon_after'] / 2**20:.1f} MiB)")
        print(f"{r['figure']}  {r['name']:58} {r['ours']:10.3f} {r['peer']:10.3f} {r['unit']:8} "
              f"ratio {r['ratio']:.2f} (target {r['target']}){extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
