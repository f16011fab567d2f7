"""A custom kernel from source to a training loop: mylib::fused_bias_gelu
(fused_bias_gelu.cc, and fused_bias_gelu.cu for CUDA) built into an artifact
with tensord.cpp_extension, loaded with tensord.library.load, checked on meta
tensors with no daemon, compared with tensord's own gelu(x + bias), its
derivative (declared in the artifact, calling the library's backward kernel)
checked by gradcheck, and used as the hidden layer of a digits classifier
trained in the daemon.

    /usr/bin/python3 examples/custom_kernel/train.py [--epochs 8] [--device cuda] [--with-cuda] [--data FILE.npz]
    /usr/bin/python3 examples/custom_kernel/train.py --artifact mylib.tdk ...   # built elsewhere: no compiler here

docs/shipping-a-kernel.md walks through the pieces. Exits non-zero below
--min-accuracy (0.95).
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # examples/: _path, digits_knn

import _path  # noqa: F401,E402  (in-tree fallback)

import numpy as np  # noqa: E402

import tensord  # noqa: E402
import tensord.nn as nn  # noqa: E402
import tensord.nn.functional as F  # noqa: E402
from digits_knn import split  # noqa: E402


def build_library(with_cuda, verbose=False):
    """Builds (or takes from the build cache) and loads the artifact; with
    `with_cuda`, the CUDA kernel is compiled into it too (needs nvcc)."""
    sources = [os.path.join(HERE, "fused_bias_gelu.cc")]
    kwargs = {}
    if with_cuda:
        sources.append(os.path.join(HERE, "fused_bias_gelu.cu"))
        kwargs = dict(extra_cflags=["-DMYLIB_WITH_CUDA"], cuda_archs=[80, 90])
    path = tensord.cpp_extension.build("mylib", sources, verbose=verbose, **kwargs)
    return tensord.library.load(path)


class Net(nn.Module):
    """64 -> 128 (fused bias + GELU) -> 10."""

    def __init__(self, lib):
        super().__init__()
        self.fc1 = nn.Linear(64, 128, bias=False)
        self.b1 = nn.Parameter(tensord.zeros(128))
        self.fc2 = nn.Linear(128, 10)
        self._lib = lib

    def forward(self, x):
        return self.fc2(self._lib.fused_bias_gelu(self.fc1(x), self.b1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="where the daemon trains: cpu (default) or cuda")
    ap.add_argument("--with-cuda", action="store_true",
                    help="compile the CUDA kernel into the artifact too (implied by --device cuda; needs nvcc)")
    ap.add_argument("--min-accuracy", type=float, default=0.95)
    ap.add_argument("--data", metavar="FILE.npz", help="the digits as a NumPy archive (X, y) instead of scikit-learn")
    ap.add_argument("--artifact", metavar="FILE.tdk",
                    help="load this artifact of the example's sources, built elsewhere (tensord build-kernel), "
                         "instead of building it here")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the compiler commands")
    args = ap.parse_args(argv)
    with_cuda = args.with_cuda or args.device.startswith("cuda")

    start = time.perf_counter()
    lib = tensord.library.load(args.artifact) if args.artifact else build_library(with_cuda, args.verbose)
    kernels = "as built" if args.artifact else "CPU and CUDA" if with_cuda else "CPU"
    print(f"artifact: {lib.path} (library {lib.name}, ops {', '.join(lib.ops)}, sha256 {lib.content_hash[:16]}...,"
          f" {kernels} kernels), ready in {time.perf_counter() - start:.1f} s")

    # Meta mode: the manifest's shape rule, with no daemon and no data.
    x = tensord.empty(32, 128, device="meta")
    print("meta:", tuple(lib.fused_bias_gelu(x, tensord.empty(128, device="meta")).shape))
    try:
        lib.fused_bias_gelu(x, tensord.empty(64, device="meta"))
    except RuntimeError as e:
        print("meta:", e)

    tensord.connect()  # $TENSORD_ADDRESS, else an embedded daemon (which runs any artifact its user loads)
    tensord.manual_seed(args.seed)
    dev = args.device
    xs = tensord.randn(256, 128, device=dev)
    bs = tensord.randn(128, device=dev)
    diff = (lib.fused_bias_gelu(xs, bs) - F.gelu(xs + bs)).abs().max().item()
    print(f"fused kernel vs gelu(x + bias) on {dev}: max |difference| {diff:.2e}")
    if diff > 1e-5:
        sys.exit(f"the fused kernel differs from gelu(x + bias) by {diff}")

    # The manifest's derivative against finite differences, in float64 (the
    # CPU kernel's; the CUDA one is float32 only).
    x64 = tensord.randn(4, 8, dtype=tensord.float64, requires_grad=True)
    b64 = tensord.randn(8, dtype=tensord.float64, requires_grad=True)
    ok = tensord.autograd.gradcheck(lib.fused_bias_gelu, (x64, b64))
    print(f"gradcheck of the declared derivative (cpu, float64): {'passed' if ok else 'FAILED'}")
    y = lib.fused_bias_gelu(xs.requires_grad_(), bs)
    print(f"grad_fn: {y.grad_fn.name()}")

    x_train, y_train, x_test, y_test = split(data=args.data)
    x_train, x_test = x_train / 16.0, x_test / 16.0
    model = Net(lib).to(dev)
    opt = tensord.optim.Adam(model.parameters(), lr=args.lr)
    xt, yt = tensord.tensor(x_train, device=dev), tensord.tensor(y_train, device=dev)
    rng = np.random.RandomState(args.seed)
    for epoch in range(args.epochs):
        perm = rng.permutation(len(x_train))
        for i in range(0, len(perm), args.batch_size):
            idx = tensord.tensor(perm[i:i + args.batch_size], device=dev)
            loss = F.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch + 1}/{args.epochs}: last batch loss {loss.item():.4f}")
    with tensord.no_grad():
        pred = model(tensord.tensor(x_test, device=dev)).argmax(1)
    accuracy = (pred == tensord.tensor(y_test, device=dev)).float().mean().item()
    print(f"test accuracy: {accuracy:.4f}")
    if accuracy < args.min_accuracy:
        sys.exit(f"test accuracy {accuracy:.4f} is below {args.min_accuracy}")


if __name__ == "__main__":
    main()
