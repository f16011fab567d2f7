"""`tensord check SCRIPT [ARGS]`: runs a script with every tensor on meta and no
daemon; exit 0 when it completes, else 1 with the first error (op, shapes)
and the script's file:line.

The scripts below are a small transformer block (embedding, layer_norm,
attention through matmul + softmax, an MLP). Each run gets a TENSORD_BIN
that would leave a marker file if anything tried to spawn a daemon.
"""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TENSORD = os.environ.get("TENSORD_BIN") or os.path.join(ROOT, "build", "bin", "tensord")

BLOCK = textwrap.dedent('''\
    import sys
    import tensord
    import tensord.nn as nn
    import tensord.nn.functional as F

    vocab, d_model, heads, seq, batch = 100, 32, 4, 10, 2
    d_head = d_model // heads
    device = "cuda" if len(sys.argv) > 1 and sys.argv[1] == "cuda" else "cpu"

    tok_emb = tensord.randn(vocab, d_model, device=device)
    ln1_w, ln1_b = tensord.ones(d_model), tensord.zeros(d_model)
    qkv = nn.Linear(d_model, 3 * d_model)
    proj = nn.Linear(d_model, d_model)
    fc1 = nn.Linear(d_model, 4 * d_model)
    fc2 = nn.Linear(4 * d_model, d_model)

    tokens = tensord.randint(0, vocab, (batch, seq), device=device)
    x = F.embedding(tokens, tok_emb)                       # [2, 10, 32]
    h = F.layer_norm(x, (d_model,), ln1_w, ln1_b)
    y = qkv(h)                                             # [2, 10, 96]
    q, k, v = y[..., :d_model], y[..., d_model:2 * d_model], y[..., 2 * d_model:]
    q = q.view(batch, seq, heads, d_head).transpose(1, 2)  # [2, 4, 10, 8]
    k = k.view(batch, seq, heads, d_head).transpose(1, 2)
    v = v.view(batch, seq, heads, d_head).transpose(1, 2)
    scores = q @ K_EXPR / d_head ** 0.5
    attn = F.softmax(scores, dim=-1) @ v                   # [2, 4, 10, 8]
    attn = attn.transpose(1, 2).reshape(batch, seq, d_model)
    x = x + proj(attn)
    x = x + fc2(F.gelu(fc1(F.layer_norm(x, (d_model,)))))
    assert tuple(x.shape) == (batch, seq, d_model), x.shape
    print("shape", tuple(x.shape))
''')


def _write(tmp_path, k_expr):
    path = tmp_path / "block.py"
    path.write_text(BLOCK.replace("K_EXPR", k_expr))
    return path


