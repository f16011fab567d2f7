"""Smoke test of `make bench`'s driver: bench/run.py --quick --only 2 runs
build/bin/wire_bench (a real daemon and a real echo server on a temporary Unix
socket and 127.0.0.1 port 0) and writes the combined JSON and Markdown. It
checks the shape of what comes out, never a timing: benchmarks have no
pass/fail on speed. Skips visibly when wire_bench is not built beside the
daemon binary. --from-json (the tables of an earlier run, nothing run) needs
no build.
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
    assert "### 2. Synchronous round trip" in table
    assert "| row | tensord | peer | unit | ratio | target | met | bound by | notes |" in table
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


def test_run_py_renders_an_earlier_run_from_json(tmp_path):
    """--from-json runs nothing: one table per figure, each row with its
    bound-by line; rows of the earlier figure-3 format (memcpy as every
    peer, bare_grpc_gbs) still render."""
    machine = dict(cores=2, cpu="a CPU", memory_gib=4.0, load_average=[0.1, 0.2, 0.3], kernel="6.1",
                   python="3.11.2", transports="Unix socket and loopback TCP", date="2026-12-07T10:00:00+00:00",
                   commit="abc1234")
    share = dict(client_cpu_share=0.5, daemon_cpu_share=0.9)
    rows = [
        dict(figure=2, name="round trip: add + item, 64 floats (unix socket, same-host stream)", unit="us", ours=8.0,
             peer=60.0, peer_name="bare gRPC 1.51.1 bidi ping-pong", ratio=8 / 60, target="<= 1.3",
             client_cpu_us=9.0, daemon_cpu_us=8.0, peer_client_cpu_us=23.0, peer_server_cpu_us=41.0),
        dict(figure=3, name="upload 64 MiB (unix)", unit="GB/s", ours=2.0, peer=2.2,
             peer_name="bare gRPC 1.51 bidi stream (same path)", ratio=2 / 2.2, target=">= 0.9", memcpy_gbs=8.0,
             **share),
        dict(figure=3, name="upload 64 MiB (unix, shm)", unit="GB/s", ours=16.0, peer=8.0,
             peer_name="memcpy (same process)", ratio=2.0, target=">= 0.8", **share),
        dict(figure=3, name="upload 256 MiB (unix)", unit="GB/s", ours=2.0, peer=10.0,
             peer_name="memcpy (same process)", ratio=0.2, target=">= 0.25", bare_grpc_gbs=2.1, **share),
    ]
    src, md = tmp_path / "bench.json", tmp_path / "bench.md"
    src.write_text(json.dumps(dict(machine=machine, quick=False, rows=rows, errors=[])))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--from-json", str(src), "--markdown",
                        str(md), "--build", str(tmp_path / "no-build")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "upload 64 MiB (unix, shm)" in p.stdout
    table = md.read_text()
    assert "2026-12-07T10:00:00+00:00, commit abc1234" in table
    assert "### 2. Synchronous round trip" in table and "### 3. Upload and download" in table
    assert table.count("| row | tensord | peer | unit | ratio | target | met | bound by | notes |") == 3  # figure 2, figure 3 per peer
    assert "Peer: bare gRPC 1.51 bidi stream (same path)." in table and "Peer: memcpy (same process)." in table
    assert "both ends poll 100 us" in table
    assert "memcpy 8.0 GB/s" in table and "bare gRPC 2.10 GB/s" in table
    assert not (tmp_path / "no-build").exists()
