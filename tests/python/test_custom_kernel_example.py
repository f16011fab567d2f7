"""examples/custom_kernel/train.py: the fused bias + GELU kernel built from
source into an artifact, checked on meta, compared with gelu(x + bias), its
declared derivative (calling the library's backward kernel) checked by
gradcheck, and trained through in an embedded daemon to at least 0.95 test
accuracy; with --with-cuda, the CUDA kernels are compiled into the same
artifact (nvcc), their architectures read from the object's fat binary."""
import json
import os
import subprocess
import sys

import pytest

from conftest import DAEMON_BIN, ROOT, subprocess_env

EXAMPLE = os.path.join(ROOT, "examples", "custom_kernel", "train.py")
NVCC = "/usr/local/cuda/bin/nvcc"


def run(tmp_path, *args):
    env = subprocess_env(TENSORD_EXTENSIONS_DIR=str(tmp_path))
    env.pop("TENSORD_ADDRESS", None)  # an embedded daemon: it runs the artifacts its own user loads
    r = subprocess.run([sys.executable, EXAMPLE, *args], env=env, capture_output=True, text=True, timeout=600, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_trains_through_the_custom_kernel(tmp_path):
    if not DAEMON_BIN:
        pytest.skip("no tensord binary")
    out = run(tmp_path, "--epochs", "8")
    assert "meta: (32, 128)" in out
    assert "meta: mylib::fused_bias_gelu: bias must be [128], got [64]" in out
    assert "max |difference|" in out
    assert "gradcheck of the declared derivative (cpu, float64): passed" in out
    assert "grad_fn: FusedBiasGeluBackward0" in out
    accuracy = float(out.split("test accuracy: ")[1].split()[0])
    assert accuracy >= 0.95
    assert os.path.exists(tmp_path / "mylib.tdk")


def test_the_cuda_kernel_builds_into_the_artifact(tmp_path):
    if not DAEMON_BIN:
        pytest.skip("no tensord binary")
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}")
    out = run(tmp_path, "--with-cuda", "--epochs", "1", "--min-accuracy", "0")
    assert "CPU and CUDA kernels" in out
    r = subprocess.run([DAEMON_BIN, "inspect-kernel", str(tmp_path / "mylib.tdk")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    manifest = json.loads(r.stdout[r.stdout.index("{"):r.stdout.rindex("}") + 1])
    assert manifest["cuda_sm"] == [80, 90] and manifest["cuda_ptx"] == [90]
    assert manifest["ops"][0]["symbols"] == {"cpu": "mylib_fused_bias_gelu_cpu", "cuda": "mylib_fused_bias_gelu_cuda"}
    assert manifest["ops"][1]["symbols"] == {"cpu": "mylib_fused_bias_gelu_backward_cpu",
                                             "cuda": "mylib_fused_bias_gelu_backward_cuda"}
    assert manifest["ops"][0]["derivative"].startswith("d = mylib::fused_bias_gelu_backward(grad, x, bias)")


def test_a_prebuilt_artifact_needs_no_compiler(tmp_path):
    """--artifact: the artifact built elsewhere (as scripts/gpu-pack.sh does
    for the GPU machines, which have no compiler) is loaded, not built."""
    if not DAEMON_BIN:
        pytest.skip("no tensord binary")
    here = os.path.join(ROOT, "examples", "custom_kernel")
    out = tmp_path / "prebuilt" / "mylib.tdk"
    out.parent.mkdir()
    r = subprocess.run([DAEMON_BIN, "build-kernel", "-o", str(out), os.path.join(here, "fused_bias_gelu.cc")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = run(tmp_path, "--artifact", str(out), "--epochs", "1", "--min-accuracy", "0")
    assert f"artifact: {out} (library mylib" in text and "as built kernels" in text
    assert "gradcheck of the declared derivative (cpu, float64): passed" in text
    assert not (tmp_path / "mylib.tdk").exists()  # nothing built in the extensions directory
