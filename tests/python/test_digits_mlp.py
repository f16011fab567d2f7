"""examples/digits_mlp.py trains a 64 -> 128 -> 10 MLP through the daemon to at
least 0.95 test accuracy on a reduced budget, and (where PyTorch is installed)
prints PyTorch's result for the same initial weights and batches beside it."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, subprocess_env

EXAMPLE = os.path.join(ROOT, "examples", "digits_mlp.py")


def run(daemon, *args):
    env = subprocess_env(TENSORD_ADDRESS=daemon.address)
    r = subprocess.run([sys.executable, EXAMPLE, *args], env=env, capture_output=True, text=True, timeout=600,
                       cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def accuracy_of(stdout):
    line = [l for l in stdout.splitlines() if l.startswith("test accuracy:")][0]
    return float(line.split()[2])


def test_digits_mlp_reaches_095(daemon):
    r = run(daemon, "--epochs", "8", "--no-torch")
    assert accuracy_of(r.stdout) >= 0.95
    assert "wall time:" in r.stdout
    assert "loss=" in r.stderr                      # the progress bar shows the loss
    assert "epoch 8/8" in r.stderr


def test_digits_mlp_side_by_side_with_pytorch(daemon):
    pytest.importorskip("torch")
    r = run(daemon, "--epochs", "3", "--min-accuracy", "0.0")
    rows = {l[:16].strip(): l[16:].split() for l in r.stdout.splitlines() if l.startswith(("test accuracy ",
                                                                                            "last batch loss"))}
    ours, theirs = float(rows["test accuracy"][0]), float(rows["test accuracy"][1])
    # Same initial weights and batches: the two trainings differ only by float rounding.
    assert abs(ours - theirs) <= 0.02, r.stdout
    loss_ours, loss_theirs = map(float, rows["last batch loss"])
    assert loss_ours == pytest.approx(loss_theirs, rel=0.05, abs=0.01), r.stdout


def test_digits_mlp_on_another_device():
    """--device: the model, the data and the optimizer live on the daemon's
    device (the test device here, as a GPU on a GPU server); the result is the
    cpu's, from the same weights and batches."""
    from conftest import DAEMON_BIN, Daemon
    if not DAEMON_BIN:
        pytest.skip("no tensord daemon binary")
    d = Daemon(DAEMON_BIN, extra_args=["--test-device"])
    try:
        on_dev = run(d, "--epochs", "3", "--min-accuracy", "0.0", "--no-torch", "--device", "privateuseone:0")
        on_cpu = run(d, "--epochs", "3", "--min-accuracy", "0.0", "--no-torch")
    finally:
        d.stop()
    assert "on the daemon's privateuseone:0" in on_dev.stdout
    assert abs(accuracy_of(on_dev.stdout) - accuracy_of(on_cpu.stdout)) <= 0.01, on_dev.stdout + on_cpu.stdout
