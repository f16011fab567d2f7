"""Matmul-family behaviours worth a test of their own (the samples, layouts,
metadata against PyTorch and error inputs of these ops run in
test_opinfo.py): dtype rules of baddbmm, the float16/float32 bmm error,
beta=0 and alpha=0 with NaN/inf, and nn.functional.linear using the op.
"""
import numpy as np
import pytest

import tensord


def test_baddbmm_integer_self_with_float_batches_gives_float32(session):
    # A known disagreement in other systems: PyTorch 1.13 gives the batches' dtype.
    self_ = tensord.ones(2, 3, 5, dtype=tensord.int64)
    out = tensord.baddbmm(self_, tensord.ones(2, 3, 4), tensord.ones(2, 4, 5), beta=2)
    assert out.dtype == tensord.float32
    np.testing.assert_allclose(out.numpy(), np.full((2, 3, 5), 6.0))
    with tensord.device("meta"):
        m = tensord.baddbmm(tensord.ones(2, 3, 5, dtype=tensord.int64), tensord.ones(2, 3, 4), tensord.ones(2, 4, 5))
    assert m.dtype == tensord.float32 and list(m.shape) == [2, 3, 5]


def test_bmm_float16_with_float32_is_an_error_on_real_and_meta(session):
    for device in (None, "meta"):
        a = tensord.ones(2, 3, 4, dtype=tensord.float16, device=device)
        b = tensord.ones(2, 4, 5, device=device)
        with pytest.raises(RuntimeError, match="float16.*float32"):
            tensord.bmm(a, b)


def test_beta_zero_ignores_nan_and_alpha_zero_keeps_inf_nan(session):
    nan = tensord.full([2, 2], float("nan"))
    out = tensord.addmm(nan, tensord.ones(2, 3), tensord.ones(3, 2), beta=0, alpha=2)
    np.testing.assert_allclose(out.numpy(), np.full((2, 2), 6.0))
    inf = tensord.full([1, 2, 3], float("inf"))
    out = tensord.baddbmm(tensord.ones(1, 2, 2), inf, tensord.ones(1, 3, 2), alpha=0)
    assert np.all(np.isnan(out.numpy()))   # 0 * inf, as PyTorch


def test_nn_functional_linear_uses_the_table_op(session):
    x, w, b = tensord.randn(4, 3), tensord.randn(2, 3), tensord.randn(2)
    out = tensord.nn.functional.linear(x, w, b)
    ref = x.numpy() @ w.numpy().T + b.numpy()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="linear"):
        tensord.nn.functional.linear(x, tensord.randn(2, 4))
