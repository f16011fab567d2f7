#!/usr/bin/env bash
# Checks tensord's CUDA side on a GPU machine, from the pack that
# scripts/gpu-pack.sh made on the build machine (the GPU machines have no
# Debian gRPC, protobuf or abseil, and no network): run from the repository
# root, with gpu-pack.tar.xz (or the gpu-pack/ folder) carried along.
#
#   scripts/gpu-check.sh [PACK]        # default gpu-pack: PACK.tar.xz, else PACK/
#
# Steps, each bounded in time (about 8 minutes in all at most):
#   1. nvidia-smi: the GPU, its driver and memory (absent: the GPU parts
#      below are skipped, visibly, and the rest still runs: that checks the
#      pack itself on any machine);
#   2. the pack: its manifest, and glibc: the machine's when new enough,
#      else the pack's copy through its own loader;
#   3. every packed test binary with --gtest_filter='*Cuda*': on a GPU no
#      CUDA test may skip ("no CUDA device: ..." fails the check);
#   4. the daemon: started on a Unix socket, its log must list cuda:0 (no
#      GPU: say why not), then stopped with SIGTERM: it must exit 0;
#   5. the pack's Python (PACK/bin/python3.11, nothing of the machine's
#      Python; the pack's glibc too when step 2 chose it): the Python
#      client's device suites of tests/python (device_opinfo,
#      device_gradcheck, device_hostile, cuda_api, backends) against the
#      pack's client and daemon; on a GPU no test may skip for want of a
#      CUDA device (-rs lists the reasons); counts passed, skipped, failed;
#   6. examples/digits_mlp.py --data PACK/digits.npz --no-torch: on the GPU
#      (--device cuda, the example's accuracy floor of 0.95), else on the
#      CPU for two epochs with no floor (a check of the pack);
#   7. examples/custom_kernel/train.py --artifact PACK/mylib.tdk (the
#      artifact gpu-pack.sh built, with CUDA kernels for sm_80 and sm_90):
#      its fused kernel against gelu(x + bias) and training through its
#      declared derivative (the CUDA backward kernel) on the GPU, else one
#      epoch on the CPU with no floor;
#   8. the CUDA benchmarks: bin/cuda_bench (figures 8-10, beside cudaMemcpy
#      and cuBLAS on the same card) and bench/gpu_py_bench.py (11-12, beside
#      the machine's own PyTorch, found as the first python3 on PATH that
#      imports torch, or $TORCH_PYTHON), each writing its rows as JSON next
#      to the log (cuda_bench.json, gpu_py_bench.json); without a GPU they
#      must say SKIP. Nothing fails on speed.
# cuBLAS is the machine's (libcublas.so.13 of its CUDA toolkit, too large to
# pack): the daemon loads it at its first matrix product, cuda_bench links
# it; its folder joins the library path when the loader's own search does
# not find it.
# Writes everything to one log, $OUT/gpu-check.log when $OUT is set (the
# device machine's output folder), else ./gpu-check.log; exits 0 when every
# step passed, 1 otherwise.
set -uo pipefail

cd "$(dirname "$0")/.."
PACK=${1:-gpu-pack}
LOG=${OUT:+$OUT/gpu-check.log}
LOG=${LOG:-$PWD/gpu-check.log}
mkdir -p "$(dirname "$LOG")"
: > "$LOG"
exec > >(tee -a "$LOG") 2>&1

START=$(date +%s)
FAILED=()
say() { echo "gpu-check: $*"; }
fail() { say "FAIL: $*"; FAILED+=("${1%%:*}"); }
elapsed() { echo $(($(date +%s) - START)); }

say "started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) in $PWD; log $LOG"

# ---- 1. the GPU ----------------------------------------------------------------------
GPU=0
if command -v nvidia-smi > /dev/null 2>&1; then
  if timeout 60 nvidia-smi; then
    timeout 30 nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,memory.used \
      --format=csv || true
    GPU=1
  else
    fail "nvidia-smi: failed (exit $?): the driver does not answer"
  fi
else
  say "SKIP: no nvidia-smi on this machine: the GPU parts are skipped (tests must skip, the daemon must say why)"
fi

