#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine, from a build made
# here (Debian): the test binaries that have CUDA tests (names containing
# "Cuda"), the tensord daemon, and every shared library they load that a
# GPU machine may lack (gRPC, protobuf, abseil, OpenBLAS, libstdc++, ...),
# into PACK (default gpu-pack/, git-ignored), binaries stripped of debug
# information, and the same as PACK.tar.xz: what travels (OpenBLAS alone is
# 36 MiB; the archive is about an eighth of the folder). glibc is not on the
# library path there (the machine's own serves, if new enough); a copy goes
# into PACK/glibc/ for gpu-check.sh to fall back to when the machine's glibc
# is older than the pack needs.
#
#   scripts/gpu-pack.sh [BUILD_DIR] [PACK]     # defaults: build, gpu-pack
#   env -i LD_LIBRARY_PATH=gpu-pack/lib gpu-pack/bin/runtime_tests --gtest_filter='*Cuda*'
#   (device machine)  scripts/gpu-check.sh     # with gpu-pack.tar.xz carried
#
# The GPU machines have no network and take at most 64 MiB per call: the
# archive must stay under MAX_MIB (default 60). Builds the binaries it needs
# (ninja, two jobs) unless NO_BUILD=1.
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
  targets=(tensord)
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

# glibc's own libraries: the GPU machine's serve (one libc per process).
GLIBC_RE='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1|libresolv\.so\.2|libanl\.so\.1|libnsl\.so\.1)$'
# The NVIDIA driver's: the machine's, never ours (cudart is linked statically
# and loads libcuda.so.1 itself).
DRIVER_RE='^(libcuda\.so.*|libnvidia-.*)$'

rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/glibc"

# Every library the binaries load (ldd: the whole closure), by soname.
declare -A LIBS=()
for f in "$BUILD/bin/tensord" "${TESTS[@]/#/$BUILD/tests/}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [ -f "$path" ] || die "ldd $f: $name not found"
    LIBS["$name"]="$path"
  done < <(ldd "$f")
done

for name in "${!LIBS[@]}"; do
  path=${LIBS[$name]}
  if [[ $name =~ $DRIVER_RE ]]; then continue; fi
  if [[ $name =~ $GLIBC_RE ]]; then
    cp -L "$path" "$PACK/glibc/$name"
  else
    strip --strip-debug -o "$PACK/lib/$name" "$(readlink -f "$path")"
  fi
done
# The loader, for the fallback (ldd lists it by path).
cp -L /lib64/ld-linux-x86-64.so.2 "$PACK/glibc/ld-linux-x86-64.so.2"

for f in tensord; do strip --strip-debug -o "$PACK/bin/$f" "$BUILD/bin/$f"; done
for t in "${TESTS[@]}"; do strip --strip-debug -o "$PACK/bin/$t" "$BUILD/tests/$t"; done

# The newest glibc symbol version anything in the pack needs.
need=$( (objdump -T "$PACK"/bin/* "$PACK"/lib/* 2>/dev/null || true) | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' |
  sort -t. -k1,1n -k2,2n -k3,3n -u | tail -1)
{
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo +changes)"
  echo "glibc_needed=$need"
  echo "glibc_here=$(getconf GNU_LIBC_VERSION | awk '{print $2}')"
  echo "cuda_architectures=$(grep -o 'TENSORD_CUDA_ARCHITECTURES=[^ ]*' "$BUILD/build.ninja" | head -1 | tr -d '\\"' |
    cut -d= -f2)"
  echo "tests=${TESTS[*]}"
} > "$PACK/MANIFEST"

# xz, not gzip: the CUDA kernels' machine code is in every binary that links
# them, and xz finds the repeats across files that gzip's 32 KiB window
# cannot (measured: 35 MiB against gzip's 60 for the same folder). It takes
# a few minutes on two cores.
rm -f "$PACK.tar.gz" "$PACK.tar.xz"
tar -C "$(dirname "$PACK")" -cf - "$(basename "$PACK")" | xz -T2 -6 > "$PACK.tar.xz"
mib=$(du -sm "$PACK" | cut -f1)
archive_mib=$(( ($(stat -c %s "$PACK.tar.xz") + (1 << 20) - 1) >> 20 ))
echo "gpu-pack: $PACK: ${#TESTS[@]} test binaries (${TESTS[*]}), tensord, $(ls "$PACK/lib" | wc -l) libraries," \
  "glibc >= $need needed; ${mib} MiB, $PACK.tar.xz ${archive_mib} MiB"
(cd "$PACK" && du -sh bin/* lib glibc | sort -h | tail -6 | sed 's/^/  /')
[ "$archive_mib" -le "$MAX_MIB" ] ||
  die "$PACK.tar.xz is ${archive_mib} MiB, over ${MAX_MIB} MiB (a device call carries 64 MiB)"
