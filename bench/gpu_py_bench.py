#!/usr/bin/python3
"""The device figures seen from Python: tensord on a daemon's device beside
local PyTorch on the same device, in the same run. Not a test: nothing here
passes or fails on speed.

    /usr/bin/python3 bench/gpu_py_bench.py [--device cuda] [--torch-python PYTHON] [--json FILE] [--quick]

Figures (numbering as in bench/RESULTS.md):
  11  pipelined small ops: 10,000 ``c = a + b`` on 64-element float32 tensors
      on the device, then one ``item()``; microseconds per op, beside the same
      loop in PyTorch on the same device. Target <= 1.5.
  12  one training step (zero_grad, forward, loss, backward, optimizer step,
      ``loss.item()``) of the digits MLP (64 -> 128 -> 10, batch 32, Adam) and
      of a transformer block (batch 8, 128 tokens, width 256, 4 heads, causal
      attention, AdamW), in milliseconds, beside PyTorch. Target <= 1.5.

The workloads are bench/workloads.py, the same code for both. PyTorch runs
in bench/torch_peer.py under --torch-python (default $TORCH_PYTHON, else this
interpreter): on the GPU machines PyTorch lives in another Python than the
one tensord's client is built for. The two sides run in turn, 7 pairs (3
with --quick), and rows carry the least and greatest ratio of one pair. The
daemon is spawned as in bench/py_bench.py (Unix socket, same host).

--device cpu runs the same figures on the daemon's CPU beside PyTorch on the
CPU (a check of this script on any machine; bench/py_bench.py has the CPU
figures proper). When the daemon does not serve the device, or PyTorch
cannot use it, it prints "gpu_py_bench: SKIP: ..." with the reason, writes
no rows (an empty list with --json) and exits 0.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
# The client from PYTHONPATH (an installed or packed one) first, else the tree's.
sys.path.append(os.path.join(os.path.dirname(BENCH), "python-client"))

import tensord  # noqa: E402

import workloads  # noqa: E402
from py_bench import Daemon, CpuShare, pair_ratios, row  # noqa: E402


class TorchPeer:
    """bench/torch_peer.py in `python`; `info` is its first line (torch,
    cuda, cuda_device, sdpa). RuntimeError when it cannot start or a request
    fails."""

    def __init__(self, python):
        self.proc = subprocess.Popen([python, os.path.join(BENCH, "torch_peer.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{python} bench/torch_peer.py did not start (is PyTorch importable there?)")
        self.info = json.loads(line)

    def run(self, work, device, arg):
        self.proc.stdin.write(json.dumps(dict(work=work, device=device, arg=arg)) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline() or '{"error": "the peer exited"}')
        if "error" in reply:
            raise RuntimeError(f"torch peer, {work} on {device}: {reply['error']}")
        return reply["seconds"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def measure(daemon, session, peer, device, work, arg, pairs, scale):
    """`pairs` alternating measurements of `work`: ours (tensord in `session`)
    and the peer's, each times `scale`; returns (ours, peer, cpu shares)."""
    cpu = CpuShare(daemon)
    ours, theirs = [], []
    for _ in range(pairs):
        theirs.append(peer.run(work, device, arg) * scale)
        with session, cpu:
            ours.append(workloads.WORKLOADS[work](tensord, device, arg) * scale)
    return ours, theirs, cpu.shares()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", help="the device of both sides (default cuda)")
    ap.add_argument("--torch-python", default=os.environ.get("TORCH_PYTHON") or sys.executable,
                    help="the Python that has PyTorch (default $TORCH_PYTHON, else this one)")
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument("--quick", action="store_true", help="fewer pairs and steps (a smoke run, not figures)")
    args = ap.parse_args(argv)
    rows = []
    skip = None
    d = Daemon()
    try:
        s = tensord.connect(d.unix, set_default=False)
        dev = tensord.device(args.device)
        peer = TorchPeer(args.torch_python)
        with s:
            on_daemon = dev.type == "cpu" or (dev.type == "cuda" and tensord.cuda.is_available())
        if not on_daemon:
            skip = f"the daemon does not serve {args.device}: {s.cuda_unavailable_reason}"
        elif dev.type == "cuda" and not peer.info["cuda"]:
            skip = f"PyTorch {peer.info['torch']} in {args.torch_python} cannot use CUDA"
        else:
            card = peer.info["cuda_device"] if dev.type == "cuda" else "cpu"
            peer_name = f"PyTorch {peer.info['torch']} local ({card})"
            pairs = 3 if args.quick else 7
            ours, theirs, shares = measure(d, s, peer, args.device, "small_ops", 2_000 if args.quick else 10_000,
                                           pairs, 1e6)
            rows.append(row(11, f"pipelined c = a + b, 64 floats on {args.device} ({card})", "us/op",
                            statistics.median(ours), statistics.median(theirs), peer_name, "<= 1.5",
                            **pair_ratios(ours, theirs), **shares))
            steps = 5 if args.quick else 50
            for work, label in (("mlp_steps", "digits MLP training step"),
                                ("block_steps", "transformer block training step")):
                ours, theirs, shares = measure(d, s, peer, args.device, work, steps, pairs, 1e3)
                extra = dict(peer_sdpa=float(peer.info["sdpa"])) if work == "block_steps" else {}
                rows.append(row(12, f"{label} on {args.device} ({card})", "ms/step", statistics.median(ours),
                                statistics.median(theirs), peer_name, "<= 1.5", **pair_ratios(ours, theirs),
                                **shares, **extra))
        peer.close()
        s.close()
    finally:
        d.stop()
    if skip:
        print(f"gpu_py_bench: SKIP: {skip}", flush=True)
    for r in rows:
        print(f"{r['figure']}  {r['name']:64} {r['ours']:10.3f} {r['peer']:10.3f} {r['unit']:8} "
              f"ratio {r['ratio']:.2f} (target {r['target']})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
