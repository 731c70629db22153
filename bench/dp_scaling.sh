#!/usr/bin/env bash
# Data-parallel scaling on this machine: configs/bench-small.toml on 1 process and on
# `brigade launch --nproc 2` (DP=2, the same micro-batch per rank, so twice the global batch),
# run back to back. Prints tokens/s of each, the scaling efficiency tokens/s(DP2) /
# (2 x tokens/s(1)), and the fraction of the gradient all-reduce hidden behind backward:
# 1 - exposed wait per step / time of one blocking all-reduce of the whole gradient
# (bench_allreduce_bw, same payload, same run).
#
#   bench/dp_scaling.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build=${1:-build/release}
steps=${2:-40}
bin=$build/brigade
out=$(mktemp -d /tmp/brigade-dp-scaling-XXXXXX)
trap 'rm -rf "$out"' EXIT
common=(configs/bench-small.toml --set train.steps="$steps" --set train.warmup=5
        --set train.eval_batches=2 --set train.log_every=1000)

median_field() {  # median of a numeric field over step records after the first 5
  grep '"tokens_per_s"' "$1" | tail -n +6 | sed -E "s/.*\"$2\":([0-9.e+-]+).*/\\1/" |
    sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

"$bin" train "${common[@]}" --set run.out_dir="$out/dp1" > "$out/dp1.log" 2>&1
"$bin" launch --nproc 2 -- train "${common[@]}" --set run.out_dir="$out/dp2" > "$out/dp2.log" 2>&1
tps1=$(median_field "$out/dp1/bench-small/metrics.jsonl" tokens_per_s)
tps2=$(median_field "$out/dp2/bench-small/metrics.jsonl" tokens_per_s)
exposed=$(median_field "$out/dp2/bench-small/metrics.jsonl" comm_exposed_ms)
params=$(grep -o '[0-9]* parameters' "$out/dp1.log" | head -1 | cut -d' ' -f1)
ar_us=$("$build/bench/bench_allreduce_bw" --nproc 2 --bytes $((params * 4)) | tail -1 | awk '{print $2}')
awk -v t1="$tps1" -v t2="$tps2" -v e="$exposed" -v ar="$ar_us" -v p="$params" 'BEGIN {
  printf "1 process:        %8.0f tokens/s\n", t1
  printf "DP=2 (2 procs):   %8.0f tokens/s\n", t2
  printf "scaling efficiency: %.1f%%  (target >= 95%%)\n", 100 * t2 / (2 * t1)
  printf "gradient all-reduce of %d floats: %.1f ms blocking; exposed per step %.2f ms; hidden %.1f%%\n",
         p, ar / 1000, e, 100 * (1 - e / (ar / 1000))
}'
