#!/usr/bin/env bash
# The default job (`make run`: configs/default.toml on `brigade launch --nproc 2`) with one
# config key at two values, alternated run by run (A, B, A, B, ...) so that the machine's drift
# falls on both. Each run trains STEPS steps (evaluation and checkpoints only at the end); the
# figure per run is the median ms/step of steps 6..STEPS from metrics.jsonl (rank 0's step
# time, which waits for the slower rank), its final validation loss and the largest peak
# resident memory of its ranks; the verdict is the median over runs of each value, with the
# ratio B / A of the step times.
#
#   bench/default_job_ab.sh KEY A B [BUILD_DIR] [STEPS] [ROUNDS]
#   bench/default_job_ab.sh train.kernels onednn openblas build/release 100 3
#   bench/default_job_ab.sh train.precision f32 bf16 build/release 100 3
set -euo pipefail
key=$1
a=$2
b=$3
build=${4:-build/release}
steps=${5:-100}
rounds=${6:-3}
bin=$build/brigade
out=$(mktemp -d /tmp/brigade-ab-XXXXXX)
trap 'rm -rf "$out"' EXIT

median_ms() {  # median ms_per_step over the step records after the first 5
  grep '"tokens_per_s"' "$1" | tail -n +6 | sed -E 's/.*"ms_per_step":([0-9.e+-]+).*/\1/' |
    sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

declare -A runs losses
for r in $(seq 1 "$rounds"); do
  for v in "$a" "$b"; do
    "$bin" launch --nproc 2 -- train configs/default.toml --set "$key=\"$v\"" \
      --set train.steps="$steps" --set train.eval_every=0 --set train.ckpt_every=0 \
      --set train.log_every=1000 --set run.out_dir="$out/$v$r" > "$out/$v$r.log" 2>&1
    ms=$(median_ms "$out/$v$r/default/metrics.jsonl")
    loss=$(grep '"final"' "$out/$v$r/default/metrics.jsonl" | sed -E 's/.*"val_loss":([0-9.e+-]+).*/\1/')
    rss=$(grep '"peak_rss_mib_per_rank"' "$out/$v$r/default/metrics.jsonl" |
      sed -E 's/.*"peak_rss_mib_per_rank":\[([^]]*)\].*/\1/' | tr ',' '\n' | sort -g | tail -1)
    echo "round $r $key=$v: $ms ms/step (median of steps 6-$steps), final val_loss $loss," \
      "peak RSS $rss MiB (largest rank)"
    runs[$v]+="$ms "
    losses[$v]+="$loss "
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ma=$(med "${runs[$a]}")
mb=$(med "${runs[$b]}")
echo "default job, 2 ranks, $steps steps: $key=$a $ma ms/step (val_loss ${losses[$a]}), $key=$b" \
  "$mb ms/step (val_loss ${losses[$b]}); medians of $rounds runs;" \
  "$b / $a = $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.2f", b / a}') (step time)"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