# ---- 2. the pack ---------------------------------------------------------------------
# The archive, when there is one, unpacked afresh (a folder beside it may be
# stale); else the folder.
UNPACKED=""
DIR=""
trap 'rm -rf ${UNPACKED:+"$UNPACKED"} ${DIR:+"$DIR"}' EXIT
if [ -f "$PACK.tar.xz" ]; then
  UNPACKED=$(mktemp -d /tmp/tensord-gpu-pack-XXXXXX)
  # tar needs the xz program for .xz; Python's tarfile (lzma is built in)
  # serves where the machine lacks it.
  if { command -v xz > /dev/null 2>&1 && tar -C "$UNPACKED" -xJf "$PACK.tar.xz"; } ||
     python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$PACK.tar.xz" "$UNPACKED"; then
    say "unpacked $PACK.tar.xz ($(du -sm "$PACK.tar.xz" | cut -f1) MiB) into $UNPACKED"
    PACK="$UNPACKED/$(basename "$PACK")"
  else
    fail "pack: cannot unpack $PACK.tar.xz"
  fi
fi
PACK=$(cd "$PACK" 2>/dev/null && pwd || echo "$PACK")
if [ ! -f "$PACK/MANIFEST" ]; then
  fail "pack: $PACK/MANIFEST missing: run scripts/gpu-pack.sh on the build machine and carry gpu-pack.tar.xz"
  say "FAILED: ${FAILED[*]} ($(elapsed) s)"
  exit 1
fi
sed 's/^/  manifest: /' "$PACK/MANIFEST"
need=$(sed -n 's/^glibc_needed=//p' "$PACK/MANIFEST")
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
newest=$(printf '%s\n%s\n' "$need" "$have" | sort -t. -k1,1n -k2,2n -k3,3n | tail -1)
LIBPATH="$PACK/lib"
LOADER=()
EXCLUDE=""
# PACKED_GLIBC=1 takes the pack's anyway (to test that path anywhere).
if [ -n "$have" ] && [ "$newest" = "$have" ] && [ "${PACKED_GLIBC:-0}" != 1 ]; then
  say "glibc $have here, $need needed: the machine's"
else
  # One libc per process: the pack's, with its own loader, before its libraries.
  say "glibc ${have:-unknown} here, $need needed: the pack's copy, through its loader"
  LIBPATH="$PACK/glibc:$LIBPATH"
  LOADER=("$PACK/glibc/ld-linux-x86-64.so.2" --library-path "$LIBPATH")
  # A death test's child process executes the test binary again, through
  # the machine's loader, which cannot load the pack's libc.
  EXCLUDE=":-*AFaultIsReportedAsTheDeviceFailing*"
  say "SKIP: CudaGpuTest.AFaultIsReportedAsTheDeviceFailing (its child process would need the machine's glibc)"