def _bug_line(path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip().startswith("scores ="):
            return n
    raise AssertionError("no scores line")


def _run(tmp_path, script, *args):
    marker = tmp_path / "daemon-started"
    fake = tmp_path / "fake-tensord"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    fake.chmod(0o755)
    env = dict(os.environ)
    env["TENSORD_BIN"] = str(fake)
    env.pop("TENSORD_ADDRESS", None)
    env["PYTHONPATH"] = os.path.join(ROOT, "python-client") + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = str(tmp_path) + os.pathsep + env.get("PATH", "")  # a `tensord` here would be the fake too
    (tmp_path / "tensord").write_text(fake.read_text())
    (tmp_path / "tensord").chmod(0o755)
    proc = subprocess.run([TENSORD, "check", str(script), *args], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert not marker.exists(), "tensord check started (or tried to start) a daemon"
    return proc


def test_correct_block_exits_zero_without_a_daemon(tmp_path):
    script = _write(tmp_path, "k.transpose(-2, -1)")
    proc = _run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert "shape (2, 10, 32)" in proc.stdout
    assert "tensord check: OK" in proc.stderr


def test_explicit_devices_are_forced_onto_meta(tmp_path):
    script = _write(tmp_path, "k.transpose(-2, -1)")
    proc = _run(tmp_path, script, "cuda")   # device="cuda" in the script: still meta, no GPU needed
    assert proc.returncode == 0, proc.stderr


def test_shape_bug_reports_op_shapes_and_line(tmp_path):
    script = _write(tmp_path, "k")          # forgot the transpose: [2,4,10,8] @ [2,4,10,8]
    proc = _run(tmp_path, script)
    assert proc.returncode == 1, proc.stderr
    line = _bug_line(script)
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{script}:{line}: RuntimeError: "), proc.stderr
    assert "matmul" in first or "bmm" in first, first
    assert "[2, 4, 10, 8]" in first or "[8, 10, 8]" in first or "8 != 10" in first, first
    assert "scores = q @ k" in proc.stderr
    assert "FAILED" in proc.stderr
    assert "shape (" not in proc.stdout      # stopped at the first error


def test_data_reads_and_connect_fail_cleanly(tmp_path):
    script = tmp_path / "reads.py"
    script.write_text("import tensord\nx = tensord.ones(3)\nprint(x.numpy())\n")
    proc = _run(tmp_path, script)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0].startswith(f"{script}:3: NotImplementedError"), proc.stderr
    assert "`tensord check` runs every tensor on meta" in proc.stderr     # not "create it on a real device"
    assert 'device="cpu"' not in proc.stderr
    script.write_text("import os, tensord\nx = tensord.ones(3)\n"
                      "if os.environ.get('TENSORD_NO_DAEMON') != '1':\n    print(x.numpy())\n")
    assert _run(tmp_path, script).returncode == 0        # docs/meta.md's way to skip a read under the check
    script.write_text("import tensord\nx = tensord.ones(3)\nprint(x.item())\n")
    proc = _run(tmp_path, script)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0].startswith(f"{script}:3: RuntimeError: a Tensor with 3 elements"), proc.stderr
    # A script written for a shared daemon: connect() gives a stand-in session, the ops run on meta.
    script.write_text(textwrap.dedent('''\
        import tensord
        with tensord.connect("unix:/nonexistent/daemon.sock") as s:
            y = tensord.ones(3, 4) @ tensord.ones(4, 2)
            s.synchronize()
            assert s.stats()["round_trips"] == 0 and y.is_meta
        s.close()
        tensord.ones(3) @ tensord.ones(4)
    '''))
    proc = _run(tmp_path, script)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0].startswith(f"{script}:7: RuntimeError"), proc.stderr


