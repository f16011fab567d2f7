"""The float64 gradcheck suite (test_gradcheck_ops.py, test_gradcheck_reduction.py)
on the devices beside the CPU: the test device (every CI run) and CUDA
(where the suite's daemon has a GPU; elsewhere one skip per test, with the
daemon's reason).

The same cases as on the CPU: gradcheck of every differentiable op over its
OpInfo samples in float64, the nn composites and pooling, and gradgradcheck
of the formulas both modules list. Inputs and constant tensors are made on
the device, so the forward, every backward formula and the finite
differences run there. On CUDA a case whose forward or backward reaches an
op of tests/kernels/cuda_missing_ops.txt is an xfail with the list's reason.
"""
import pytest

import tensord
from tensord.autograd import gradcheck, gradgradcheck
from conftest import device_params, xfail_if_cuda_kernel_missing

import test_gradcheck_ops as ops
import test_gradcheck_reduction as reduction


def _on(device, tensors):
    """Leaves on `device` holding the values of `tensors` (cpu leaves)."""
    return tuple(t.detach().to(device).requires_grad_() for t in tensors)


def _under(device, fn):
    """`fn` with `device` as the default of the factories it calls (its constant tensors)."""
    def run(*args):
        with tensord.device(device):
            return fn(*args)
    return run


def _checked(on_device, check):
    """check(), with CUDA's missing kernels of the to-do list as xfails."""
    try:
        return check()
    except NotImplementedError as e:
        xfail_if_cuda_kernel_missing(on_device, e)
        raise


def _params(cases, prefix):
    return [pytest.param(name, fn, make, id=f"{prefix}-{name}") for name, fn, make in cases]


GRADGRAD = _params(ops.GRADGRAD, "ops") + _params(reduction.GRADGRAD, "reduction")
NN = _params(ops.NN_CASES, "nn")
POOLING = [p for p in NN if p.values[0] in ("max_pool2d", "avg_pool2d", "conv2d_same", "conv2d_unbatched_groups")]


@pytest.mark.parametrize("on_device,name,pos,kw,slots", device_params(ops.CASES), indirect=["on_device"])
def test_gradcheck_on_device(on_device, name, pos, kw, slots):
    dev = on_device.device
    inputs = tuple(tensord.tensor(a, device=dev).requires_grad_() for a in slots)
    fn = ops._function(name, pos, kw, dev)

    def check():
        outs = fn(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        if not any(o.dtype.is_floating_point for o in outs):
            pytest.skip(f"{name}: this sample has no floating output")
        if name != "to.device":     # its samples move to the cpu: the gradient crosses back
            assert all(o.device == tensord.device(dev) for o in outs)
        return gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)
    assert _checked(on_device, check)


@pytest.mark.parametrize("on_device,name,fn,make", device_params(GRADGRAD), indirect=["on_device"])
def test_gradgradcheck_on_device(on_device, name, fn, make):
    assert _checked(on_device, lambda: gradgradcheck(fn, _on(on_device.device, make())))


@pytest.mark.parametrize("on_device,name,fn,make", device_params(NN), indirect=["on_device"])
def test_gradcheck_nn_composites_on_device(on_device, name, fn, make):
    dev = on_device.device
    assert _checked(on_device, lambda: gradcheck(_under(dev, fn), _on(dev, make()), eps=1e-6, atol=1e-5, rtol=1e-3))


@pytest.mark.parametrize("on_device,name,fn,make", device_params(POOLING), indirect=["on_device"])
def test_gradgradcheck_pooling_on_device(on_device, name, fn, make):
    dev = on_device.device
    assert _checked(on_device, lambda: gradgradcheck(_under(dev, fn), _on(dev, make())))
