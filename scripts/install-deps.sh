#!/usr/bin/env bash
# Installs every Debian package brigade needs to build, test and run its default jobs.
# Idempotent: installs only what is missing; nothing comes from outside Debian's archive.
#   scripts/install-deps.sh        everything (make test)
#   scripts/install-deps.sh run    what building and the default job need (make run): not the
#                                  packages only tests use, the largest of which is Chromium
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libopenblas-dev          # sgemm: the second GEMM backend (train.kernels = "openblas")
  libdnnl-dev              # oneDNN matmul: the default GEMM backend
  libtoml11-dev            # config files
  nlohmann-json3-dev       # manifests, metrics, safetensors headers
  libcli11-dev             # command line
  libfmt-dev               # formatting
  zlib1g-dev               # gzip (Fashion-MNIST) and crc32 checksums
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  libgloo-dev              # collectives over TCP
  libzmq3-dev cppzmq-dev   # parameter-server and federated messages (ZeroMQ, CURVE)
  libssl-dev               # TLS 1.3 between ranks (comm.transport = "tls")
  libsodium-dev            # DP noise and sampling secrets, secure aggregation, key files
  libgfshare-dev           # secure aggregation: Shamir secret sharing over GF(2^8)
  libcpp-httplib-dev       # brigade serve: the HTTP server (and the tests' client)
  libprotobuf-dev protobuf-compiler  # TensorBoard event files (the published Event schema)
  fortunes                 # default text corpus: /usr/share/games/fortunes
  dataset-fashion-mnist    # image data set: /usr/share/datasets/fashion-mnist
  iproute2                 # network namespaces for slow-link emulation
)
test_packages=(
  python3-protobuf         # tests: an independent reader of TensorBoard event files
  chromium                 # tests: `brigade report` pages opened in a real, headless browser
  openmpi-bin              # mpirun bootstrap test
  strace                   # tests: which files each federated process opens
)

if [ "${1:-}" != "run" ]; then
  packages+=("${test_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