def test_an_error_in_a_thread_fails_the_check(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text(textwrap.dedent('''\
        import threading, time, tensord
        def work():
            time.sleep(0.2)                                  # still running when the script body ends
            tensord.ones(2, 3) @ tensord.ones(2, 3)
        threading.Thread(target=work).start()
    '''))
    proc = _run(tmp_path, script)
    assert proc.returncode == 1, proc.stderr
    assert f"{script}:4: RuntimeError" in proc.stderr and "FAILED" in proc.stderr, proc.stderr


def test_exit_status_and_arguments_pass_through(tmp_path):
    script = tmp_path / "args.py"
    script.write_text("import sys\nprint(sys.argv[1:])\nsys.exit(int(sys.argv[1]))\n")
    proc = _run(tmp_path, script, "3", "x")
    assert proc.returncode == 3
    assert "['3', 'x']" in proc.stdout
    proc = _run(tmp_path, script, "0")
    assert proc.returncode == 0


def test_usage_errors(tmp_path):
    proc = subprocess.run([TENSORD, "check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage: tensord check" in proc.stderr
    proc = _run(tmp_path, tmp_path / "missing.py")
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_python_module_entry_point(tmp_path):
    script = _write(tmp_path, "k.transpose(-2, -1)")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python-client"))
    proc = subprocess.run([sys.executable, "-m", "tensord._check", str(script)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("value", ["1"])
def test_no_daemon_env_refuses_sessions_in_process(value, tmp_path):
    code = ("import tensord\n"
            "try:\n    tensord.zeros(2, device='cpu')\nexcept RuntimeError as e:\n    print('refused:', e)\n")
    env = dict(os.environ, TENSORD_NO_DAEMON=value, PYTHONPATH=os.path.join(ROOT, "python-client"))
    env.pop("TENSORD_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "refused:" in proc.stdout and "TENSORD_NO_DAEMON" in proc.stdout, proc.stdout + proc.stderr


def test_modules_moved_to_devices_stay_on_meta(tmp_path):
    script = tmp_path / "mlp.py"
    script.write_text(textwrap.dedent('''\
        import numpy as np
        import tensord
        import tensord.nn as nn
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("cuda")
        model.to_empty(device="cpu")
        x = tensord.from_numpy(np.zeros((3, 8), dtype=np.float32)).cuda()
        y = model(x.to("cuda:0", tensord.float32))
        assert tuple(y.shape) == (3, 4) and y.is_meta
        tensord.manual_seed(0)
        assert tensord.tensor([1, 2], device="cpu").is_meta
        model(tensord.zeros(3, 7, device="cpu"))
    '''))
    proc = _run(tmp_path, script)
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{script}:11: RuntimeError: "), proc.stderr
    assert "3x7" in first, first   # linear: "mat1 and mat2 shapes cannot be multiplied (3x7 and 8x16)"


TRAINING = '''import threading
import tensord
import tensord.nn as nn
import tensord.nn.functional as F

with tensord.device("cpu"):                       # an explicit device context: still meta
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
opt = tensord.optim.Adam(model.parameters(), lr=1e-3)
tensord.save(model.state_dict(), "w.safetensors")
model.load_state_dict(tensord.load("w.safetensors"))  # reads only the header under check
made = []
t = threading.Thread(target=lambda: made.append(tensord.randn(4, 8)))
t.start(); t.join()
x = made[0]
assert x.is_meta
y = tensord.zeros(4, dtype=tensord.int64)
for _ in range(2):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()                               # meta grads: each parameter's shape
    assert model[0].weight.grad.shape == (16, 8)
    opt.step()
print("trained", tuple(model(x).shape))
'''


def test_training_script_with_device_contexts_threads_and_load_passes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAINING)
    proc = _run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert "trained (4, 3)" in proc.stdout


def test_error_in_an_imported_module_is_reported_there(tmp_path):
    (tmp_path / "model.py").write_text("def forward(x, w):\n    h = x @ w\n    return h\n")
    script = tmp_path / "main.py"
    script.write_text("import tensord\nfrom model import forward\nx = tensord.randn(3, 4)\n"
                      "w = tensord.randn(5, 2)\ny = forward(x, w)\n")
    proc = _run(tmp_path, script)
    assert proc.returncode == 1, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'model.py'}:2: RuntimeError: matmul: size mismatch"), proc.stderr


def test_syntax_error_is_reported_at_its_line(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import tensord\nx = tensord.randn(3, 4\n")
    proc = _run(tmp_path, script)
    assert proc.returncode == 1, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{script}:2: SyntaxError:"), proc.stderr


def test_composite_errors_name_the_function_and_broadcasts_name_the_shapes(tmp_path):
    script = tmp_path / "attn.py"
    script.write_text("import tensord\nimport tensord.nn.functional as F\nq = tensord.randn(2, 4, 8, 16)\n"
                      "bias = tensord.randn(2, 5)\n"
                      "out = F.scaled_dot_product_attention(q, q, q, attn_mask=bias)\n")
    proc = _run(tmp_path, script)
    assert proc.returncode == 1, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert f"{script}:5: RuntimeError: scaled_dot_product_attention: " in first, first
    assert "(shapes [" in first, first


def test_logged_values_are_placeholders_and_noted_once(tmp_path):
    # A training loop that logs loss.item() runs under check: one-element
    # reads give 1.0 / 1 / False by dtype, with one note naming the first line;
    # finite, so the usual `math.isfinite(loss)` guard of training loops passes.
    script = tmp_path / "log.py"
    script.write_text(textwrap.dedent('''\
        import tensord
        x = tensord.randn(4, 3)
        loss = (x * x).mean()
        print(f"loss {loss:.3f} {loss.item()} {float(loss)} {int(loss)}")
        import math, sys
        if not math.isfinite(loss.item()):
            sys.exit("Loss is nan, stopping training")
        n = x.argmax().item()
        print("argmax", n, int(x.argmax()), type(n).__name__)
        print("any", bool((x > 0).any()), (x > 0).any().item())
        x @ tensord.randn(4, 3)
    '''))
    proc = _run(tmp_path, script)
    assert proc.returncode == 1, proc.stderr
    assert "loss 1.000 1.0 1.0 1" in proc.stdout
    assert "argmax 1 1 int" in proc.stdout
    assert "any False False" in proc.stdout
    notes = [ln for ln in proc.stderr.splitlines() if "placeholder" in ln]
    assert len(notes) == 1 and f"{script}:4:" in notes[0], proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith(str(script))]
    assert errors and errors[0].startswith(f"{script}:11: RuntimeError"), proc.stderr
