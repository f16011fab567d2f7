"""The examples run: digits k-NN against a daemon (accuracy >= 0.95, agreeing
with NumPy), and shape inference with no daemon and no network."""
import os
import subprocess
import sys

import pytest

from conftest import DAEMON_BIN, ROOT, subprocess_env

EXAMPLES = os.path.join(ROOT, "examples")


@pytest.mark.skipif(not DAEMON_BIN, reason="no tensord daemon binary")
def test_digits_knn_embedded():
    env = subprocess_env()
    env.pop("TENSORD_ADDRESS", None)       # spawns its own private daemon
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "digits_knn.py")], env=env, capture_output=True,
                       text=True, timeout=300, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    acc = [l for l in r.stdout.splitlines() if l.startswith("accuracy:")][0]
    assert float(acc.split()[1]) >= 0.95
    assert "NumPy agrees" in r.stdout
    assert "round trips that waited" in r.stdout


def test_digits_knn_against_a_running_daemon(daemon):
    env = subprocess_env(TENSORD_ADDRESS=daemon.address)
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "digits_knn.py")], env=env, capture_output=True,
                       text=True, timeout=300, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "accuracy: 0.9" in r.stdout


def test_infer_shapes_needs_no_daemon():
    env = subprocess_env()
    env.pop("TENSORD_ADDRESS", None)
    env["TENSORD_BIN"] = "/nonexistent/tensord"   # any attempt to spawn would fail
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "infer_shapes.py")], env=env, capture_output=True,
                       text=True, timeout=120, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == "(tensord.Size([8, 128, 64]), tensord.Size([8, 128, 64]))"
    assert "no daemon was started" in r.stdout
