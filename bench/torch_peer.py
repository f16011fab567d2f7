"""The PyTorch side of bench/gpu_py_bench.py: runs bench/workloads.py with
``torch`` on request, in its own interpreter (on a GPU machine the Python
that has PyTorch with CUDA is often not the one tensord's client is built
for). Never imports tensord.

    PYTHON bench/torch_peer.py

Protocol, one JSON object per line: it first prints {"torch": VERSION,
"cuda": BOOL, "cuda_device": NAME or null, "sdpa": BOOL}; then for each
request {"work": NAME, "device": DEVICE, "arg": N} read from stdin it prints
{"seconds": S} (seconds per unit, from workloads.WORKLOADS[NAME]) or
{"error": TEXT}. It ends at end of input.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import workloads  # noqa: E402


def main():
    torch.set_num_threads(1)   # as figure 1's peer: one core, like one client
    cuda = torch.cuda.is_available()
    print(json.dumps(dict(torch=torch.__version__, cuda=cuda,
                          cuda_device=torch.cuda.get_device_name(0) if cuda else None,
                          sdpa=hasattr(torch.nn.functional, "scaled_dot_product_attention"))), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            s = workloads.WORKLOADS[req["work"]](torch, req["device"], req["arg"])
            print(json.dumps(dict(seconds=s)), flush=True)
        except Exception as e:  # noqa: BLE001 - any failure goes back to the driver, which reports it
            print(json.dumps(dict(error=f"{type(e).__name__}: {e}")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
