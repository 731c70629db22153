#!/usr/bin/env bash
# The default job (`make run`: configs/default.toml on `brigade launch --nproc 2`) with each
# GEMM backend, train.kernels = "onednn" and "openblas", alternated run by run (onednn,
# openblas, onednn, ...) so that the machine's drift falls on both. Each run trains STEPS steps
# (evaluation and checkpoints only at the end); the figure per run is the median ms/step of
# steps 6..STEPS from metrics.jsonl (rank 0's step time, which waits for the slower rank), and
# the verdict the median over runs of each backend, with the ratio.
#
#   bench/kernels_default_job.sh [BUILD_DIR] [STEPS] [ROUNDS]
set -euo pipefail
build=${1:-build/release}
steps=${2:-100}
rounds=${3:-3}
bin=$build/brigade
out=$(mktemp -d /tmp/brigade-kernels-XXXXXX)
trap 'rm -rf "$out"' EXIT

median_ms() {  # median ms_per_step over the step records after the first 5
  grep '"tokens_per_s"' "$1" | tail -n +6 | sed -E 's/.*"ms_per_step":([0-9.e+-]+).*/\1/' |
    sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

declare -A runs
for r in $(seq 1 "$rounds"); do
  for k in onednn openblas; do
    "$bin" launch --nproc 2 -- train configs/default.toml --set train.kernels="$k" \
      --set train.steps="$steps" --set train.eval_every=0 --set train.ckpt_every=0 \
      --set train.log_every=1000 --set run.out_dir="$out/$k$r" > "$out/$k$r.log" 2>&1
    ms=$(median_ms "$out/$k$r/default/metrics.jsonl")
    loss=$(grep '"final"' "$out/$k$r/default/metrics.jsonl" | sed -E 's/.*"val_loss":([0-9.e+-]+).*/\1/')
    echo "round $r $k: $ms ms/step (median of steps 6-$steps), final val_loss $loss"
    runs[$k]+="$ms "
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
a=$(med "${runs[onednn]}")
b=$(med "${runs[openblas]}")
echo "default job, 2 ranks: onednn $a ms/step, openblas $b ms/step (medians of $rounds runs);" \
  "openblas / onednn = $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b / a}')"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
