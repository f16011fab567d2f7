"""Double backward (gradgradcheck) of the reduction and scan formulas
(server/runtime/src/autograd/formulas_reduction.cc). First derivatives of every
sample are checked by test_gradcheck_ops.py; these check that each formula,
written as table ops, is itself differentiable."""
import numpy as np
import pytest

import tensord
from tensord.autograd import gradcheck, gradgradcheck


def _t(*shape, seed=0, positive=False, zeros=()):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
    for z in zeros:
        a[z] = 0.0
    return tensord.from_numpy(a).requires_grad_()


GRADGRAD = [
    ("prod", lambda x: x.prod(), lambda: (_t(2, 3, seed=1),)),
    ("prod_dim", lambda x: x.prod(1, keepdim=True), lambda: (_t(3, 4, seed=2),)),
    ("var_correction", lambda x: x.var(1, correction=0), lambda: (_t(3, 4, seed=3),)),
    ("var_batchnorm", lambda x: x.var([0, 2, 3], keepdim=True), lambda: (_t(2, 3, 2, 2, seed=4),)),
    ("std", lambda x: x.std(0), lambda: (_t(4, 3, seed=5),)),
    ("norm2", lambda x: x.norm(dim=1), lambda: (_t(3, 4, seed=6),)),
    ("norm3", lambda x: tensord.norm(x, 3), lambda: (_t(5, seed=7),)),
    ("vector_norm_inf", lambda x: tensord.linalg_vector_norm(x, float("inf"), 1), lambda: (_t(3, 4, seed=8),)),
    ("logsumexp", lambda x: x.logsumexp(1), lambda: (_t(3, 4, seed=9),)),
    ("cumsum", lambda x: x.cumsum(1), lambda: (_t(3, 4, seed=10),)),
    ("cumprod", lambda x: x.cumprod(0), lambda: (_t(3, 2, seed=11, positive=True),)),
    ("nansum", lambda x: (x * x).nansum(0), lambda: (_t(3, 4, seed=12),)),
]


@pytest.mark.parametrize("name,fn,make", GRADGRAD, ids=[g[0] for g in GRADGRAD])
def test_gradgradcheck(session, name, fn, make):
    assert gradgradcheck(fn, make())


def test_prod_gradient_with_zeros(session):
    """One zero in a slice: the product of the others at the zero, 0 elsewhere;
    two zeros: 0 everywhere (the where-based formula, not out / x)."""
    x = tensord.from_numpy(np.array([[2.0, 0.0, 3.0], [0.0, 5.0, 0.0], [1.0, 2.0, 4.0]])).requires_grad_()
    x.prod(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 6, 0], [0, 0, 0], [8, 4, 2]])
    assert gradcheck(lambda t: t.prod(), (_t(2, 2, seed=13, zeros=[(0, 1)]),))


def test_cumprod_gradient_with_zeros(session):
    """Zeros in the scanned slice: the first zero gets the product of the other
    factors, later zeros get 0; matches torch and gradcheck."""
    import torch
    a = np.array([[2.0, 0.0, 3.0, 0.0, 5.0], [1.5, 2.0, -1.0, 0.5, 3.0], [0.0, 0.0, 2.0, 1.0, 4.0]])
    w = np.random.default_rng(15).standard_normal(a.shape)
    x = tensord.from_numpy(a).requires_grad_()
    (x.cumprod(1) * tensord.from_numpy(w)).sum().backward()
    t = torch.from_numpy(a.copy()).requires_grad_()
    (t.cumprod(1) * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda v: v.cumprod(0), (_t(4, 2, seed=16, zeros=[(1, 0), (2, 0), (0, 1)]),))
    assert gradgradcheck(lambda v: v.cumprod(1), (_t(2, 4, seed=17, zeros=[(0, 1)]),))


def test_batch_norm_statistics_of_a_transposed_input(session):
    """mean/var over (0, 2, 3) of a non-contiguous (N, C, H, W) view, as
    batch norm computes them: values, contiguous keepdim outputs, gradients."""
    a = np.random.default_rng(14).standard_normal((2, 4, 3, 5))
    x = tensord.from_numpy(np.ascontiguousarray(a.transpose(0, 3, 2, 1))).permute(0, 3, 2, 1).requires_grad_()
    mean = x.mean([0, 2, 3], keepdim=True)
    var = x.var([0, 2, 3], correction=0, keepdim=True)
    assert mean.shape == (1, 4, 1, 1) and mean.stride() == (4, 1, 1, 1)
    assert var.shape == (1, 4, 1, 1) and var.stride() == (4, 1, 1, 1)
    np.testing.assert_allclose(var.detach().numpy(), a.var(axis=(0, 2, 3), keepdims=True), rtol=1e-10)
    ((x - mean) / (var + 1e-5).sqrt()).sum().backward()
    assert x.grad.shape == x.shape
    np.testing.assert_allclose(x.grad.numpy(), np.zeros(a.shape), atol=1e-8)  # normalisation is shift/scale free
