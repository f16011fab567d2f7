"""Meta cost per op from Python: tensord's meta mode beside PyTorch 1.13's meta
device, on the same ops and shapes, in the same run.

    python3 bench/meta_bench.py [--repeat N] [--only add,matmul] [--no-cpp] [--json FILE]
    make bench-meta

For each op it times N calls of tensord on meta tensors and N calls of torch
on device='meta' tensors (best of 5 rounds, time.perf_counter_ns), and prints
our us/op, torch's us/op and the ratio (ours / torch; the issue's target is
<= 0.5). When build/bin/client_bench and build/bin/meta_bench exist (Google
Benchmark installed), two more columns show the same ops from C++: through
client::Call, and the binding + meta function alone; the gaps between the
columns are the Python binding's and the C++ client's shares. Nothing runs
in a daemon. This is a benchmark, not a test: it has no
thresholds and never fails on a slow machine.

With --json FILE it also writes the rows of figure 5 of `make bench`
(bench/run.py), in bench/py_bench.py's row format: one per op (unit us/op,
ours = tensord, peer = torch's meta device) and one for the geometric mean
over the ops (ours and peer the geometric means of the times, ratio the
geometric mean of the ratios), each with the target "<= 0.5".
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python-client"))

import torch  # noqa: E402

import tensord  # noqa: E402


def _cases(lib, dev):
    """(name, zero-arg callable) pairs; `lib` is tensord or torch."""
    a = lib.empty(64, 128, device=dev)
    b = lib.empty(128, 32, device=dev)
    row = lib.empty(128, device=dev)
    x3 = lib.empty(8, 64, 128, device=dev)
    xt = x3.transpose(1, 2)
    img = lib.empty(8, 16, 32, 32, device=dev)
    w = lib.empty(32, 16, 3, 3, device=dev)
    cases = [
        ("add (broadcast)", lambda: a + row),
        ("add (transposed)", lambda: xt + xt),
        ("mul scalar", lambda: a * 2.0),
        ("matmul 2-D", lambda: a @ b),
        ("matmul batched", lambda: x3 @ b),
        ("view", lambda: a.view(128, 64)),
        ("transpose", lambda: a.transpose(0, 1)),
        ("slice", lambda: x3[:, 1:, ::2]),
        ("sum dim", lambda: x3.sum(1)),
        ("sum all", lambda: a.sum()),
        ("softmax", lambda: lib.softmax(x3, -1)),
        ("cat", lambda: lib.cat([a, a, a], 0)),
        ("reshape (copy)", lambda: xt.reshape(8, -1)),
        ("empty_strided", lambda: lib.empty_strided((4, 5), (1, 4), device=dev)),
    ]
    if hasattr(lib, "conv2d"):
        try:
            lib.conv2d(img, w, padding=1)
            cases.append(("conv2d", lambda: lib.conv2d(img, w, padding=1)))
        except Exception:  # noqa: BLE001 (conv2d not in this build's table yet)
            pass
    return cases


# Python case name -> Google Benchmark name in build/bin/client_bench (C++
# client::Call on meta tensors) and build/bin/meta_bench (the meta function
# alone, BindArgs + RunMeta).
_CPP_NAMES = {
    "add (broadcast)": "BM_AddBroadcast", "add (transposed)": "BM_AddTransposed", "mul scalar": "BM_MulScalar",
    "matmul 2-D": "BM_Matmul2D", "matmul batched": "BM_MatmulBatched", "view": "BM_View",
    "transpose": "BM_Transpose", "sum dim": "BM_SumDim", "sum all": "BM_SumAll", "softmax": "BM_Softmax",
    "cat": "BM_Cat", "reshape (copy)": "BM_ReshapeCopy", "empty_strided": "BM_EmptyStrided",
}


def _cpp_times(binary):
    """{benchmark name: us/op} from a Google Benchmark binary, or {} when it is
    not built (libbenchmark-dev missing) or fails."""
    if not os.path.exists(binary):
        return {}
    try:
        out = subprocess.run([binary, "--benchmark_format=json", "--benchmark_min_time=0.2"], capture_output=True,
                             text=True, timeout=300, check=True).stdout
        return {b["name"]: b["cpu_time"] / 1000.0 for b in json.loads(out)["benchmarks"] if b.get("time_unit") == "ns"}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return {}


def _time(fn, repeat):
    fn()  # warm up (and check it runs)
    best = None
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(repeat):
            fn()
        dt = (time.perf_counter_ns() - t0) / repeat / 1000.0
        best = dt if best is None or dt < best else best
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=2000, help="calls per round (default 2000)")
    p.add_argument("--only", default="", help="comma-separated op names to run (prefix match)")
    p.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build"),
                   help="build directory holding bin/client_bench and bin/meta_bench (their columns are left out "
                        "when absent)")
    p.add_argument("--no-cpp", action="store_true", help="leave out the C++ columns")
    p.add_argument("--json", help="also write figure 5's rows (one per op, then the geometric mean) to this file")
    args = p.parse_args(argv)
    ours = dict(_cases(tensord, "meta"))
    theirs = dict(_cases(torch, "meta"))
    names = [n for n in ours if n in theirs]
    if args.only:
        keys = [k.strip() for k in args.only.split(",")]
        names = [n for n in names if any(n.startswith(k) for k in keys)]
    client_cpp, meta_cpp = {}, {}
    if not args.no_cpp:
        client_cpp = _cpp_times(os.path.join(args.build, "bin", "client_bench"))
        meta_cpp = _cpp_times(os.path.join(args.build, "bin", "meta_bench"))
    print(f"meta cost per op from Python (best of 5 x {args.repeat} calls); torch {torch.__version__}")
    if client_cpp or meta_cpp:
        print("C++ columns (same ops, Google Benchmark CPU time): 'C++ call' = client::Call on meta tensors, "
              "'meta fn' = binding + meta function alone; '-' = not measured")
    extra = f" {'C++ call':>9} {'meta fn':>9}" if (client_cpp or meta_cpp) else ""
    print(f"{'op':<20} {'tensord us/op':>14} {'torch us/op':>12} {'ratio':>7}{extra}")

    def cell(table, n):
        v = table.get(_CPP_NAMES.get(n, ""))
        return f"{v:>9.2f}" if v is not None else f"{'-':>9}"

    ratios, rows = [], []
    peer_name = f"PyTorch {torch.__version__} meta device"
    for n in names:
        t_ours = _time(ours[n], args.repeat)
        t_torch = _time(theirs[n], args.repeat)
        ratios.append(t_ours / t_torch)
        rows.append(dict(figure=5, name=f"meta: {n}", unit="us/op", ours=t_ours, peer=t_torch, peer_name=peer_name,
                         ratio=t_ours / t_torch, target="<= 0.5"))
        cpp = f" {cell(client_cpp, n)} {cell(meta_cpp, n)}" if extra else ""
        print(f"{n:<20} {t_ours:>14.2f} {t_torch:>12.2f} {t_ours / t_torch:>7.2f}{cpp}")
    if ratios:
        geo = 1.0
        for r in ratios:
            geo *= r
        geo **= 1.0 / len(ratios)
        print(f"{'geometric mean':<20} {'':>14} {'':>12} {geo:>7.2f}   (ratio = tensord / torch; target <= 0.5)")

        def gmean(xs):
            return math.exp(sum(math.log(x) for x in xs) / len(xs))

        rows.append(dict(figure=5, name=f"meta: geometric mean over {len(ratios)} ops", unit="us/op",
                         ours=gmean([r["ours"] for r in rows]), peer=gmean([r["peer"] for r in rows]),
                         peer_name=peer_name, ratio=geo, target="<= 0.5"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
