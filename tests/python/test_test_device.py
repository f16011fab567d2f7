"""A second device from Python without a GPU: the test device
(privateuseone:0), which `tensord serve --test-device` serves as host memory
behind explicit copies. What a CUDA user does (tensors created on a device,
`.to()` and `.cpu()`, autograd across the move, PyTorch's error for two
devices in one op) runs here on every CI run."""
import numpy as np
import pytest

import tensord
from conftest import DAEMON_BIN, Daemon

pytestmark = pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")


@pytest.fixture(scope="module")
def dev_session():
    d = Daemon(DAEMON_BIN, extra_args=["--test-device"])
    s = tensord.connect(d.address, set_default=False)
    yield s
    s.close()
    d.stop()


def test_tensors_live_and_compute_on_the_test_device(dev_session):
    with dev_session:
        x = tensord.tensor([1.0, 2.0, 3.0], device="privateuseone")
        assert str(x.device) == "privateuseone:0"
        y = x * 2 + 1
        assert y.device == x.device
        np.testing.assert_array_equal(y.numpy(), [3.0, 5.0, 7.0])
        # Large enough for chunks and shared memory (never adopted: a device
        # tensor's storage is not the client's memory); a strided fetch.
        big = np.arange(600 * 500, dtype=np.float32).reshape(600, 500)
        t = tensord.tensor(big, device="privateuseone")
        np.testing.assert_array_equal(t.t().numpy(), big.T)
        np.testing.assert_allclose(t.sum(0).cpu().numpy(), big.astype(np.float64).sum(0), rtol=1e-6)
        z = tensord.zeros(2, 3, device="privateuseone")
        assert z.device.type == "privateuseone" and z.tolist() == [[0.0] * 3] * 2
        # A data-dependent op: its kernel makes its output, on the device.
        nz = tensord.tensor([0.0, 1.0, 0.0, 2.0], device="privateuseone").nonzero()
        assert nz.device.type == "privateuseone" and nz.tolist() == [[1], [3]]
        # Indices on the cpu index a device tensor, as PyTorch allows.
        assert t[tensord.tensor([0, 599])][:, :2].tolist() == [[0.0, 1.0], [299500.0, 299501.0]]


def test_to_moves_data_both_ways_and_autograd_follows(dev_session):
    with dev_session:
        w = tensord.tensor([1.0, 2.0], requires_grad=True)
        wd = w.to("privateuseone")
        assert wd.requires_grad and wd.grad_fn is not None
        (wd * wd).sum().backward()
        assert w.grad.device.type == "cpu"
        np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])
        back = wd.detach().cpu()
        assert back.device.type == "cpu" and back.tolist() == [1.0, 2.0]


def test_two_devices_in_one_op_is_pytorchs_error(dev_session):
    with dev_session:
        a = tensord.ones(3, device="privateuseone")
        b = tensord.ones(3)
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            a + b
        assert (a + 1).tolist() == [2.0, 2.0, 2.0]  # the session goes on


def test_gradients_follow_their_tensors_device(dev_session):
    """As PyTorch's engine: a given gradient must be on its root's device
    (a 0-dim one is moved there), a gradient crossing `.to()` goes back to the
    input's device, and gradcheck runs on the inputs' device."""
    dev = "privateuseone:0"
    with dev_session:
        c = tensord.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = c.to(dev) * 1
        with pytest.raises(RuntimeError, match=r"invalid gradient at index 0 - expected device privateuseone:0 but "
                                               r"got cpu"):
            y.backward(tensord.full((3,), 5.0))
        y.backward(tensord.full((3,), 5.0, device=dev))
        assert c.grad.device.type == "cpu" and c.grad.tolist() == [5.0, 5.0, 5.0]
        c.to(dev).sum().backward(tensord.tensor(2.0))  # a 0-dim cpu gradient is moved
        assert c.grad.tolist() == [7.0, 7.0, 7.0]
        d = tensord.randn(3, requires_grad=True, device=dev)
        with pytest.raises(RuntimeError, match="invalid gradient at index 0 - expected device"):
            tensord.autograd.grad(d.sin(), d, tensord.ones(3))
        (g,) = tensord.autograd.grad(d.sin(), d, tensord.ones(3, device=dev))
        assert g.device.type == "privateuseone"
        x = tensord.randn(3, dtype=tensord.float64, device=dev, requires_grad=True)
        assert tensord.autograd.gradcheck(lambda u: (u * u).sin(), (x,))
        assert tensord.autograd.gradgradcheck(lambda u: (u * u).sin(), (x,))


def test_formulas_that_make_zeros_make_them_on_the_gradients_device(dev_session):
    """Backward formulas that start from zeros (gather, index_select,
    indexing, index_put, masked_select, masked_scatter, max.dim, the unused
    pieces of split) make them on the gradient's device, not the cpu."""
    dev = "privateuseone:0"
    with dev_session:
        x = tensord.randn(4, 5, dtype=tensord.float64, device=dev, requires_grad=True)
        idx = tensord.tensor([[0, 2], [1, 1], [3, 0], [2, 4]], device=dev)
        rows = tensord.tensor([3, 0, 3], device=dev)
        mask = tensord.randn(4, 5, device=dev) > 0
        cases = {
            "gather": lambda u: u.gather(1, idx),
            "index_select": lambda u: u.index_select(0, rows),
            "index": lambda u: u[rows],
            "index_put": lambda u: u.index_put((rows,), tensord.zeros(5, dtype=tensord.float64, device=dev)),
            "masked_select": lambda u: u.masked_select(mask),
            "masked_scatter": lambda u: tensord.zeros(4, 5, dtype=tensord.float64, device=dev).masked_scatter(mask, u),
            "max.dim": lambda u: u.max(1).values,
            "split": lambda u: u.split(2)[0],
        }
        for name, f in cases.items():
            y = f(x)
            assert y.device == tensord.device(dev), name
            (g,) = tensord.autograd.grad(y.sum(), x)
            assert g.device == tensord.device(dev), name
            assert tensord.autograd.gradcheck(f, (x,)), name


def test_each_device_has_its_own_generator(dev_session):
    # As PyTorch's per-device generators: manual_seed seeds them all, and
    # drawing on one device does not move another's stream.
    with dev_session:
        tensord.manual_seed(7)
        on_device = tensord.randn(5, device="privateuseone")
        cpu_after = tensord.randn(5)
        tensord.manual_seed(7)
        cpu_first = tensord.randn(5)
        assert cpu_after.tolist() == cpu_first.tolist()
        # The test device runs the CPU's kernels: the same seed, the same draws.
        assert on_device.cpu().tolist() == cpu_first.tolist()
        assert tensord.randn(5).tolist() != cpu_first.tolist()    # the stream moves on


def test_a_daemon_without_it_names_the_devices_it_serves(session):
    # At the call, before anything is sent (the daemon would refuse it too,
    # at the next sync point).
    ops = tensord.stats()["ops_issued"]
    with pytest.raises(RuntimeError, match=r"^zeros: device privateuseone:0 is not available: this daemon serves cpu$"):
        tensord.zeros(2, device="privateuseone")
    assert tensord.stats()["ops_issued"] == ops
    tensord.synchronize()
