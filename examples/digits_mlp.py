#!/usr/bin/python3
"""A 64 -> 128 -> 10 MLP trained on scikit-learn's digits through the daemon.

The same 80/20 split as examples/digits_knn.py (fixed seed); pixels are
scaled to [0, 1]. The model (nn.Linear, nn.ReLU, nn.Linear), the forward
pass, cross_entropy, the backward pass and the Adam updates all run in the
tensord daemon; the client streams the ops and reads back one loss value per
step for the progress bar, then the test accuracy. Where PyTorch is
installed, the same network, starting from the same initial weights and fed
the same mini-batches, is trained locally with PyTorch and the results are
printed side by side.

The digits come from scikit-learn's load_digits, or, with --data FILE.npz,
from a NumPy archive of the same arrays (X, y; see examples/digits_knn.py).

    /usr/bin/python3 examples/digits_mlp.py                 # spawns a private daemon
    /usr/bin/python3 examples/digits_mlp.py --epochs 5 --no-torch
    /usr/bin/python3 examples/digits_mlp.py --device cuda --no-torch --data digits.npz
    TENSORD_ADDRESS=unix:/run/tensord.sock /usr/bin/python3 examples/digits_mlp.py
"""
import argparse
import sys
import time

import _path  # noqa: F401  (in-tree fallback)

import numpy as np

import tensord
import tensord.nn as nn
import tensord.nn.functional as F
from digits_knn import split


class _Bar:
    """A minimal progress bar on stderr, used when tqdm is not installed."""

    def __init__(self, total, desc):
        self.total, self.desc, self.n, self.postfix = total, desc, 0, ""

    def set_postfix_str(self, s):
        self.postfix = s

    def update(self, k=1):
        self.n += k
        filled = int(30 * self.n / max(self.total, 1))
        sys.stderr.write(f"\r{self.desc}: [{'#' * filled}{'.' * (30 - filled)}] {self.n}/{self.total} {self.postfix}")
        sys.stderr.flush()

    def close(self):
        sys.stderr.write("\n")


