#!/usr/bin/python3
"""k-nearest neighbours (k = 3) on scikit-learn's digits, computed in the daemon.

The 1,797 real 8x8 handwritten digits (Debian's python3-sklearn) are split
80/20 with a fixed seed and uploaded as float32. Everything after the upload
runs in the tensord daemon: pairwise squared distances through matmul and
broadcasting, topk, a gather of the neighbours' labels, a majority vote, a
comparison and a mean. Only the final accuracy is read back (plus the
predictions, to check them against NumPy).

The digits come from scikit-learn's load_digits, or, with --data FILE.npz,
from a NumPy archive holding the same arrays under the names X (1797 x 64
pixels 0..16, float) and y (1797 labels, int): how machines without
scikit-learn run it (scripts/gpu-pack.sh writes one as digits.npz).

    /usr/bin/python3 examples/digits_knn.py        # spawns a private daemon
    /usr/bin/python3 examples/digits_knn.py --device cuda   # on the daemon's GPU
    /usr/bin/python3 examples/digits_knn.py --data digits.npz   # no scikit-learn needed
    TENSORD_ADDRESS=unix:/run/tensord.sock /usr/bin/python3 examples/digits_knn.py
"""
import argparse
import time

import _path  # noqa: F401  (in-tree fallback)

import numpy as np

import tensord

K = 3
NUM_CLASSES = 10


def load(data=None):
    """The digits as (images [1797, 64], labels [1797]): scikit-learn's
    load_digits() when `data` is None, else the arrays X and y of the .npz
    file `data` (what load_digits gives, saved with np.savez). Raises
    ValueError when the file's arrays are not 64-pixel images with one
    label each."""
    if data is None:
        from sklearn.datasets import load_digits  # only here: --data runs without scikit-learn

        digits = load_digits()
        return digits.data, digits.target
    with np.load(data) as f:
        x, y = f["X"], f["y"]
    if x.ndim != 2 or x.shape[1] != 64 or y.shape != (x.shape[0],):
        raise ValueError(f"{data}: X must be [n, 64] and y [n], got X {x.shape} and y {y.shape}")
    return x, y


def split(seed=0, train_fraction=0.8, data=None):
    """The digits (see load) as float32 images [n, 64] and int64 labels, split by a fixed permutation."""
    x, y = load(data)
    x = x.astype(np.float32)
    y = y.astype(np.int64)
    perm = np.random.RandomState(seed).permutation(len(x))
    n_train = int(train_fraction * len(x))
    tr, te = perm[:n_train], perm[n_train:]
    return x[tr], y[tr], x[te], y[te]


def knn_tensord(train, train_labels, test):
    """Predicted labels [n_test] (a tensord int64 tensor) and the neighbour indices."""
    # ||a - b||^2 = ||a||^2 - 2 a.b + ||b||^2, broadcast to [n_test, n_train].
    d2 = (test ** 2).sum(1, keepdim=True) - 2 * test @ train.T + (train ** 2).sum(1)
    _, idx = d2.topk(K, largest=False)                              # [n_test, K]
    neighbour_labels = train_labels[idx]                            # gather by index: [n_test, K]
    one_hot = neighbour_labels.unsqueeze(-1) == tensord.arange(NUM_CLASSES, device=test.device)   # [n_test, K, 10]
    votes = one_hot.sum(1)                                          # [n_test, 10]
    return votes.argmax(1), idx, d2


def knn_numpy(train, train_labels, test):
    """The same computation in NumPy (float64, stable sort)."""
    d2 = (test.astype(np.float64) ** 2).sum(1, keepdims=True) - 2 * test.astype(np.float64) @ train.T.astype(
        np.float64) + (train.astype(np.float64) ** 2).sum(1)
    idx = np.argsort(d2, axis=1, kind="stable")[:, :K]
    votes = (train_labels[idx][:, :, None] == np.arange(NUM_CLASSES)).sum(1)
    return votes.argmax(1), d2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="where the daemon computes: cpu (default), cuda, cuda:N")
    ap.add_argument("--data", metavar="FILE.npz",
                    help="read the digits from this NumPy archive (arrays X [1797, 64] and y [1797], as "
                         "load_digits gives them) instead of scikit-learn")
    args = ap.parse_args()
    x_train, y_train, x_test, y_test = split(data=args.data)
    start = time.perf_counter()
    session = tensord.connect()          # $TENSORD_ADDRESS, else an embedded daemon
    connected = time.perf_counter()

    train = tensord.from_numpy(x_train).to(args.device)
    test = tensord.from_numpy(x_test).to(args.device)
    train_labels = tensord.from_numpy(y_train).to(args.device)
    test_labels = tensord.from_numpy(y_test).to(args.device)
    pred, idx, d2 = knn_tensord(train, train_labels, test)
    accuracy = (pred == test_labels).float().mean().item()   # the one sync point of the computation
    done = time.perf_counter()
    counters = tensord.stats()

    print(f"digits: {len(x_train)} train, {len(x_test)} test images of 8x8 pixels; k = {K}; on the daemon's "
          f"{args.device}")
    print(f"accuracy: {accuracy:.4f}")
    print(f"wall time: {done - start:.3f} s ({connected - start:.3f} s to connect, "
          f"{done - connected:.3f} s to upload and classify)")
    print(f"client counters: {counters['ops_issued']} ops issued, {counters['uploads']} uploads, "
          f"{counters['messages_sent']} messages sent, {counters['round_trips']} round trips that waited")

    # Check against NumPy. Distances of integer pixels are exact in float32,
    # so the k smallest distances must be identical; predictions must agree
    # (a tie between the k-th and (k+1)-th distance could legitimately pick a
    # different neighbour: such rows are reported, not hidden).
    np_pred, np_d2 = knn_numpy(x_train, y_train, x_test)
    our_pred = pred.cpu().numpy()
    our_idx = idx.cpu().numpy()
    sorted_d2 = np.sort(np_d2, axis=1)
    assert np.array_equal(np.sort(np.take_along_axis(np_d2, our_idx, 1), axis=1), sorted_d2[:, :K]), \
        "the daemon's neighbours are not the k nearest"
    boundary_ties = sorted_d2[:, K - 1] == sorted_d2[:, K]
    mismatch = our_pred != np_pred
    assert not np.any(mismatch & ~boundary_ties), \
        f"predictions differ from NumPy on {int(np.sum(mismatch & ~boundary_ties))} rows without ties"
    print(f"NumPy agrees: same predictions on {int(np.sum(~mismatch))} of {len(np_pred)} test images"
          + (f" ({int(np.sum(mismatch))} differ only by tie-breaking among equidistant neighbours)"
             if np.any(mismatch) else ""))
    np_accuracy = float(np.mean(np_pred == y_test))
    assert abs(np_accuracy - accuracy) <= np.sum(mismatch) / len(y_test) + 1e-6, (np_accuracy, accuracy)
    assert accuracy >= 0.95, f"accuracy {accuracy:.4f} is below 0.95"
    session.close()


if __name__ == "__main__":
    main()
