#!/usr/bin/env bash
# The benchmark's own dependency: Debian's PyTorch (python3-torch), for bench/vs_pytorch only;
# make run and make test do not need it.
set -euo pipefail
if dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-torch
