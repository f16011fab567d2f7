#!/usr/bin/python3
"""What `--artifact-isolation process` costs per kernel call: one artifact
kernel (y = x, a memcpy of float32, so that the kernel's own work is the
least a kernel does on its tensors) called from Python on a daemon that runs
it in its own process (the peer) and on one that runs it in a worker
process, for a small and a large tensor. A benchmark, not a test.

    /usr/bin/python3 bench/isolation_bench.py [--build DIR] [--quick]

Each row: N calls streamed, then one synchronize; the time per call is the
median over repeats, the two daemons measured alternately in one run. The
difference is what the worker adds per call: a round trip on its socket
(the daemon waits for the reply) plus copying the input into the shared
memory and the output back, shown beside two memcpy of the tensor (numpy's
copyto) measured in the same run. Prints Markdown rows for bench/RESULTS.md.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNEL = r"""
#include <tensord_kernel.h>
#include <cstring>
TD_EXPORT int32_t isobench_copy_cpu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->shape[d];
  std::memcpy(env->outputs[0].data, x->data, n * 4);  // contiguous float32 (the bench's inputs)
  return TD_OK;
}
static const TdOpDecl kOps[] = {
    {"isobench::copy(Tensor x) -> Tensor", "return empty(x.shape, dtype=x.dtype)", NULL, "isobench_copy_cpu", NULL}};
TD_DEFINE_LIBRARY("isobench", kOps)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(os.path.abspath(args.build), "bin", "tensord")
    os.environ.setdefault("TENSORD_BIN", binary)
    sys.path.insert(0, os.path.join(ROOT, "python-client"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import numpy as np
    import tensord
    from conftest import Daemon

    work = tempfile.mkdtemp(prefix="tensord-isobench-")
    with open(os.path.join(work, "isobench.cc"), "w") as f:
        f.write(KERNEL)
    tdk = os.path.join(work, "isobench.tdk")
    subprocess.run([binary, "build-kernel", "-o", tdk, os.path.join(work, "isobench.cc")], check=True,
                   capture_output=True)
    lib = tensord.library.load(tdk)

    # (floats, calls per repeat, repeats)
    cases = [(1024, 2000, 7), (16 << 20, 10, 5)]
    if args.quick:
        cases = [(1024, 200, 2), (16 << 20, 2, 2)]
    daemons = {
        "in-process": Daemon(binary, extra_args=["--artifacts", "any"]),
        "worker": Daemon(binary, extra_args=["--artifacts", "any", "--artifact-isolation", "process"]),
    }
    sessions = {k: tensord.connect(d.address, set_default=False) for k, d in daemons.items()}
    rows = []
    try:
        for n, calls, repeats in cases:
            times = {k: [] for k in daemons}
            xs = {}
            for k, s in sessions.items():
                with s:
                    xs[k] = tensord.tensor(np.arange(n, dtype=np.float32))
                    y = lib.copy(xs[k])  # warm: the worker starts, the shared memory is mapped and touched
                    assert y[n - 1].item() == n - 1
            for _ in range(repeats):
                for k, s in sessions.items():  # alternately, so that load on the machine hits both
                    with s:
                        x = xs[k]
                        s.synchronize()
                        t0 = time.perf_counter()
                        for _ in range(calls):
                            y = lib.copy(x)
                        s.synchronize()
                        times[k].append((time.perf_counter() - t0) / calls * 1e6)
            a, b = statistics.median(times["in-process"]), statistics.median(times["worker"])
            # The copies' share: the input in and the output back, as memcpy.
            src, dst = np.arange(n, dtype=np.float32), np.empty(n, dtype=np.float32)
            np.copyto(dst, src)
            copies = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(max(1, calls // 10)):
                    np.copyto(dst, src)
                    np.copyto(src, dst)
                copies.append((time.perf_counter() - t0) / max(1, calls // 10) * 1e6)
            rows.append((n, a, b, statistics.median(copies)))
        # A session's first call: in a worker, the worker's start (posix_spawn
        # and exec of tensord) and the library's load come with it.
        first = {k: [] for k in daemons}
        for _ in range(3 if args.quick else 7):
            for k, d in daemons.items():
                s = tensord.connect(d.address, set_default=False)
                with s:
                    x = tensord.ones(1024)
                    s.synchronize()
                    t0 = time.perf_counter()
                    lib.copy(x)
                    s.synchronize()
                    first[k].append((time.perf_counter() - t0) * 1e6)
                s.close()
        first_row = (statistics.median(first["in-process"]), statistics.median(first["worker"]))
    finally:
        for s in sessions.values():
            s.close()
        for d in daemons.values():
            d.stop()
    print("| call of an artifact kernel (y = x, float32) | in the daemon | in a worker | unit | worker adds | "
          "two memcpy of x |")
    print("|---|---:|---:|---|---:|---:|")
    for n, a, b, c in rows:
        size = f"{n // 1024}K floats" if n < (1 << 20) else f"{n >> 20}M floats"
        print(f"| {size} ({n * 4 / 1e6:.3g} MB) | {a:,.1f} | {b:,.1f} | us/call | {b - a:,.1f} us ({b / a:.2f}x) | "
              f"{c:,.1f} us |")
    a, b = first_row
    print(f"| a session's first call, 1K floats (with the library's load; in a worker, its start) | {a:,.1f} | "
          f"{b:,.1f} | us | {b - a:,.1f} us ({b / a:.2f}x) | |")


if __name__ == "__main__":
    main()
