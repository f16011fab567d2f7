#!/usr/bin/env bash
# Development-mode install: puts `tensord` on PATH (a link to the built
# daemon) and makes `import tensord` work from any directory for Debian's
# /usr/bin/python3 (a .pth file pointing at python-client/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

$SUDO ln -sf "$build/bin/tensord" /usr/local/bin/tensord
site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
$SUDO mkdir -p "$site"
echo "$root/python-client" | $SUDO tee "$site/tensord-dev.pth" >/dev/null
echo "install-dev: tensord -> $build/bin/tensord; $site/tensord-dev.pth -> $root/python-client"