def progress(total, desc):
    """A tqdm bar when tqdm is importable (Debian's python3-tqdm), else a small built-in one."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _Bar(total, desc)
    return tqdm(total=total, desc=desc, leave=True, dynamic_ncols=True)


def make_model():
    """The 64 -> 128 -> 10 MLP."""
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def batches(n, batch_size, epochs, seed):
    """The mini-batch index arrays of every epoch (one fixed shuffle per epoch), shared by both trainings."""
    rng = np.random.RandomState(seed)
    return [[p[i:i + batch_size] for i in range(0, n, batch_size)] for p in (rng.permutation(n) for _ in range(epochs))]


def train_tensord(data, plan, args):
    """Trains in the daemon; returns (initial state as NumPy, final loss, accuracy, seconds)."""
    x_train, y_train, x_test, y_test = data
    start = time.perf_counter()
    tensord.manual_seed(args.seed)
    model = make_model().to(args.device)
    initial = {k: v.cpu().numpy().copy() for k, v in model.state_dict().items()}
    opt = tensord.optim.Adam(model.parameters(), lr=args.lr)
    xt = tensord.from_numpy(x_train).to(args.device)                       # uploaded once
    yt = tensord.from_numpy(y_train).to(args.device)
    loss_value = float("nan")
    for epoch, epoch_batches in enumerate(plan):
        model.train()
        order = tensord.from_numpy(np.concatenate(epoch_batches)).to(args.device)   # one upload per epoch
        bar = progress(len(epoch_batches), f"tensord epoch {epoch + 1}/{len(plan)}")
        pos = 0
        for idx in epoch_batches:
            sel = order[pos:pos + len(idx)]
            pos += len(idx)
            loss = F.cross_entropy(model(xt[sel]), yt[sel])
            opt.zero_grad(set_to_none=True)                                # the same work on both sides
            loss.backward()
            opt.step()
            loss_value = loss.item()                                       # the step's one round trip
            bar.set_postfix_str(f"loss={loss_value:.4f}")
            bar.update(1)
        bar.close()
    model.eval()
    with tensord.no_grad():
        pred = model(tensord.from_numpy(x_test).to(args.device)).argmax(1)
        accuracy = (pred == tensord.from_numpy(y_test).to(args.device)).float().mean().item()
    return initial, loss_value, accuracy, time.perf_counter() - start


def train_torch(data, plan, initial, args):
    """The same training with PyTorch, locally: same initial weights, same batches."""
    import torch

    x_train, y_train, x_test, y_test = data
    start = time.perf_counter()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in initial.items()})
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    loss_value = float("nan")
    for epoch, epoch_batches in enumerate(plan):
        bar = progress(len(epoch_batches), f"PyTorch epoch {epoch + 1}/{len(plan)}")
        for idx in epoch_batches:
            sel = torch.from_numpy(idx)
            loss = torch.nn.functional.cross_entropy(model(xt[sel]), yt[sel])
            opt.zero_grad(set_to_none=True)                                # the same work on both sides
            loss.backward()
            opt.step()
            loss_value = loss.item()
            bar.set_postfix_str(f"loss={loss_value:.4f}")
            bar.update(1)
        bar.close()
    with torch.no_grad():
        accuracy = (model(torch.from_numpy(x_test)).argmax(1) == torch.from_numpy(y_test)).float().mean().item()
    return loss_value, accuracy, time.perf_counter() - start, torch.__version__


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=10, help="passes over the training set (default 10)")
    ap.add_argument("--batch-size", type=int, default=32, help="mini-batch size (default 32)")
    ap.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate (default 3e-3)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights and of the batch order")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    ap.add_argument("--device", default="cpu",
                    help="where the daemon trains: cpu (default), cuda, cuda:N (PyTorch's comparison stays on the cpu)")
    ap.add_argument("--min-accuracy", type=float, default=0.95, help="exit with an error below this test accuracy")
    ap.add_argument("--data", metavar="FILE.npz",
                    help="read the digits from this NumPy archive (arrays X [1797, 64] and y [1797], as "
                         "load_digits gives them) instead of scikit-learn")
    args = ap.parse_args(argv)

    x_train, y_train, x_test, y_test = split(data=args.data)
    data = (x_train / 16.0, y_train, x_test / 16.0, y_test)               # pixels 0..16 -> [0, 1]
    plan = batches(len(x_train), args.batch_size, args.epochs, args.seed)

    session = tensord.connect()          # $TENSORD_ADDRESS, else an embedded daemon
    initial, loss, accuracy, seconds = train_tensord(data, plan, args)
    counters = tensord.stats()
    print(f"digits: {len(x_train)} train, {len(x_test)} test images; MLP 64 -> 128 -> 10, Adam(lr={args.lr}), "
          f"batch {args.batch_size}, {args.epochs} epochs, on the daemon's {args.device}")
    print(f"test accuracy: {accuracy:.4f}")
    print(f"wall time: {seconds:.2f} s")
    print(f"client counters: {counters['ops_issued']} ops issued, {counters['messages_sent']} messages sent, "
          f"{counters['round_trips']} round trips that waited")

    torch_result = None
    if not args.no_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("PyTorch is not installed: no local comparison")
        else:
            torch_result = train_torch(data, plan, initial, args)
    if torch_result is not None:
        t_loss, t_acc, t_sec, t_ver = torch_result
        print()
        print(f"{'':16}{'tensord (daemon)':>18}{'PyTorch ' + t_ver + ' (local)':>26}")
        print(f"{'last batch loss':16}{loss:>18.4f}{t_loss:>26.4f}")
        print(f"{'test accuracy':16}{accuracy:>18.4f}{t_acc:>26.4f}")
        print(f"{'wall time':16}{seconds:>16.2f} s{t_sec:>24.2f} s")
    session.close()
    if accuracy < args.min_accuracy:
        print(f"test accuracy {accuracy:.4f} is below {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
