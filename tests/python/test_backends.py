"""``tensord.backends`` (torch.backends' switches) and
``tensord.set_float32_matmul_precision``: their defaults, what they accept
and refuse as PyTorch does, and, where the daemon has a GPU, that the TF32
switch reaches the CUDA matrix products of the session that set it and no
other session.
"""
import warnings

import numpy as np
import pytest

import tensord


@pytest.fixture(autouse=True)
def defaults():
    """Every test starts and ends with PyTorch's defaults."""
    tensord.backends.cuda.matmul.allow_tf32 = False
    tensord.backends.cudnn.allow_tf32 = True
    yield
    tensord.backends.cuda.matmul.allow_tf32 = False
    tensord.backends.cudnn.allow_tf32 = True


def test_defaults_are_pytorchs():
    assert tensord.backends.cuda.matmul.allow_tf32 is False
    assert tensord.backends.cudnn.allow_tf32 is True
    assert tensord.get_float32_matmul_precision() == "highest"
    assert tensord.backends.cudnn.enabled is True
    assert tensord.backends.cudnn.benchmark is False and tensord.backends.cudnn.deterministic is False
    assert tensord.backends.cudnn.is_available() is False and tensord.backends.cudnn.version() is None
    assert tensord.backends.mps.is_available() is False


def test_the_precision_and_the_tf32_flag_are_one_setting():
    tensord.set_float32_matmul_precision("high")
    assert tensord.backends.cuda.matmul.allow_tf32 is True
    assert tensord.get_float32_matmul_precision() == "high"
    tensord.set_float32_matmul_precision("highest")
    assert tensord.backends.cuda.matmul.allow_tf32 is False
    tensord.set_float32_matmul_precision("medium")      # no bfloat16 products: the same as "high"
    assert tensord.backends.cuda.matmul.allow_tf32 is True
    tensord.backends.cuda.matmul.allow_tf32 = False
    assert tensord.get_float32_matmul_precision() == "highest"
    # The two TF32 switches are independent.
    tensord.backends.cudnn.allow_tf32 = False
    assert tensord.backends.cuda.matmul.allow_tf32 is False and tensord.backends.cudnn.allow_tf32 is False


def test_bad_values_are_refused_as_pytorch_refuses_them():
    with pytest.raises(RuntimeError, match="set_allow_tf32_cublas expects a bool, but got str"):
        tensord.backends.cuda.matmul.allow_tf32 = "yes"
    with pytest.raises(RuntimeError, match="set_allow_tf32_cudnn expects a bool, but got int"):
        tensord.backends.cudnn.allow_tf32 = 1
    with pytest.raises(AssertionError, match="Unknown attribute allow_tf33"):
        tensord.backends.cuda.matmul.allow_tf33 = True
    with pytest.raises(AssertionError, match="Unknown attribute foo"):
        tensord.backends.cudnn.foo
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tensord.set_float32_matmul_precision("fast")
    assert any("'highest', 'high', or 'medium'" in str(x.message) for x in w)
    assert tensord.get_float32_matmul_precision() == "highest"


def test_flags_that_change_nothing_are_kept():
    tensord.backends.cudnn.benchmark = True
    tensord.backends.cudnn.deterministic = True
    try:
        assert tensord.backends.cudnn.benchmark is True and tensord.backends.cudnn.deterministic is True
    finally:
        tensord.backends.cudnn.benchmark = False
        tensord.backends.cudnn.deterministic = False


def test_the_modules_import_as_torchs_do():
    import tensord.backends.cuda
    import tensord.backends.cudnn
    from tensord.backends.cuda import matmul
    assert matmul is tensord.backends.cuda.matmul


def test_a_session_computes_on_the_cpu_as_before_with_tf32_allowed(session):
    # The CPU ignores the switches: the same float32 product either way.
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 64), np.float32), rng.standard_normal((64, 64), np.float32)
    want = (tensord.tensor(a) @ tensord.tensor(b)).numpy()
    tensord.backends.cuda.matmul.allow_tf32 = True
    got = (tensord.tensor(a) @ tensord.tensor(b)).numpy()
    np.testing.assert_array_equal(want, got)


def test_tf32_reaches_cuda_products_of_this_session(session):
    if not tensord.cuda.is_available():
        pytest.skip(f"no CUDA device: {session.cuda_unavailable_reason}")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((512, 512), np.float32), rng.standard_normal((512, 512), np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)

    def rel_err():
        got = (tensord.tensor(a, device="cuda") @ tensord.tensor(b, device="cuda")).cpu().numpy()
        return np.abs(got - want).max() / np.abs(want).max()

    strict = rel_err()
    tensord.backends.cuda.matmul.allow_tf32 = True
    fast = rel_err()
    tensord.backends.cuda.matmul.allow_tf32 = False
    again = rel_err()
    assert strict < 1e-5 and again < 1e-5, (strict, again)
    assert 1e-5 < fast < 1e-2, fast
