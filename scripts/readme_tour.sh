#!/usr/bin/env bash
# Runs the README's tour command by command, as a new user would type them: every ```sh block
# between the markers <!-- tour:begin --> and <!-- tour:end --> of README.md, in order, in a
# scratch folder that holds links to the checkout's configs/ and build/ (so runs/ and data/ land
# in the scratch folder, not in the checkout). Stops at the first command that fails, naming it.
#
#   scripts/readme_tour.sh [SCRATCH_DIR]     # default: a fresh mktemp -d, removed afterwards
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch="${1:-}"
cleanup=""
if [ -z "$scratch" ]; then
  scratch="$(mktemp -d -t brigade-tour-XXXXXX)"
  cleanup="$scratch"
fi
trap '[ -n "$cleanup" ] && rm -rf "$cleanup"' EXIT
mkdir -p "$scratch"
ln -sfn "$repo/configs" "$scratch/configs"
ln -sfn "$repo/build" "$scratch/build"
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}"

# The tour's commands, one per line (backslash continuations joined).
script="$scratch/tour.sh"
awk '
  /<!-- tour:begin -->/ { in_tour = 1; next }
  /<!-- tour:end -->/ { in_tour = 0; next }
  in_tour && /^```sh/ { in_block = 1; next }
  in_tour && /^```/ { in_block = 0; next }
  in_block { print }
' "$repo/README.md" > "$script"
[ -s "$script" ] || { echo "readme_tour: no tour found in README.md" >&2; exit 2; }

cd "$scratch"
# One shell for the whole tour, as a user's terminal: what one command exports, the next sees,
# and a command sent to the background with & is waited for by a later `wait`. Each command is
# echoed ("+ ...") before it runs; the first that fails stops the tour with its status.
bash -euo pipefail -x "$script"
echo "readme_tour: every command of the tour ran"
