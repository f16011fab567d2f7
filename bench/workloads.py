"""The workloads of the device figures (bench/gpu_py_bench.py), written once
against PyTorch's API and run twice: with ``tensord`` (through a daemon) and
with ``torch`` (locally, in bench/torch_peer.py, often another interpreter).
Each function takes the module ``T`` (``tensord`` or ``torch``) and a device
name, builds what it needs once per process (cached), and returns the
measured seconds per unit of work, synchronised at its end by an ``item()``
as a real program would be. Nothing here imports either library.

    small_ops(T, device, n)        seconds per ``c = a + b`` on 64-element
                                   float32 tensors: n adds, then one item()
    mlp_steps(T, device, steps)    seconds per training step of the digits MLP
                                   (64 -> 128 -> 10, batch 32, Adam, item() each step)
    block_steps(T, device, steps)  seconds per training step of a pre-norm
                                   transformer block (batch 8, 128 tokens, width
                                   256, 4 heads, causal attention, GELU MLP,
                                   AdamW, item() each step)
"""
import math
import time

_CACHE = {}


def _sync(T, device):
    """Waits for `device`'s queued work where the library has a call for it."""
    if device.startswith("cuda") and hasattr(T, "cuda"):
        T.cuda.synchronize()


def small_ops(T, device, n):
    key = ("small_ops", T.__name__, device)
    if key not in _CACHE:
        T.manual_seed(0)
        a, b = T.randn(64, device=device), T.randn(64, device=device)
        (a + b).sum().item()                  # warm: the device, the op path
        _CACHE[key] = (a, b)
    a, b = _CACHE[key]
    t0 = time.perf_counter()
    for _ in range(n):
        c = a + b
    c[0].item()
    return (time.perf_counter() - t0) / n


def _steps(T, device, key, make, steps):
    """Seconds per step of the (model, optimizer, batch, loss_fn) that
    `make` builds once: zero_grad, forward, loss, backward, step, item()."""
    if key not in _CACHE:
        T.manual_seed(0)
        _CACHE[key] = make()
        _run_steps(T, *_CACHE[key], 2)        # warm: allocator, kernels, cuBLAS handles
        _sync(T, device)
    t0 = time.perf_counter()
    _run_steps(T, *_CACHE[key], steps)
    return (time.perf_counter() - t0) / steps


def _run_steps(T, model, opt, x, y, loss_fn, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()


def mlp_steps(T, device, steps):
    nn = T.nn

    def make():
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
        opt = T.optim.Adam(model.parameters(), lr=3e-3)
        x = T.randn(32, 64, device=device)
        y = T.randint(0, 10, (32,), device=device)
        return model, opt, x, y, nn.functional.cross_entropy

    return _steps(T, device, ("mlp", T.__name__, device), make, steps)


def _attention(T, q, k, v):
    """Causal attention: F.scaled_dot_product_attention where the library has
    it (tensord; PyTorch 2), else its definition (PyTorch 1.x)."""
    F = T.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = T.ones(s, s, dtype=T.bool, device=q.device).tril()
    return T.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v


def block_steps(T, device, steps, batch=8, tokens=128, width=256, heads=4):
    nn = T.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (t.view(b, s, heads, d // heads).transpose(1, 2) for t in (q, k, v))
            y = _attention(T, q, k, v).transpose(1, 2).reshape(b, s, d)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    def make():
        model = Block().to(device)
        opt = T.optim.AdamW(model.parameters(), lr=1e-3)
        x = T.randn(batch, tokens, width, device=device)
        return model, opt, x, x, lambda out, target: (out - target).pow(2).mean()

    return _steps(T, device, ("block", T.__name__, device), make, steps)


WORKLOADS = {"small_ops": small_ops, "mlp_steps": mlp_steps, "block_steps": block_steps}
