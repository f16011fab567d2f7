"""The OpInfo database (opinfo.py, test_opinfo.py's cases) on the devices
beside the CPU: the test device (privateuseone:0, the CPU's kernels behind
explicit copies; every CI run) and CUDA (where the suite's daemon has a GPU;
elsewhere one skip per test, with the daemon's reason).

For every case (op, sample, layout) the call runs on the CPU and, with its
inputs uploaded to the device in the same layout, on the device:

- each device output's metadata (dtype, sizes, strides, storage_offset) is
  the client's prediction, the daemon's, and the CPU run's; outputs alias the
  same inputs as on the CPU;
- values equal the CPU's: exactly on the test device (the same kernels),
  within test_opinfo's per-dtype ``tolerances`` on CUDA; random ops compare
  metadata and ranges only, ops whose values are unspecified metadata only;
- every error input raises on the device the CPU's exception type and
  message, at the call or at the sync point that follows (forced here: the
  outputs are fetched and the session synchronized), except integer
  division by zero on CUDA, which gives 0 there (a GPU thread cannot raise;
  docs/adding-an-op.md, section 4a);
- an op without a kernel fails on the test device; on CUDA an op listed in
  tests/kernels/cuda_missing_ops.txt (the CUDA kernels' to-do list) is an
  xfail with the list's reason when its call reports the missing kernel, so
  each op starts being checked as soon as its kernel lands.

CI time: every layout on both devices; the test device's part takes about
30 s on two cores (measured: 3887 items in 28 s), so it needs no subset.
"""
import re

import numpy as np
import pytest

import tensord
from tensord import _C
from conftest import CUDA_MISSING, device_params, xfail_if_cuda_kernel_missing

from test_opinfo import (CASES, ERROR_CASES, _alias_pattern, _client_same, _low_precision, host, run_tensord,
                         tolerances)

PARAMS = device_params(CASES)
ERROR_PARAMS = device_params(ERROR_CASES)


def _run_on(info, sample, device):
    """The call with every tensor input uploaded to `device` (factories: made there)."""
    with tensord.device(device):
        return run_tensord(info, sample, device=device)


def _fetched(outs):
    """The outputs on the CPU, then a synchronize: an error the device's
    kernel reports (an index out of range) raises here."""
    got = [o.cpu() for o in outs]
    tensord.synchronize()
    return got


def _meta(t):
    m = _C._client_meta(t)
    return m["dtype"], m["sizes"], m["strides"], m["storage_offset"]


def _message(e):
    """The exception's message without the call id an error reported at a
    sync point carries ("(call 14 at file.py:253)"): it counts the session's calls."""
    return re.sub(r" \(call \d+ at [^)]*\)", "", str(e))


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares whatever was raised
        return e
    return None


@pytest.mark.parametrize("on_device,info,sample,layout", PARAMS, indirect=["on_device"])
def test_op_on_device_equals_cpu(on_device, info, sample, layout):
    dev = on_device.device
    cpu_outs, cpu_inputs = run_tensord(info, sample)
    try:
        outs, inputs = _run_on(info, sample, dev)
        got = _fetched(outs)
    except NotImplementedError as e:
        xfail_if_cuda_kernel_missing(on_device, e)
        raise
    assert len(outs) == len(cpu_outs)
    # to.device's samples move to the cpu; every other output stays on the device.
    where = tensord.device("cpu") if info.name == "to.device" else tensord.device(dev)
    for k, (o, c) in enumerate(zip(outs, cpu_outs)):
        assert o.device == where, f"output {k} is on {o.device}"
        assert _C._client_meta(o) == _C._daemon_meta(o), f"output {k}: the client's prediction is not the daemon's"
        # to("cpu") returns a cpu input itself (its strides and offset) and
        # copies a device one (preserve_format: dense strides kept, others made
        # contiguous), as PyTorch's: only the prediction is checked for it.
        if info.name != "to.device":
            assert _meta(o) == _meta(c), f"output {k}: (dtype, sizes, strides, offset) {_meta(o)} != cpu's {_meta(c)}"
    if info.name != "to.device":
        assert _alias_pattern(outs, inputs, _client_same) == _alias_pattern(cpu_outs, cpu_inputs, _client_same)
    for k, (g, c) in enumerate(zip(got, cpu_outs)):
        ours, ref = host(g), host(c)
        if info.random:
            if info.name.startswith("rand") and not info.name.startswith(("randn", "randint")):
                assert np.all((ours >= 0) & (ours < 1)), "rand values must lie in [0, 1)"
            assert np.all(np.isfinite(ours.astype(np.float64)))
        elif info.shape_only:
            continue
        elif not on_device.is_cuda or ours.dtype.kind in "biu":
            np.testing.assert_array_equal(ours, ref, err_msg=f"output {k}")
        else:
            rtol, atol = tolerances(info, g.dtype._name, _low_precision(sample))
            np.testing.assert_allclose(ours.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=f"output {k}")


