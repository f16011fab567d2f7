"""Finite-difference checks of the daemon's gradients: ``gradcheck`` and
``gradgradcheck`` (PyTorch's names and defaults).

``gradcheck(fn, inputs)`` compares, for every input that requires grad and
every differentiable (floating) output, the Jacobian from central finite
differences ``(f(x + eps) - f(x - eps)) / (2 eps)`` with the one the engine
gives (one ``autograd.grad`` call per output element). Use float64 inputs:
with float32 the finite differences are too coarse for the tolerances.
"""
import numpy as np

from .. import _C

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]

Tensor = _C.Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck/gradgradcheck (with raise_exception=True) when the
    analytical and numerical Jacobians differ, or a gradient has the wrong shape."""


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _diff_outputs(outputs):
    return [o for o in _as_tuple(outputs) if isinstance(o, Tensor) and o.dtype.is_floating_point]


def _host(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _upload_like(arr, like):
    import tensord
    t = tensord.from_numpy(np.array(arr, dtype=np.dtype(like.dtype._name), order="C"))  # keeps 0-dim shapes
    t = t.to(like.device)  # the function is checked on its inputs' device
    if like.requires_grad:
        t.requires_grad_(True)
    return t


def _numerical(func, inputs, diff_idx, eps):
    """J[k][n]: d output k / d input diff_idx[n], a [out_numel, in_numel] array."""
    jac = None
    for n, i in enumerate(diff_idx):
        x = inputs[i]
        base = _host(x)
        cols = []
        for j in range(base.size):
            vals = []
            for sign in (1.0, -1.0):
                a = base.copy()
                a.flat[j] += sign * eps
                new = list(inputs)
                new[i] = _upload_like(a, x)
                vals.append([_host(o).ravel() for o in _diff_outputs(func(*new))])
            cols.append([(p - m) / (2 * eps) for p, m in zip(vals[0], vals[1])])
        if jac is None:
            n_out = len(cols[0]) if cols else len(_diff_outputs(func(*inputs)))
            jac = [[None] * len(diff_idx) for _ in range(n_out)]
        for k in range(len(jac)):
            if cols:
                jac[k][n] = np.stack([c[k] for c in cols], axis=1)
            else:
                jac[k][n] = np.zeros((0, 0))
    return jac


def _analytical(func, inputs, diff_idx):
    from . import grad as autograd_grad
    import tensord
    outputs = _diff_outputs(func(*inputs))
    xs = [inputs[i] for i in diff_idx]
    jac = []
    for k, o in enumerate(outputs):
        rows = [np.zeros((o.numel(), x.numel())) for x in xs]
        if o.requires_grad:
            for r in range(o.numel()):
                g = np.zeros(tuple(o.shape), dtype=np.dtype(o.dtype._name))
                g.flat[r] = 1
                grads = autograd_grad(o, xs, tensord.from_numpy(g).to(o.device), retain_graph=True,
                                      allow_unused=True)
                for n, (x, gx) in enumerate(zip(xs, grads)):
                    if gx is None:
                        continue
                    if tuple(gx.shape) != tuple(x.shape):
                        raise GradcheckError(f"Gradient of output {k} with respect to input {diff_idx[n]} has shape "
                                             f"{list(gx.shape)}, expected {list(x.shape)}")
                    if gx.dtype != x.dtype:
                        raise GradcheckError(f"Gradient of output {k} with respect to input {diff_idx[n]} has dtype "
                                             f"{gx.dtype}, expected {x.dtype}")
                    rows[n][r] = _host(gx).ravel()
        jac.append(rows)
    return jac


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks the gradients of ``func`` at ``inputs`` against finite differences.

    Args:
        func: a callable taking the inputs and returning a Tensor or a tuple of
            Tensors (integer/bool outputs are ignored).
        inputs: a Tensor or a tuple of arguments; Tensors with requires_grad=True
            are checked (use float64).
        eps: the finite-difference step.
        atol, rtol: an element passes when |analytical - numerical| <=
            atol + rtol * |numerical|.
        raise_exception: raise GradcheckError on a mismatch (else return False).

    Returns True when every Jacobian matches. Raises ValueError when no input
    requires grad; errors of the backward itself (a missing formula, ...) and
    deferred errors of func's ops (synchronized before comparing) are raised
    as they are.
    """
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    numerical = _numerical(func, inputs, diff_idx, eps)
    analytical = _analytical(func, inputs, diff_idx)
    # An op of func that failed in the daemon (reported at the next sync point)
    # would make both Jacobians describe something else: raise its error.
    import tensord
    tensord.synchronize()
    for k, (num_rows, ana_rows) in enumerate(zip(numerical, analytical)):
        for n, (num, ana) in enumerate(zip(num_rows, ana_rows)):
            num = num.reshape(ana.shape) if num.size == ana.size else num
            if num.shape != ana.shape or not np.allclose(ana, num, rtol=rtol, atol=atol):
                msg = (f"Jacobian mismatch for output {k} with respect to input {diff_idx[n]},\n"
                       f"numerical:{num}\nanalytical:{ana}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks second derivatives: gradcheck of ``(inputs, grad_outputs) ->
    autograd.grad(func(inputs), inputs, grad_outputs, create_graph=True)``.

    ``grad_outputs`` (one per differentiable output) defaults to random float
    tensors that require grad (a fixed seed, so runs repeat). Other arguments
    and the result as ``gradcheck``.
    """
    from . import grad as autograd_grad
    import tensord
    inputs = _as_tuple(inputs)
    outputs = _diff_outputs(func(*inputs))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            tensord.from_numpy(np.asarray(rng.standard_normal(tuple(o.shape)), dtype=np.dtype(o.dtype._name)))
            .to(o.device).requires_grad_(True) for o in outputs)
    grad_outputs = _as_tuple(grad_outputs)
    n_go = len(grad_outputs)

    def first_derivatives(*args):
        inps, gos = args[:len(args) - n_go], args[len(args) - n_go:]
        outs = _diff_outputs(func(*inps))
        xs = [x for x in inps if isinstance(x, Tensor) and x.requires_grad]
        grads = autograd_grad(outs, xs, list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivatives, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
