#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine, from a build made
# here (Debian): the test binaries that have CUDA tests (names containing
# "Cuda"), the tensord daemon, bin/cuda_bench (the CUDA benchmarks), and every shared library they load that a
# GPU machine may lack (gRPC, protobuf, abseil, OpenBLAS, libstdc++, ...),
# into PACK (default gpu-pack/, git-ignored), binaries stripped of debug
# information, and the same as PACK.tar.xz: what travels (OpenBLAS alone is
# 36 MiB; the archive is about an eighth of the folder). glibc is not on the
# library path there (the machine's own serves, if new enough); a copy goes
# into PACK/glibc/ for gpu-check.sh to fall back to when the machine's glibc
# is older than the pack needs.
#
# The Python side too: the machines' Python (3.12) cannot load the client's
# _C module (built for Debian's 3.11 against Debian's gRPC), so the pack
# carries Debian's /usr/bin/python3.11 (PACK/python/bin), its standard
# library less tests, GUIs and installers (PACK/python/lib/python3.11),
# Debian's numpy less its tests, pytest and what it imports
# (PACK/python/lib/python3/dist-packages), the client package of BUILD's
# source tree with its _C (PACK/python-client/tensord) and scikit-learn's
# digits (PACK/digits.npz, for the examples' --data); their libraries join
# PACK/lib. PACK/bin/python3.11 runs that Python from wherever the pack
# lies, with nothing of the machine's Python (the tests and examples come
# with the repository's working tree, not the pack).
#
#   scripts/gpu-pack.sh [BUILD_DIR] [PACK]     # defaults: build, gpu-pack
#   env -i LD_LIBRARY_PATH=gpu-pack/lib gpu-pack/bin/runtime_tests --gtest_filter='*Cuda*'
#   env -i PYTHONPATH=gpu-pack/python-client gpu-pack/bin/python3.11 -c 'import tensord'
#   (device machine)  scripts/gpu-check.sh     # with gpu-pack.tar.xz carried
#
# The GPU machines have no network and take at most 64 MiB per call: the
# archive must stay under MAX_MIB (default 60). Builds the binaries and the
# _C module it needs (ninja, two jobs) unless NO_BUILD=1; needs Debian's
# python3.11, and python3-sklearn for the digits.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${1:-build}
PACK=${2:-gpu-pack}
MAX_MIB=${MAX_MIB:-60}

die() { echo "gpu-pack: $*" >&2; exit 1; }
[ -f "$BUILD/build.ninja" ] || die "$BUILD is not a configured build directory (cmake -S . -B $BUILD -G Ninja)"
if ! grep -q 'backend_cuda' "$BUILD/build.ninja"; then
  die "$BUILD was configured without CUDA (no backend_cuda): nothing to check on a GPU"
fi

# The test binaries: every one the build defines (tests/CMakeLists.txt).
# kernels_tests is left out: its CUDA-named tests replay the kernels on the
# host and run in every CI build; cuda_kernels_tests runs them on the GPU.
CANDIDATES=(runtime_tests cuda_kernels_tests server_tests client_tests meta_tests transport_tests)
if [ "${NO_BUILD:-0}" != 1 ]; then
  targets=(tensord _C cuda_bench)
  for t in "${CANDIDATES[@]}"; do
    grep -q "^build tests/$t:" "$BUILD/build.ninja" && targets+=("$t")
  done
  ninja -C "$BUILD" -j2 "${targets[@]}"
fi

# Those that have CUDA tests: asked, not guessed (listing needs no GPU).
TESTS=()
for t in "${CANDIDATES[@]}"; do
  bin="$BUILD/tests/$t"
  [ -x "$bin" ] || continue
  # The list is read whole first: `grep -q` in a pipe would stop reading at
  # the first match, and a long list then dies of SIGPIPE (pipefail).
  list=$("$bin" --gtest_list_tests --gtest_filter='*Cuda*' 2>/dev/null || true)
  if grep -q '^  ' <<< "$list"; then TESTS+=("$t"); fi
