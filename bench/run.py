#!/usr/bin/python3
"""`make bench`: every figure of bench/RESULTS.md in one table, each beside its peer
measured in the same run. A benchmark, not a test: no figure passes or fails
the run; only a sub-benchmark that crashes does.

    /usr/bin/python3 bench/run.py [--build DIR] [--json FILE] [--markdown FILE] [--only 1,2,...] [--quick]
    /usr/bin/python3 bench/run.py --from-json FILE [--markdown FILE]

Runs, each as a subprocess writing JSON rows:
  build/bin/wire_bench   figures 2 (round trip beside bare gRPC) and 3 (upload
                         and download beside the bare transport of the same
                         path, or memcpy through shared memory), C++;
  bench/py_bench.py      figures 1 (pipelined small ops), 4 (CPU kernels),
                         6 (digits MLP epoch), 7 (many clients), Python;
  bench/meta_bench.py    figure 5 (meta cost per op beside torch's meta device);
  build/bin/cuda_bench   figures 8 (elementwise GB/s beside cudaMemcpy device to
                         device), 9 (mm TFLOP/s beside cuBLAS called directly)
                         and 10 (upload and fetch beside cudaMemcpy from pinned
                         memory) on cuda:0, C++; in builds with CUDA only, and
                         they give no rows (a SKIP line saying why) without a GPU;
  bench/gpu_py_bench.py  figures 11 (pipelined small ops on cuda) and 12 (MLP and
                         transformer block training steps on cuda) beside PyTorch
                         on the same GPU, run by $TORCH_PYTHON (default this
                         Python) through bench/torch_peer.py; no rows (SKIP)
                         without a GPU or without PyTorch's CUDA.
Then prints one table: figure, name, tensord's value, the peer's value, the
unit, the ratio (tensord / peer), the issue's target for the ratio, whether it
is met, and the peer. Header lines state the machine (cores, CPU model,
memory), the transports, the date and the git commit.

Outputs: the combined JSON (default BUILD/bench.json; an object with
"machine" and "rows"), and with --markdown FILE the same rows as Markdown:
the header lines, then one table per figure (row, tensord, peer, unit,
ratio, target, met, what bounds the row, and the row's notes: CPU shares,
alternating pairs, memcpy's rate, latencies). The "bound by" texts are
BOUND_BY below. --from-json FILE runs nothing: it prints the table and
writes --markdown from a combined JSON of an earlier run, so that the
tables of bench/RESULTS.md can be made again.
--quick passes quick to every sub-benchmark (a smoke run of seconds to a
minute; its numbers are not figures). A sub-benchmark that fails prints its
error; the others still run and the exit status is 1 at the end. The daemon
binary is BUILD/bin/tensord (exported as TENSORD_BIN to the sub-benchmarks).
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALL_FIGURES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
TRANSPORTS = "Unix socket (temporary path) and loopback TCP (127.0.0.1, port 0); daemon and clients on this host"


def machine():
    """A dict describing this machine and checkout: cores, cpu, memory_gib,
    load_average (1, 5, 15 minutes, at the start: other work on the machine
    shows in every figure), kernel, python, transports, date (local, ISO 8601), commit (short hash,
    "+dirty" when the tree has changes)."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) / 2**20
                    break
    except OSError:
        pass

    def git(*a):
        try:
            return subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    return dict(cores=os.cpu_count(), cpu=cpu, memory_gib=round(mem, 1) if mem else None,
                load_average=[round(x, 2) for x in os.getloadavg()],
                kernel=platform.release(), python=platform.python_version(), transports=TRANSPORTS,
                date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"), commit=commit)


def met(row):
    """'yes' / 'no' when the row's ratio meets its target ("<= 1.3", ">= 0.9"),
    '-' when it has no target or no ratio."""
    m = re.fullmatch(r"\s*(<=|>=)\s*([0-9.]+)\s*", row.get("target") or "")
    ratio = row.get("ratio")
    if not m or ratio is None:
        return "-"
    ok = ratio <= float(m.group(2)) if m.group(1) == "<=" else ratio >= float(m.group(2))
    return "yes" if ok else "no"


def _num(v):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.1f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def _note(r):
    """Extra facts of a row, compact: figure 2's CPU time per round trip,
    figures 1, 3 and 6's CPU shares (and 1 and 6's spread over alternating
    pairs, 3's memcpy rate), figure 7's latencies, errors and memory.
    Tolerates rows of earlier runs (figure 3's bare_grpc_gbs and bare_tcp_gbs,
    from when memcpy was every figure-3 row's peer)."""
    parts = []
    if "daemon_cpu_us" in r:
        parts.append(f"CPU us per round trip: client {r['client_cpu_us']:.0f}, daemon {r['daemon_cpu_us']:.0f}; "
                     f"bare: client {r['peer_client_cpu_us']:.0f}, server {r['peer_server_cpu_us']:.0f}")
    if "pair_ratio_min" in r:
        parts.append(f"pairs {r['pair_ratio_min']:.2f}-{r['pair_ratio_max']:.2f}")
    if "daemon_cpu_share" in r:
        parts.append(f"CPU share: client {r['client_cpu_share']:.2f}, daemon {r['daemon_cpu_share']:.2f}")
    if r.get("memcpy_gbs"):
        parts.append(f"memcpy {r['memcpy_gbs']:.1f} GB/s (tensord {r['ours'] / r['memcpy_gbs']:.3f} of it)")
    for key, what in (("bare_grpc_gbs", "bare gRPC"), ("bare_tcp_gbs", "bare TCP")):
        if r.get(key) and r.get("ours"):
            parts.append(f"{what} {r[key]:.2f} GB/s (tensord {r['ours'] / r[key]:.2f}x it)")
    if "p50_sync_us" in r:
        mib = 2**20
        parts.append(f"sync p50 {r['p50_sync_us']:.0f} us, p99 {r['p99_sync_us']:.0f} us; {r['errors']} errors; "
                     f"daemon RSS {r['daemon_rss_before'] / mib:.1f} -> {r['daemon_rss_after'] / mib:.1f} MiB "
                     f"({r['daemon_rss_after_second'] / mib:.1f} after a second round), anonymous "
                     f"{r['daemon_anon_before'] / mib:.1f} -> {r['daemon_anon_after'] / mib:.1f} MiB")
    return "; ".join(parts)


# Each figure's heading in the Markdown; for figure 3 also the order of its
# rows (by the path their name ends with, then as measured) and one table
# per peer (the bare gRPC stream, a bare TCP connection and memcpy are the
# peers of different paths).
FIGURES = {
    1: dict(title="Pipelined small ops from Python (us, lower is better)"),
    2: dict(title="Synchronous round trip from C++ (us, lower is better)"),
    3: dict(title="Upload and download from C++ (GB/s, higher is better)", split_by_peer=True,
            order=("(unix)", "(tcp)", "(tcp stream)", "(unix, shm)")),
    4: dict(title="CPU kernels in the daemon (GB/s or GFLOP/s, higher is better)"),
    5: dict(title="Meta cost per op from Python (us per op, lower is better)"),
    6: dict(title="Digits MLP, one training epoch (s, lower is better)"),
    7: dict(title="Many clients: 16 Python processes on one daemon (ops/s, higher is better)"),
    8: dict(title="CUDA elementwise ops on 256 MiB (GB/s moved, higher is better)"),
    9: dict(title="CUDA matrix products (TFLOP/s, higher is better)"),
    10: dict(title="Upload and fetch of a CUDA tensor (GB/s, higher is better)"),
    11: dict(title="Pipelined small ops from Python on CUDA (us, lower is better)"),
    12: dict(title="Training steps on CUDA (ms, lower is better)"),
}

# What bounds each figure, one line per row: figure -> [(substring of the row
# name, or a tuple of them; case-insensitive; "" matches any row), text],
# first match wins. Facts measured when the figure was worked on (profiles,
# instruction counts, alternating runs; bench/RESULTS.md's git history has
# them), not numbers.
BOUND_BY = {
    1: [("python work", "wake-ups of blocked threads: both ends block in turn at each item(); "
                        "the daemon's ops run while Python works"),
        ("", "the client's CPU per op: Python, the binding, the meta cache lookup, building the request; "
             "the daemon works in parallel")],
    2: [("grpc stream", "gRPC's thread hand-offs per message (poller to stream thread, futex wake-ups), "
                        "as in the bare ping-pong, plus tensord's work on both ends"),
        ("tcp stream", "the two ops and the fetch on both ends, one send and receive each way on the "
                       "session's TCP connection; both ends poll 100 us before sleeping"),
        ("", "the two ops and the fetch on both ends, one sendmsg and recvmsg each way on the "
             "same-host socket; both ends poll 100 us before sleeping")],
    3: [("upload 1 MiB (unix, shm)", "one copy into the shared segment on one core; the upload's round trip "
                                     "overlaps the copy"),
        ("download 1 MiB (unix, shm)", "the daemon's copy on one core plus one round trip: the reply can only go "
                                       "after the copy"),
        ("(unix, shm)", "one copy each way, split over the idle cores from 16 MiB: memory bandwidth, "
                        "against memcpy on one core"),
        ("(tcp stream)", "loopback TCP's own rate: the kernel's copy out of the socket is the only copy; "
                         "at 1 MiB also the round trip that ends each transfer"),
        ("", "the bare gRPC stream's own rate: the receiver, the busy side, copies from the socket into "
             "gRPC's buffers, then into the storage")],
    4: [("matmul", "OpenBLAS's sgemm in both columns; its threads share the two cores with whatever else runs"),
        (("exp", "softmax"), "the exp polynomial on the CPU's widest vectors, on both cores (NumPy on one); "
                             "halves when the second core is busy"),
        ("sum", "memory bandwidth: fixed blocks summed in double on both cores, then pairwise; NumPy on one core"),
        ("", "memory bandwidth: both cores over warm output pages, none zeroed by the kernel; NumPy on one core")],
    5: [("geometric mean", "the rows above: the client's call path per op"),
        ("", "the client's call path: meta cache key and hash lookup, new TensorImpls, the Python Tensor object")],
    6: [("", "one round trip per step (loss.item()) and the daemon's CPU, the busier side: forward, "
             "backward, the linear layers' matmuls, the Adam step")],
    7: [("", "the 2 cores, shared by 16 Python clients and the daemon; both columns saturate the machine")],
}


def bound_by(r):
    """The BOUND_BY line of row `r`, '' when its figure has none."""
    name = r.get("name", "").lower()
    for keys, text in BOUND_BY.get(r.get("figure"), ()):
        if any(k.lower() in name for k in ((keys,) if isinstance(keys, str) else keys)):
            return text
    return ""


COLUMNS = ("fig", "name", "tensord", "peer", "unit", "ratio", "target", "met", "peer name")


def table_cells(rows):
    out = []
    for r in sorted(rows, key=lambda r: r["figure"]):
        note = _note(r)
        peer_name = r.get("peer_name", "") + (f"; {note}" if note else "")
        out.append((str(r["figure"]), r["name"], _num(r.get("ours")), _num(r.get("peer")), r.get("unit", ""),
                    _num(r.get("ratio")), r.get("target", ""), met(r), peer_name))
    return out


def header_lines(m, quick):
    return [
        f"tensord benchmarks{' (--quick: smoke run, not figures)' if quick else ''}, {m['date']}, commit {m['commit']}",
        f"machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB memory, Linux {m['kernel']}, "
        f"Python {m['python']}, load average at start {' '.join(map(str, m['load_average']))}",
        f"transports: {m['transports']}",
        "every value is a median of repeats; ratio = tensord / peer; target is the goal for the ratio",
    ]


def text_table(rows):
    cells = table_cells(rows)
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(COLUMNS)]
    widths[-1] = len(COLUMNS[-1])  # the last column is not padded
    right = {2, 3, 5}

    def fmt(row):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    lines = [fmt(COLUMNS), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


MD_COLUMNS = ("row", "tensord", "peer", "unit", "ratio", "target", "met", "bound by", "notes")


def _md_table(rows, peer_note):
    """One Markdown table; `peer_note(r)` is '' or the row's peer when it is
    not the one named above the table. A bound-by line that repeats the row
    above reads "as above"."""
    def esc(s):
        return s.replace("|", "\\|")

    lines = ["| " + " | ".join(MD_COLUMNS) + " |",
             "|" + "|".join("---:" if c in ("tensord", "peer", "ratio") else "---" for c in MD_COLUMNS) + "|"]
    previous = None
    for r in rows:
        notes = "; ".join(n for n in (peer_note(r), _note(r)) if n)
        bound = bound_by(r)
        cells = (r["name"], _num(r.get("ours")), _num(r.get("peer")), r.get("unit", ""), _num(r.get("ratio")),
                 r.get("target", ""), met(r), "as above" if bound and bound == previous else bound, notes)
        previous = bound
        lines.append("| " + " | ".join(esc(c) for c in cells) + " |")
    return lines


def markdown_tables(rows):
    """One table per figure (per peer too where FIGURES says so), each under
    a heading naming the figure and a line naming its peer."""
    lines = []
    for fig in sorted({r["figure"] for r in rows}):
        spec = FIGURES.get(fig, dict(title=f"Figure {fig}"))
        frows = [r for r in rows if r["figure"] == fig]
        if spec.get("order"):
            order = spec["order"]
            frows.sort(key=lambda r: next((i for i, o in enumerate(order) if r["name"].endswith(o)), len(order)))
        peers = list(dict.fromkeys(r.get("peer_name", "") for r in frows))
        lines += ["", f"### {fig}. {spec['title']}"]
        if spec.get("split_by_peer"):
            for peer in peers:
                lines += ["", f"Peer: {peer}.", ""]
                lines += _md_table([r for r in frows if r.get("peer_name", "") == peer], lambda r: "")
        else:
            main = max(peers, key=lambda p: sum(r.get("peer_name", "") == p for r in frows))
            others = [p for p in peers if p != main]
            lines += ["", f"Peer: {main}" + (", except where the notes name another" if others else "") + ".", ""]
            lines += _md_table(frows, lambda r: "" if r.get("peer_name", "") == main else f"peer: {r['peer_name']}")
    return "\n".join(lines[1:])


def markdown(m, quick, rows, errors):
    """The whole Markdown of a run: header lines, the tables, any failures."""
    out = "\n".join(f"{h}  " for h in header_lines(m, quick)) + "\n\n" + markdown_tables(rows) + "\n"
    if errors:
        out += "\nSub-benchmarks that failed:\n\n```\n" + "\n".join(f"FAILED: {e}" for e in errors) + "\n```\n"
    return out


def _stop_group(p):
    """SIGTERM to the process group of `p` (it and the daemon it started),
    SIGKILL after 10 s."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_sub(name, cmd, env, timeout):
    """Runs one sub-benchmark, echoing its output with a prefix. Returns
    (rows, error): rows from the JSON file it wrote, error a message or None."""
    fd, path = tempfile.mkstemp(prefix=f"tensord-bench-{name}-", suffix=".json")
    os.close(fd)
    cmd = cmd + ["--json", path]
    print(f"[{name}] {' '.join(cmd)}", flush=True)
    tail = []
    t0 = time.monotonic()
    try:
        # Its own process group, so that a stop reaches the daemon it spawned too.
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                             start_new_session=True)
        timer = threading.Timer(timeout, _stop_group, (p,))   # a hung sub-benchmark must not hang the run
        timer.start()
        try:
            for line in p.stdout:
                print(f"[{name}] {line}", end="", flush=True)
                tail = (tail + [line.rstrip()])[-20:]
            p.wait()
        finally:
            timer.cancel()
        if time.monotonic() - t0 >= timeout:
            return [], f"{name} ran past {timeout:.0f} s and was stopped"
        if p.returncode != 0:
            return [], f"{name} exited with status {p.returncode}:\n  " + "\n  ".join(tail[-10:])
        with open(path) as f:
            rows = json.load(f)
        print(f"[{name}] done in {time.monotonic() - t0:.0f} s", flush=True)
        return rows, None
    except (OSError, ValueError) as e:
        return [], f"{name} failed: {e}"
    finally:
        os.unlink(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory (default ./build)")
    ap.add_argument("--json", help="combined JSON output (default BUILD/bench.json)")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    ap.add_argument("--only", default=",".join(map(str, ALL_FIGURES)), help="comma-separated figures (default all)")
    ap.add_argument("--quick", action="store_true", help="quick smoke run of every sub-benchmark")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds allowed to each sub-benchmark (default 1200)")
    ap.add_argument("--from-json", metavar="FILE",
                    help="run nothing: print the table of a combined JSON written by an earlier run "
                         "(and write it with --markdown)")
    args = ap.parse_args(argv)
    if args.from_json:
        return from_json(args.from_json, args.markdown)
    try:
        only = {int(x) for x in args.only.split(",") if x.strip()}
    except ValueError:
        ap.error(f"--only takes figure numbers, not {args.only!r}")
    if not only <= set(ALL_FIGURES):
        ap.error(f"--only: figures are {ALL_FIGURES}, not {sorted(only - set(ALL_FIGURES))}")
    build = os.path.abspath(args.build)
    env = dict(os.environ, TENSORD_BIN=os.path.join(build, "bin", "tensord"), PYTHONUNBUFFERED="1")
    quick = ["--quick"] if args.quick else []

    subs = []
    wire = sorted(only & {2, 3})
    if wire:
        subs.append(("wire_bench", [os.path.join(build, "bin", "wire_bench"), "--only", ",".join(map(str, wire))]
                     + quick))
    py = sorted(only & {1, 4, 6, 7})
    if py:
        subs.append(("py_bench", [sys.executable, os.path.join(ROOT, "bench", "py_bench.py"),
                                  "--only", ",".join(map(str, py))] + quick))
    cuda = sorted(only & {8, 9, 10})
    cuda_bench = os.path.join(build, "bin", "cuda_bench")
    if cuda and os.path.exists(cuda_bench):
        subs.append(("cuda_bench", [cuda_bench, "--only", ",".join(map(str, cuda))] + quick))
    elif cuda:
        print(f"[cuda_bench] SKIP: figures {cuda}: {cuda_bench} is not built (a build without CUDA)", flush=True)
    if only & {11, 12}:
        subs.append(("gpu_py_bench", [sys.executable, os.path.join(ROOT, "bench", "gpu_py_bench.py")] + quick))
    if 5 in only:
        subs.append(("meta_bench", [sys.executable, os.path.join(ROOT, "bench", "meta_bench.py"), "--no-cpp",
                                    "--build", build] + (["--repeat", "200"] if args.quick else [])))

    m = machine()
    rows, errors = [], []
    for name, cmd in subs:
        r, err = run_sub(name, cmd, env, args.timeout)
        rows += r
        if err:
            print(f"[{name}] FAILED: {err}", file=sys.stderr, flush=True)
            errors.append(err)

    print_table(m, args.quick, rows, errors)

    out = args.json or os.path.join(build, "bench.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(dict(machine=m, quick=args.quick, rows=rows, errors=errors), f, indent=1)
    print(f"\nJSON: {out}")
    if args.markdown:
        write_markdown(args.markdown, m, args.quick, rows, errors)
    return 1 if errors else 0


def print_table(m, quick, rows, errors):
    print()
    print("\n".join(header_lines(m, quick)))
    print()
    print(text_table(rows))
    for e in errors:
        print(f"\nFAILED: {e}")


def write_markdown(path, m, quick, rows, errors):
    with open(path, "w") as f:
        f.write(markdown(m, quick, rows, errors))
    print(f"Markdown: {path}")


def from_json(path, markdown_path):
    """--from-json: the table (and with `markdown_path` the Markdown) of the
    combined JSON at `path`; runs nothing. Exit status 1 when the run it
    records had a failed sub-benchmark, 2 when the file is not such a JSON."""
    try:
        with open(path) as f:
            result = json.load(f)
        m, rows = result["machine"], result["rows"]
    except (OSError, ValueError, TypeError, KeyError) as e:
        print(f"run.py: {path} is not a combined JSON of bench/run.py (an object with machine and rows): {e}",
              file=sys.stderr)
        return 2
    quick, errors = bool(result.get("quick")), list(result.get("errors") or [])
    print_table(m, quick, rows, errors)
    if markdown_path:
        write_markdown(markdown_path, m, quick, rows, errors)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