@pytest.mark.parametrize("on_device,info,err", ERROR_PARAMS, indirect=["on_device"])
def test_error_inputs_raise_the_same_on_device(on_device, info, err):
    e_cpu = _raised(lambda: _fetched(run_tensord(info, err.sample)[0]))
    assert isinstance(e_cpu, err.error), f"the cpu raised {e_cpu!r}"
    e_dev = _raised(lambda: _fetched(_run_on(info, err.sample, on_device.device)[0]))
    xfail_if_cuda_kernel_missing(on_device, e_dev)
    if on_device.is_cuda and err.match == "ZeroDivisionError":
        # A GPU thread cannot raise: integer division, remainder and fmod by
        # zero give 0 on CUDA (docs/adding-an-op.md, 4a, "Errors").
        assert e_dev is None, f"integer division by zero raised on CUDA: {e_dev!r}"
    else:
        assert e_dev is not None, \
            f"{info.name}{err.sample!r} did not raise on {on_device.device}; the cpu raised {e_cpu!r}"
        assert type(e_dev) is type(e_cpu) and _message(e_dev) == _message(e_cpu), \
            f"{on_device.device} raised {e_dev!r}, the cpu {e_cpu!r}"
    # The session goes on.
    assert (tensord.ones(3, device=on_device.device) + 1).tolist() == [2.0, 2.0, 2.0]


def test_the_cuda_to_do_list_names_ops_of_the_table():
    ops = {e["full_name"] for e in _C.op_table()}
    unknown = sorted(set(CUDA_MISSING) - ops)
    assert not unknown, f"cuda_missing_ops.txt names ops the table lacks: {unknown}"


def test_only_the_to_do_lists_missing_cuda_kernels_are_xfails(monkeypatch):
    """xfail_if_cuda_kernel_missing (which CUDA runs use) knows the daemon's
    missing-kernel error in both its forms, at the call and at a sync point,
    and lets every other error fail."""
    from _pytest.outcomes import XFailed

    from conftest import OnDevice, xfail_if_cuda_kernel_missing
    # The list is empty once every op has a CUDA kernel: then an entry made
    # up in its format (the same dict conftest reads) stands for one.
    listed = next(iter(CUDA_MISSING), "made_up.op")
    monkeypatch.setitem(CUDA_MISSING, listed,
                        CUDA_MISSING.get(listed, f"{listed}: no CUDA kernel yet (tests/kernels/cuda_missing_ops.txt: )"))
    cuda, test_device = OnDevice("cuda:0", None), OnDevice("privateuseone:0", None)
    reason = re.escape(f"{listed}: no CUDA kernel yet (tests/kernels/cuda_missing_ops.txt")
    for message in (f"{listed}: no kernel for device cuda:0",
                    f"{listed} (call 7 at f.py:3): no kernel for device cuda:0"):
        with pytest.raises(XFailed, match=reason):
            xfail_if_cuda_kernel_missing(cuda, NotImplementedError(message))
        xfail_if_cuda_kernel_missing(test_device, NotImplementedError(message.replace("cuda:0", "privateuseone:0")))
        xfail_if_cuda_kernel_missing(cuda, RuntimeError(message))
    not_listed = "add.Tensor (call 7 at f.py:3): no kernel for device cuda:0"
    assert "add.Tensor" not in CUDA_MISSING
    xfail_if_cuda_kernel_missing(cuda, NotImplementedError(not_listed))
    xfail_if_cuda_kernel_missing(cuda, None)
