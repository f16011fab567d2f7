#!/usr/bin/env bash
# Installs tensord's build and test dependencies from Debian 12's archive.
# Idempotent: installs only what is missing; uses sudo when not root.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libdlpack-dev libgtest-dev libgmock-dev googletest libbenchmark-dev
  libssl-dev nlohmann-json3-dev libelf-dev
  pybind11-dev python3-dev python3-numpy python3-pytest
  libopenblas-dev
  python3-sklearn python3-torch python3-tqdm
  clang-14 libfuzzer-14-dev libomp-14-dev
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
