"""Out-of-range indices on the devices beside the CPU: the test device (every
CI run) and CUDA (where the suite's daemon has a GPU; elsewhere one skip per
test, with the daemon's reason).

gather, index_select, embedding, index_put, scatter (src, value, add) and
cross_entropy / nll_loss targets, each with an index past the end or a
negative one (index_put: below -size; the others take none), on the device: the call returns (only the kernel sees the
values), the next sync point raises the exception type and message the CPU
gives (naming the op and the call site), once; then the same session and a
second session (opened before the error) compute correctly on that device.
A GPU kernel reports bad indices through its error word, never a
device-side assert, which would leave the CUDA context unusable for every
session of the daemon.
"""
import re

import numpy as np
import pytest

import tensord
import tensord.nn.functional as F
from conftest import device_params, xfail_if_cuda_kernel_missing

_RNG = np.random.default_rng(11)
X = _RNG.standard_normal((4, 5)).astype(np.float32)
BIG = _RNG.standard_normal((300, 257)).astype(np.float32)
ONES5 = np.ones(5, np.float32)


def _t(a, device):
    return tensord.tensor(np.asarray(a), device=device)


def _big_index(bad):
    """A (300, 257) gather index in range but for one element deep inside
    (many GPU blocks run; one of them finds it)."""
    idx = np.random.default_rng(5).integers(0, 257, (300, 257))
    if bad is not None:
        idx[211, 130] = bad
    return idx


# (id, fn(device, index array) -> tensor, a bad index array, the same in range)
CASES = [
    ("gather-past-end", lambda d, i: _t(X, d).gather(1, _t(i, d)), [[0, 7], [1, 1], [3, 0], [2, 4]],
     [[0, 3], [1, 1], [3, 0], [2, 4]]),
    ("gather-negative", lambda d, i: _t(X, d).gather(0, _t(i, d)), [[0, -1, 0, 0, 0]], [[0, 3, 0, 0, 0]]),
    ("gather-large", lambda d, i: _t(BIG, d).gather(1, _t(i, d)), _big_index(300), _big_index(None)),
    ("index_select-past-end", lambda d, i: _t(X, d).index_select(0, _t(i, d)), [1, 4], [1, 3]),
    ("index_select-negative", lambda d, i: _t(X, d).index_select(1, _t(i, d)), [2, -1], [2, 4]),
    ("embedding-past-end", lambda d, i: F.embedding(_t(i, d), _t(X, d)), [[0, 12]], [[0, 2]]),
    ("embedding-negative", lambda d, i: F.embedding(_t(i, d), _t(X, d)), [-1], [1]),
    ("index_put-past-end", lambda d, i: _t(X, d).index_put((_t(i, d),), _t(ONES5, d)), [0, 9], [0, 3]),
    ("index_put-accumulate-negative",
     lambda d, i: _t(X, d).index_put((_t(i, d),), _t(ONES5, d), accumulate=True), [0, -7], [0, -4]),
    ("scatter-past-end", lambda d, i: _t(X, d).scatter(0, _t(i, d), _t(X, d)), [[0, 6]], [[0, 2]]),
    ("scatter-value-past-end", lambda d, i: _t(X, d).scatter(1, _t(i, d), 1.5), [[5]], [[4]]),
    ("scatter_add-negative", lambda d, i: _t(X, d).scatter_add(0, _t(i, d), _t(X, d)), [[-1]], [[3]]),
    ("cross_entropy-past-end", lambda d, i: F.cross_entropy(_t(X, d), _t(i, d)), [0, 5, 1, 2], [0, 4, 1, 2]),
    ("cross_entropy-negative", lambda d, i: F.cross_entropy(_t(X, d), _t(i, d), reduction="none"),
     [0, -2, 1, 2], [0, 3, 1, 2]),
    ("nll_loss-past-end", lambda d, i: F.nll_loss(_t(X, d), _t(i, d)), [0, 5, 1, 2], [3, 4, 1, 2]),
]
PARAMS = device_params([pytest.param(fn, np.asarray(bad), np.asarray(good), id=name)
                        for name, fn, bad, good in CASES])


def _message(e):
    """The message without the call id (it counts the session's calls)."""
    return re.sub(r" \(call \d+ at ", " (at ", str(e))


def _raised_at_sync(y):
    try:
        y.cpu().numpy()
        tensord.synchronize()
    except Exception as e:  # noqa: BLE001 - compared with the cpu's
        return e
    return None


def _assert_computes(on_device, fn, good):
    """fn on the device equals fn on the cpu (in the current session)."""
    y = fn(on_device.device, good)
    assert y.device == tensord.device(on_device.device)
    got, ref = y.cpu().numpy(), fn("cpu", good).numpy()
    if on_device.is_cuda:
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("on_device,fn,bad,good", PARAMS, indirect=["on_device"])
def test_out_of_range_indices_raise_at_the_sync_point(on_device, fn, bad, good):
    dev, session = on_device.device, on_device.session
    other = tensord.connect(session.address, set_default=False)
    try:
        with other:
            before = _t(X, dev) * 2     # work of another session, pending while the error happens
        e_cpu = _raised_at_sync(fn("cpu", bad))
        assert e_cpu is not None, "the cpu accepted the indices"
        try:
            y = fn(dev, bad)            # the call returns: only the kernel sees the values
            e_dev = _raised_at_sync(y)
        except NotImplementedError as e:
            xfail_if_cuda_kernel_missing(on_device, e)
            raise
        xfail_if_cuda_kernel_missing(on_device, e_dev)
        assert e_dev is not None, f"{dev} accepted the indices; the cpu raised {e_cpu!r}"
        assert type(e_dev) is type(e_cpu) and _message(e_dev) == _message(e_cpu), \
            f"{dev} raised {e_dev!r}, the cpu {e_cpu!r}"
        assert "test_device_hostile.py:" in str(e_dev), "the error names the call site"
        session.synchronize()           # reported once
        _assert_computes(on_device, fn, good)
        with other:
            np.testing.assert_array_equal(before.cpu().numpy(), X * 2)
            _assert_computes(on_device, fn, good)
    finally:
        other.close()
