#!/usr/bin/python3
"""`make bench`: every figure of bench/RESULTS.md in one table, each beside its peer
measured in the same run. A benchmark, not a test: no figure passes or fails
the run; only a sub-benchmark that crashes does.

    /usr/bin/python3 bench/run.py [--build DIR] [--json FILE] [--markdown FILE] [--only 1,2,...] [--quick]

Runs, each as a subprocess writing JSON rows:
  build/bin/wire_bench   figures 2 (round trip beside bare gRPC) and 3 (upload
                         and download beside the bare transport of the same
                         path, or memcpy through shared memory), C++;
  bench/py_bench.py      figures 1 (pipelined small ops), 4 (CPU kernels),
                         6 (digits MLP epoch), 7 (many clients), Python;
  bench/meta_bench.py    figure 5 (meta cost per op beside torch's meta device).
Then prints one table: figure, name, tensord's value, the peer's value, the
unit, the ratio (tensord / peer), the issue's target for the ratio, whether it
is met, and the peer. Header lines state the machine (cores, CPU model,
memory), the transports, the date and the git commit.

Outputs: the combined JSON (default BUILD/bench.json; an object with
"machine" and "rows"), and with --markdown FILE the same table as Markdown.
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
ALL_FIGURES = (1, 2, 3, 4, 5, 6, 7)
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
    """Extra facts of a row: figure 2's CPU time per round trip, figures 1,
    3 and 6's CPU shares (and 1 and 6's spread over alternating pairs),
    figure 7's latencies, errors and memory."""
    if "daemon_cpu_us" in r:
        return (f"CPU us per round trip: client {r['client_cpu_us']:.0f}, daemon {r['daemon_cpu_us']:.0f} "
                f"(bare: client {r['peer_client_cpu_us']:.0f}, server {r['peer_server_cpu_us']:.0f})")
    if "daemon_cpu_share" in r:
        note = f"CPU share: client {r['client_cpu_share']:.2f}, daemon {r['daemon_cpu_share']:.2f}"
        if "pair_ratio_min" in r:
            note = f"alternating pairs: ratio {r['pair_ratio_min']:.2f}-{r['pair_ratio_max']:.2f}; " + note
        if "memcpy_gbs" in r:
            note += (f"; memcpy moves the same bytes at {r['memcpy_gbs']:.2f} GB/s "
                     f"(tensord {r['ours'] / r['memcpy_gbs']:.3f} of it)")
        return note
    if "p50_sync_us" in r:
        return (f"sync p50 {r['p50_sync_us']:.0f} us, p99 {r['p99_sync_us']:.0f} us, {r['errors']} errors, "
                f"daemon RSS {r['daemon_rss_before'] / 2**20:.1f} -> {r['daemon_rss_after'] / 2**20:.1f} MiB, "
                f"{r['daemon_rss_after_second'] / 2**20:.1f} MiB after a second round; anonymous memory "
                f"{r['daemon_anon_before'] / 2**20:.1f} -> {r['daemon_anon_after'] / 2**20:.1f} MiB")
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
        "every value is a median of repeats; ratio = tensord / peer; target is the issue's goal for the ratio",
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


def markdown_table(rows):
    def esc(s):
        return s.replace("|", "\\|")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---:" if i in (2, 3, 5) else "---"
                                                              for i in range(len(COLUMNS))) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in table_cells(rows)]
    return "\n".join(lines)


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
    args = ap.parse_args(argv)
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

    print()
    print("\n".join(header_lines(m, args.quick)))
    print()
    print(text_table(rows))
    for e in errors:
        print(f"\nFAILED: {e}")

    out = args.json or os.path.join(build, "bench.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(dict(machine=m, quick=args.quick, rows=rows, errors=errors), f, indent=1)
    print(f"\nJSON: {out}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(f"{h}  " for h in header_lines(m, args.quick)) + "\n\n" + markdown_table(rows) + "\n")
        print(f"Markdown: {args.markdown}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
