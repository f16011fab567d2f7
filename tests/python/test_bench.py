"""Smoke test of `make bench`'s driver: bench/run.py --quick --only 2 runs
build/bin/wire_bench (a real daemon and a real echo server on a temporary Unix
socket and 127.0.0.1 port 0) and writes the combined JSON and Markdown. It
checks the shape of what comes out, never a timing: benchmarks have no
pass/fail on speed. Skips visibly when wire_bench is not built beside the
daemon binary.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import DAEMON_BIN, ROOT, subprocess_env


def test_run_py_quick_figure_2(tmp_path):
    if not DAEMON_BIN or not os.access(os.path.join(os.path.dirname(DAEMON_BIN), "wire_bench"), os.X_OK):
        pytest.skip("wire_bench is not built beside the tensord binary")
    build = os.path.dirname(os.path.dirname(DAEMON_BIN))
    out, md = tmp_path / "bench.json", tmp_path / "bench.md"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--quick", "--only", "2", "--build",
                        build, "--json", str(out), "--markdown", str(md)], capture_output=True, text=True,
                       timeout=120, env=subprocess_env())
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(out.read_text())
    assert result["machine"]["cores"] == os.cpu_count()
    assert result["errors"] == []
    rows = result["rows"]
    assert [(r["figure"], r["transport"]) for r in rows] == [(2, "unix"), (2, "unix"), (2, "tcp"), (2, "tcp")]
    for r in rows:
        assert r["unit"] == "us" and r["target"] == "<= 1.3" and r["peer_name"].startswith("bare gRPC")
        assert r["ours"] > 0 and r["peer"] > 0
        assert r["ratio"] == pytest.approx(r["ours"] / r["peer"])
        assert r["repeats"] == 200
    table = md.read_text()
    assert "| fig | name | tensord | peer |" in table
    for path in ("unix socket, same-host stream", "unix socket, gRPC stream", "loopback TCP, tcp stream",
                 "loopback TCP, gRPC stream"):
        assert f"round trip: add + item, 64 floats ({path})" in table
        assert f"round trip: add + item, 64 floats ({path})" in p.stdout


def test_run_py_reports_a_failing_sub_benchmark(tmp_path):
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--quick", "--only", "2", "--build",
                        str(tmp_path / "no-build"), "--json", str(out)], capture_output=True, text=True, timeout=60,
                       env=subprocess_env())
    assert p.returncode == 1
    assert "FAILED: wire_bench" in p.stdout
    assert json.loads(out.read_text())["rows"] == []