fi
# The machine's cuBLAS: found by the loader's own search (ld.so.cache), else
# in the CUDA toolkit's folders or PyTorch's nvidia wheels.
if [ "$GPU" = 1 ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so\.13 '; then
  cublas=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
           $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cu13", "cublas")))' 2>/dev/null); do
    if [ -e "$d/libcublas.so.13" ]; then cublas=$d; break; fi
  done
  if [ -n "$cublas" ]; then
    say "cuBLAS: $cublas/libcublas.so.13 (joins the library path)"
    LIBPATH="$LIBPATH:$cublas"
    [ ${#LOADER[@]} -gt 0 ] && LOADER=("$PACK/glibc/ld-linux-x86-64.so.2" --library-path "$LIBPATH")
  else
    say "cuBLAS: libcublas.so.13 not found on this machine: matrix products on cuda will fail and say so"
  fi
fi
DIR=$(mktemp -d /tmp/tensord-gpu-check-XXXXXX)
# run BIN ARGS...: a packed binary with the packed libraries and nothing of
# this shell's environment but what the checks set, in place of the calling
# (sub)shell: `run tensord ... &` makes $! the daemon's own process. run_for
# SECONDS BIN ARGS...: the same as a child, killed after SECONDS (exit 124).
run() {
  local bin=$1
  shift
  exec env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" LD_LIBRARY_PATH="$LIBPATH" TENSORD_BIN="$PACK/bin/tensord" \
    ${CUDA_VISIBLE_DEVICES:+CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES} \
    "${LOADER[@]}" "$PACK/bin/$bin" "$@"
}
run_for() {
  local seconds=$1 bin=$2
  shift 2
  timeout --kill-after=5 "$seconds" env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" LD_LIBRARY_PATH="$LIBPATH" \
    TENSORD_BIN="$PACK/bin/tensord" ${CUDA_VISIBLE_DEVICES:+CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES} \
    "${LOADER[@]}" "$PACK/bin/$bin" "$@"
}
# The whole check stays under 8 minutes: 7.5 for the steps after the pack.
# Each step after the C++ tests keeps its share of BUDGET (seconds): the C++
# tests get the rest; a step that ends early leaves its time to the next.
BUDGET=460
KEEP_DAEMON=40 KEEP_PYTHON=110 KEEP_DIGITS=40 KEEP_BENCH=90
if ! run_for 30 tensord --version; then
  fail "pack: tensord --version does not run with the packed libraries"
fi

# ---- 3. the CUDA tests ---------------------------------------------------------------
TESTS=$(sed -n 's/^tests=//p' "$PACK/MANIFEST")
for t in $TESTS; do
  out=$(mktemp)
  left=$((BUDGET - KEEP_DAEMON - KEEP_PYTHON - KEEP_DIGITS - KEEP_BENCH - $(elapsed)))
  [ "$left" -gt 240 ] && left=240
  if [ "$left" -lt 10 ]; then
    fail "$t: no time left"
    continue
  fi
  say "$t --gtest_filter='*Cuda*$EXCLUDE' (at most $left s; $(elapsed) s so far)"
  run_for "$left" "$t" --gtest_filter="*Cuda*$EXCLUDE" --gtest_color=no 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  # One line per test as it ends: "[  SKIPPED ] Suite.Test (0 ms)".
  passed=$(grep -c '^\[       OK \] .* ([0-9]* ms)$' "$out" || true)
  skipped=$(grep -c '^\[  SKIPPED \] .* ([0-9]* ms)$' "$out" || true)
  failed=$(grep -c '^\[  FAILED  \] .* ([0-9]* ms)$' "$out" || true)
  say "$t: exit $rc; $passed passed, $skipped skipped, $failed failed"
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && say "$t: timed out"
    fail "$t"
  elif [ "$GPU" = 1 ] && grep -q 'no CUDA device' "$out"; then
    fail "$t: CUDA tests skipped on a machine with a GPU: $(grep -m1 -o 'no CUDA device.*' "$out")"
  elif [ "$passed" -eq 0 ] && { [ "$GPU" = 1 ] || [ "$skipped" -eq 0 ]; }; then
    # Without a GPU a binary whose every test needs one skips them all,
    # visibly: that is a pass of the pack, not of the GPU.
    fail "$t: no test ran"
  fi
  rm -f "$out"
done

# ---- 4. the daemon on the GPU ----------------------------------------------------------
SOCK="$DIR/td.sock"
say "tensord serve --listen unix:$SOCK ($(elapsed) s so far)"
run tensord serve --listen "unix:$SOCK" > "$DIR/stdout" 2> "$DIR/stderr" &
PID=$!
ready=0
for _ in $(seq 1 300); do  # 30 s: a first CUDA context can take a while
  if grep -q '^tensord: listening on' "$DIR/stdout" 2>/dev/null; then ready=1; break; fi
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
if [ "$ready" = 1 ]; then
  kill -TERM "$PID"
else
  fail "tensord: not listening within 30 s"
  kill -KILL "$PID" 2>/dev/null || true
fi
for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$PID" 2>/dev/null || true
wait "$PID"
rc=$?
sed 's/^/  tensord: /' "$DIR/stdout" "$DIR/stderr"
if [ "$ready" = 1 ] && [ "$rc" -ne 0 ]; then fail "tensord: exit $rc after SIGTERM (0 expected)"; fi
if [ "$GPU" = 1 ]; then
  if grep -q 'CUDA devices: cuda:0 ' "$DIR/stderr"; then
    say "tensord serves $(grep -o 'CUDA devices: [^;]*' "$DIR/stderr" | head -1)"
  else
    fail "tensord: its log does not list cuda:0 ($(grep -o 'no CUDA device.*\|cuda:0 is not served.*' "$DIR/stderr" | head -1))"
  fi
else
  if grep -q 'no CUDA device: ' "$DIR/stderr"; then
    say "SKIP: tensord on a GPU: $(grep -o 'no CUDA device: .*' "$DIR/stderr" | head -1)"
  else
    fail "tensord: no GPU here, and its log does not say why"
  fi
fi

# ---- 5. the Python client's device suites, with the pack's Python -------------------
# Everything from the pack: the interpreter with its standard library and
# packages only, the client (TENSORD_PYTHON_CLIENT: conftest.py would take
# the working tree's, which has no _C) and the daemon the suites start; no
# PyTorch (the OpInfo database then holds None for it, and the device suites
# compare with tensord's own CPU). With the
# pack's glibc, the wrapper PACK/bin/python3.11 goes through its loader
# (TENSORD_PACKED_GLIBC=1), and so does the daemon, through a wrapper here:
# LD_LIBRARY_PATH cannot hold the pack's libc, which the machine's own
# programs (bash) would then load.
PYTHON="$PACK/bin/python3.11"
PYDAEMON="$PACK/bin/tensord"
PYGLIBC=""
if [ ${#LOADER[@]} -gt 0 ]; then
  PYGLIBC=1
  PYDAEMON="$DIR/tensord"
  printf '#!/bin/bash\nexec %q --library-path %q %q "$@"\n' "${LOADER[0]}" "$LIBPATH" "$PACK/bin/tensord" > "$PYDAEMON"
  chmod +x "$PYDAEMON"
fi
# run_py SECONDS [NAME=VALUE...] PROGRAM ARGS...: as run_for, with the pack's Python set up.
run_py() {
  local seconds=$1
  shift
  timeout --kill-after=5 "$seconds" env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" LD_LIBRARY_PATH="${LIBPATH#"$PACK/glibc:"}" \
    TENSORD_BIN="$PYDAEMON" TENSORD_PYTHON="$PYTHON" TENSORD_PYTHON_CLIENT="$PACK/python-client" \
    PYTHONPATH="$PACK/python-client" PYTHONPYCACHEPREFIX="$DIR/pycache" ${PYGLIBC:+TENSORD_PACKED_GLIBC=1} \
    ${CUDA_VISIBLE_DEVICES:+CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES} "$@"
}
PYOK=1
if [ ! -x "$PYTHON" ]; then
  fail "python: $PYTHON missing: a pack made before gpu-pack.sh packed Python"
  PYOK=0
else
  say "python: $PYTHON${PYGLIBC:+ (with the glibc of the pack, through its loader)} ($(elapsed) s so far)"
  # Every module from the pack, and nothing of the machine's Python on the path.
  if ! run_py 30 "$PYTHON" -c '
import os, sys
pack = os.path.realpath(sys.argv[1]) + os.sep
import numpy, pytest, tensord
print(f"Python {sys.version.split()[0]} from {sys.prefix}; numpy {numpy.__version__}, pytest {pytest.__version__}, "
      f"tensord from {os.path.dirname(tensord.__file__)}")
stray = [m.__name__ + ": " + m.__file__ for m in (numpy, pytest, tensord) if not os.path.realpath(m.__file__).startswith(pack)]
stray += [p for p in sys.path if p and not os.path.realpath(p).startswith(pack)]
if stray:
    sys.exit(f"outside the pack: {stray}")' "$PACK" 2>&1 | sed 's/^/  python: /'; then
    fail "python: the pack's Python does not start or sees more than the pack${PYGLIBC:+ (through the glibc and loader of the pack)}"
    PYOK=0
  fi
fi
if [ "$PYOK" = 1 ]; then
  SUITES=(tests/python/test_device_opinfo.py tests/python/test_device_gradcheck.py tests/python/test_device_hostile.py
          tests/python/test_cuda_api.py tests/python/test_backends.py)
  left=$((BUDGET - KEEP_DIGITS - KEEP_BENCH - $(elapsed)))
  [ "$left" -gt 300 ] && left=300
  out="$DIR/pytest.out"
  # The files, not tests/python with -k: collecting the others would import PyTorch for real.
  say "pytest ${SUITES[*]##*/} (at most $left s; $(elapsed) s so far)"
  run_py "$left" PYTHONPATH="$PACK/python-client" "$PYTHON" -m pytest "${SUITES[@]}" \
    -q -p no:cacheprovider -rs --color=no 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  summary=$(grep -E '^[0-9]+ [a-z]+.* in [0-9.]+s' "$out" | tail -1)
  count() { grep -oE "(^| )[0-9]+ $1" <<< "$summary" | tr -dc '0-9'; }
  passed=$(count passed) skipped=$(count skipped) failed=$(count failed) errors=$(count 'errors?')
  say "python suites: exit $rc; ${passed:-0} passed, ${skipped:-0} skipped, ${failed:-0} failed${errors:+, $errors errors}" \
    "(${summary:-no summary line})"
  nocuda=$(grep -c '^SKIPPED .*no CUDA device' "$out" || true)
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && say "python suites: timed out"
    fail "python: the device suites failed (exit $rc)"
  elif [ "${passed:-0}" -eq 0 ]; then
    fail "python: no test passed"
  elif [ "$nocuda" -gt 0 ]; then
    if [ "$GPU" = 1 ]; then
      fail "python: CUDA tests skipped on a machine with a GPU: $(grep -m1 -o 'no CUDA device.*' "$out")"
    else
      say "SKIP: the suites' CUDA half ($nocuda skip lines): $(grep -m1 -o 'no CUDA device.*' "$out")"
    fi
  fi
fi

# ---- 6. the digits MLP, with the pack's Python ------------------------------------------
if [ "$PYOK" = 1 ]; then
  if [ "$GPU" = 1 ]; then DIGITS=(--device cuda); else DIGITS=(--device cpu --epochs 2 --min-accuracy 0); fi
  left=$((BUDGET - KEEP_BENCH - $(elapsed)))
  [ "$left" -gt 120 ] && left=120
  if [ "$left" -lt 10 ]; then
    fail "digits: no time left"
  else
    say "examples/digits_mlp.py --no-torch --data PACK/digits.npz ${DIGITS[*]} (at most $left s; $(elapsed) s so far)"
    # The progress bar redraws with \r: each line as it ended.
    run_py "$left" "$PYTHON" examples/digits_mlp.py --no-torch --data "$PACK/digits.npz" "${DIGITS[@]}" 2>&1 |
      sed 's/.*\r//' | tee "$DIR/digits.out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
      [ "$rc" -eq 124 ] && say "digits: timed out"
      fail "digits: exit $rc"
    else
      say "digits: $(grep -m1 -o 'test accuracy: .*' "$DIR/digits.out") on ${DIGITS[1]}"
    fi
    [ "$GPU" = 1 ] || say "SKIP: the digits MLP on a GPU (it ran on the CPU, as a check of the pack)"
  fi
fi

# ---- 7. a kernel artifact's CUDA kernels, with the pack's Python ----------------------------
if [ "$PYOK" = 1 ]; then
  if [ ! -f "$PACK/mylib.tdk" ]; then
    fail "custom kernel: the pack has no mylib.tdk (made by scripts/gpu-pack.sh)"
  else
    if [ "$GPU" = 1 ]; then KERNEL_ARGS=(--device cuda); else KERNEL_ARGS=(--device cpu --epochs 1 --min-accuracy 0); fi
    left=$((BUDGET - KEEP_BENCH - $(elapsed)))
    [ "$left" -gt 90 ] && left=90
    if [ "$left" -lt 10 ]; then
      fail "custom kernel: no time left"
    else
      say "examples/custom_kernel/train.py --artifact PACK/mylib.tdk ${KERNEL_ARGS[*]} (at most $left s)"
      run_py "$left" "$PYTHON" examples/custom_kernel/train.py --artifact "$PACK/mylib.tdk" \
        --data "$PACK/digits.npz" "${KERNEL_ARGS[@]}" 2>&1 | tee "$DIR/custom_kernel.out"
      rc=${PIPESTATUS[0]}
      if [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 124 ] && say "custom kernel: timed out"
        fail "custom kernel: exit $rc"
      else
        say "custom kernel: $(grep -m1 -o 'max |difference| .*' "$DIR/custom_kernel.out"); $(grep -m1 -o 'test accuracy: .*' "$DIR/custom_kernel.out") on ${KERNEL_ARGS[1]}"
      fi
      [ "$GPU" = 1 ] || say "SKIP: the artifact's CUDA kernels (no GPU: it ran on the CPU, as a check of the pack)"
    fi
  fi
fi

# ---- 8. the CUDA benchmarks ---------------------------------------------------------------
# Figures 8-10 (C++, peers in the same process) and 11-12 (Python beside the
# machine's PyTorch); rows as JSON beside the log. On a GPU a SKIP fails the
# step; without one a SKIP is what each must say.
BENCH_DIR=$(dirname "$LOG")
bench_skip() {  # NAME OUTPUT: a SKIP is right only without a GPU
  if grep -q 'SKIP:' "$2"; then
    if [ "$GPU" = 1 ]; then fail "$1: skipped on a machine with a GPU: $(grep -m1 -o 'SKIP:.*' "$2")"; return 0; fi
    say "SKIP: $1 ($(grep -m1 -o 'SKIP:.*' "$2"))"
  elif [ "$GPU" != 1 ]; then
    fail "$1: no GPU here, and it did not say SKIP"
  fi
}
if [ -x "$PACK/bin/cuda_bench" ]; then
  left=$((BUDGET - KEEP_BENCH / 2 - $(elapsed)))
  [ "$left" -gt 120 ] && left=120
  if [ "$left" -lt 15 ]; then
    fail "cuda_bench: no time left"
  else
    say "cuda_bench --json $BENCH_DIR/cuda_bench.json (at most $left s; $(elapsed) s so far)"
    run_for "$left" cuda_bench --tensord "$PACK/bin/tensord" --json "$BENCH_DIR/cuda_bench.json" 2>&1 | tee "$DIR/cuda_bench.out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
      [ "$rc" -eq 124 ] && say "cuda_bench: timed out"
      fail "cuda_bench: exit $rc"
    else
      bench_skip cuda_bench "$DIR/cuda_bench.out"
    fi
  fi
else
  fail "cuda_bench: not in the pack (a build without CUDA, or a pack made before it was packed)"
fi
if [ "$PYOK" = 1 ]; then
  # The peer's Python: the machine's, with none of the pack's environment.
  TORCH_PY=${TORCH_PYTHON:-}
  if [ -z "$TORCH_PY" ]; then
    for p in $(type -ap python3) /opt/torch/.venv/bin/python3; do
      if [ -x "$p" ] && "$p" -c 'import torch' 2> /dev/null; then TORCH_PY=$p; break; fi
    done
  fi
  left=$((BUDGET - $(elapsed)))
  [ "$left" -gt 150 ] && left=150
  if [ -z "$TORCH_PY" ]; then
    if [ "$GPU" = 1 ]; then fail "gpu_py_bench: no python3 with PyTorch on this machine (set TORCH_PYTHON)"; else
      say "SKIP: gpu_py_bench: no python3 with PyTorch here"; fi
  elif [ "$left" -lt 15 ]; then
    fail "gpu_py_bench: no time left"
  else
    printf '#!/bin/sh\nexec env -u LD_LIBRARY_PATH -u PYTHONHOME -u PYTHONPATH -u PYTHONNOUSERSITE -u PYTHONPYCACHEPREFIX %q "$@"\n' \
      "$TORCH_PY" > "$DIR/torch-python"
    chmod +x "$DIR/torch-python"
    say "bench/gpu_py_bench.py --torch-python $TORCH_PY (at most $left s; $(elapsed) s so far)"
    run_py "$left" PYTHONUNBUFFERED=1 "$PYTHON" bench/gpu_py_bench.py --device cuda --torch-python "$DIR/torch-python" \
      --json "$BENCH_DIR/gpu_py_bench.json" 2>&1 | tee "$DIR/gpu_py_bench.out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
      [ "$rc" -eq 124 ] && say "gpu_py_bench: timed out"
      fail "gpu_py_bench: exit $rc"
    else
      bench_skip gpu_py_bench "$DIR/gpu_py_bench.out"
    fi
  fi
fi

# ---- summary -------------------------------------------------------------------------
if [ ${#FAILED[@]} -eq 0 ]; then
  say "PASSED ($([ "$GPU" = 1 ] && echo "on a GPU" || echo "without a GPU: GPU parts skipped"); $(elapsed) s)"
  exit 0
fi
say "FAILED: ${FAILED[*]} ($(elapsed) s)"
exit 1