done
[ ${#TESTS[@]} -gt 0 ] || die "no test binary in $BUILD/tests has tests named *Cuda*"
[ -x "$BUILD/bin/tensord" ] || die "$BUILD/bin/tensord is missing"
[ -x "$BUILD/bin/cuda_bench" ] || die "$BUILD/bin/cuda_bench is missing (bench/CMakeLists.txt builds it with CUDA)"

# The Python client as this build made it: its _C module is written into the
# source tree the build was configured from (python-client/CMakeLists.txt),
# and its Python files must be that tree's too.
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
CLIENT="$SRC/python-client/tensord"
PY=/usr/bin/python3.11
CMODS=("$CLIENT"/_C.cpython-311-*.so)
CMOD=${CMODS[0]}
[ -f "$CMOD" ] || die "no _C module in $CLIENT (build the _C target of $BUILD)"
[ -x "$PY" ] || die "$PY is missing: the client's _C module is built for Debian's Python 3.11"
/usr/bin/python3 -c 'import sklearn' 2> /dev/null || die "/usr/bin/python3 has no scikit-learn (python3-sklearn): digits.npz comes from it"

# glibc's own libraries: the GPU machine's serve (one libc per process).
GLIBC_RE='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1|libresolv\.so\.2|libanl\.so\.1|libnsl\.so\.1)$'
# The NVIDIA driver's: the machine's, never ours (cudart is linked statically
# and loads libcuda.so.1 itself).
DRIVER_RE='^(libcuda\.so.*|libnvidia-.*)$'
# cuBLAS (cuda_bench links it; the daemon loads it): the machine's CUDA
# toolkit's, as the driver is the machine's; hundreds of MiB otherwise.
CUBLAS_RE='^libcublas(Lt)?\.so.*$'

rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/glibc"

# ---- Python: Debian's 3.11 with what the client's tests and examples import.
# The GPU machines' own Python (3.12) cannot load _C (built for 3.11 against
# Debian's gRPC): PACK/bin/python3.11 runs the packed interpreter with the
# packed standard library and packages, and nothing of the machine's Python.
# Layout: python/bin/python3.11 (the interpreter), python/lib/python3.11 (the
# standard library), python/lib/python3/dist-packages (numpy, pytest and its
# dependencies: the site directory of the prefix python/), python-client/
# tensord (the client, _C included; on PYTHONPATH only when asked for).
PYP="$PACK/python"
STDLIB="$PYP/lib/python3.11"
SITE="$PYP/lib/python3/dist-packages"
mkdir -p "$PYP/bin" "$STDLIB" "$SITE" "$PACK/python-client"
cp "$PY" "$PYP/bin/python3.11"
cp -a /usr/lib/python3.11/. "$STDLIB/"
# What no test runs: the standard library's own tests, GUIs, installers,
# Debian's site additions (sitecustomize loads apport; dist-packages is a
# path of the machine), the static library, and modules whose C parts need
# libraries left out (OpenSSL, sqlite, curses, readline, Berkeley DB).
(cd "$STDLIB" && rm -rf test idlelib tkinter turtledemo turtle.py ensurepip lib2to3 pydoc_data venv \
  config-3.11-* dist-packages sitecustomize.py sqlite3 curses dbm)
(cd "$STDLIB/lib-dynload" && rm -f _test*.so _ctypes_test.*.so _xx*.so xxlimited*.so _curses*.so readline.*.so \
  _dbm.*.so _gdbm.*.so nis.*.so ossaudiodev.*.so _sqlite3.*.so _ssl.*.so _hashlib.*.so _crypt.*.so)
# Debian's numpy (the one _C and the tests were run with here) without its
# tests, headers and build tools.
cp -a /usr/lib/python3/dist-packages/numpy "$SITE/"
find "$SITE/numpy" -depth -type d -name tests -exec rm -rf {} +
rm -rf "$SITE/numpy/distutils" "$SITE/numpy/core/include" "$SITE/numpy/f2py/src"
# pytest and what `import pytest` loads (measured: a run of the device suites).
for m in _pytest pytest pluggy iniconfig packaging attr py.py; do
  cp -a "/usr/lib/python3/dist-packages/$m" "$SITE/"
done
cp -a "$CLIENT" "$PACK/python-client/"
rm -f "$PACK"/python-client/tensord/_C.*.so
strip --strip-debug -o "$PACK/python-client/tensord/$(basename "$CMOD")" "$CMOD"
find "$PYP" "$PACK/python-client" -depth -name __pycache__ -type d -exec rm -rf {} +
# The digits of examples/digits_*.py for --data (the machines lack scikit-learn).
/usr/bin/python3 -c 'import sys, numpy as np; from sklearn.datasets import load_digits
d = load_digits(); np.savez_compressed(sys.argv[1], X=d.data, y=d.target)' "$PACK/digits.npz"
# The custom-kernel example's artifact, its CUDA kernels in (the GPU machines
# have no compiler: it is built here, as a kernel author builds one for
# users without nvcc), for gpu-check.sh's examples/custom_kernel/train.py --artifact.
"$BUILD/bin/tensord" build-kernel -o "$PACK/mylib.tdk" --cuda-arch 80,90 --cflags -DMYLIB_WITH_CUDA \
  "$SRC/examples/custom_kernel/fused_bias_gelu.cc" "$SRC/examples/custom_kernel/fused_bias_gelu.cu" > /dev/null ||
  die "tensord build-kernel could not build the custom-kernel example's artifact (nvcc?)"
# The entry point: the prefix, the packed libraries, and sys.executable set
# to itself, so that subprocesses of sys.executable take the same way.
# TENSORD_PACKED_GLIBC=1: through the pack's own glibc and loader, for
# machines whose glibc is too old (gpu-check.sh sets it in that case).
cat > "$PACK/bin/python3.11" << 'WRAPPER'
#!/bin/bash
# Debian's Python 3.11 from scripts/gpu-pack.sh, wherever the pack lies: its
# standard library and site directory only (PYTHONHOME; no user site, no
# machine's site-packages), the pack's shared libraries first.
# TENSORD_PACKED_GLIBC=1 runs it with the pack's glibc, through its loader.
pack=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PYTHONHOME="$pack/python" PYTHONNOUSERSITE=1
unset PYTHONSTARTUP PYTHONUSERBASE PYTHONEXECUTABLE PYTHONPLATLIBDIR PYTHONSAFEPATH
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ "${TENSORD_PACKED_GLIBC:-0}" = 1 ]; then
  exec "$pack/glibc/ld-linux-x86-64.so.2" --library-path "$pack/glibc:$LD_LIBRARY_PATH" \
    --argv0 "$pack/bin/python3.11" "$pack/python/bin/python3.11" "$@"
fi
exec -a "$pack/bin/python3.11" "$pack/python/bin/python3.11" "$@"
WRAPPER
chmod +x "$PACK/bin/python3.11"
PYFILES=("$PYP/bin/python3.11")
mapfile -t -O 1 PYFILES < <(find "$PYP" "$PACK/python-client" -name '*.so' | sort)

# Every library the binaries load (ldd: the whole closure), by soname.
declare -A LIBS=()
for f in "$BUILD/bin/tensord" "$BUILD/bin/cuda_bench" "${TESTS[@]/#/$BUILD/tests/}" "${PYFILES[@]}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [ -f "$path" ] || die "ldd $f: $name not found"
    LIBS["$name"]="$path"
  done < <(ldd "$f")
done

for name in "${!LIBS[@]}"; do
  path=${LIBS[$name]}
  if [[ $name =~ $DRIVER_RE || $name =~ $CUBLAS_RE ]]; then continue; fi
  if [[ $name =~ $GLIBC_RE ]]; then
    cp -L "$path" "$PACK/glibc/$name"
  else
    strip --strip-debug -o "$PACK/lib/$name" "$(readlink -f "$path")"
  fi
done
# The loader, for the fallback (ldd lists it by path).
cp -L /lib64/ld-linux-x86-64.so.2 "$PACK/glibc/ld-linux-x86-64.so.2"

for f in tensord cuda_bench; do strip --strip-debug -o "$PACK/bin/$f" "$BUILD/bin/$f"; done
for t in "${TESTS[@]}"; do strip --strip-debug -o "$PACK/bin/$t" "$BUILD/tests/$t"; done

# The packed Python runs, on nothing but the pack: versions for the manifest
# (no .pyc files: they would add 2 MiB to the archive).
pyinfo=$(cd / && env -i PATH=/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PACK/python-client" "$PACK/bin/python3.11" -c '
import platform, numpy, pytest, tensord
print(f"python={platform.python_version()} numpy={numpy.__version__} pytest={pytest.__version__}")') ||
  die "the packed Python does not import numpy, pytest and tensord (env -i $PACK/bin/python3.11)"

# The newest glibc symbol version anything in the pack needs.
need=$( (objdump -T "$PACK"/bin/* "$PACK"/lib/* "${PYFILES[@]}" 2>/dev/null || true) | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' |
  sort -t. -k1,1n -k2,2n -k3,3n -u | tail -1)
{
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo +changes)"
  echo "glibc_needed=$need"
  echo "glibc_here=$(getconf GNU_LIBC_VERSION | awk '{print $2}')"
  echo "cuda_architectures=$(grep -o 'TENSORD_CUDA_ARCHITECTURES=[^ ]*' "$BUILD/build.ninja" | head -1 | tr -d '\\"' |
    cut -d= -f2)"
  echo "tests=${TESTS[*]}"
  echo "$pyinfo"
  echo "python_client=$SRC/python-client"
} > "$PACK/MANIFEST"

# xz, not gzip: the CUDA kernels' machine code is in every binary that links
# them, and xz finds the repeats across files that gzip's 32 KiB window
# cannot (measured: 35 MiB against gzip's 60 for the same folder). It takes
# a few minutes on two cores.
rm -f "$PACK.tar.gz" "$PACK.tar.xz"
tar -C "$(dirname "$PACK")" -cf - "$(basename "$PACK")" | xz -T2 -6 > "$PACK.tar.xz"
mib=$(du -sm "$PACK" | cut -f1)
archive_mib=$(( ($(stat -c %s "$PACK.tar.xz") + (1 << 20) - 1) >> 20 ))
echo "gpu-pack: $PACK: ${#TESTS[@]} test binaries (${TESTS[*]}), tensord, Python 3.11 with numpy, pytest and" \
  "the client, $(ls "$PACK/lib" | wc -l) libraries, glibc >= $need needed; ${mib} MiB, $PACK.tar.xz ${archive_mib} MiB"
(cd "$PACK" && du -sh bin/* lib glibc python python-client | sort -h | tail -8 | sed 's/^/  /')
[ "$archive_mib" -le "$MAX_MIB" ] ||
  die "$PACK.tar.xz is ${archive_mib} MiB, over ${MAX_MIB} MiB (a device call carries 64 MiB)"
