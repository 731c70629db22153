#!/usr/bin/env bash
# Data-parallel scaling on this machine: configs/bench-small.toml on 1 process and on
# `brigade launch --nproc 2` (DP=2, the same micro-batch per rank, so twice the global batch),
# run back to back. Prints tokens/s of each, the scaling efficiency tokens/s(DP2) /
# (2 x tokens/s(1)), and the fraction of the gradient all-reduce hidden behind backward:
# 1 - exposed wait per step / time of one blocking all-reduce of the whole gradient
# (bench_allreduce_bw, same payload, same run). The wait after backward splits into skew (rank
# 0 waiting for the slower rank's backward: busy_ms_max - busy_ms) and the communication left
# exposed after the slower rank is done (the rest), medians over steps. bench/cpu_split.py
# reports the CPU each DP=2 worker's threads used meanwhile.
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
# Beside the DP=2 run: how much of a core each worker's compute thread got, and what took the rest.
python3 "$(dirname "$0")/cpu_split.py" --delay 6 > "$out/cpu.txt" 2>&1 &
cpu_split=$!
"$bin" launch --nproc 2 -- train "${common[@]}" --set run.out_dir="$out/dp2" > "$out/dp2.log" 2>&1
wait "$cpu_split" || true
tps1=$(median_field "$out/dp1/bench-small/metrics.jsonl" tokens_per_s)
tps2=$(median_field "$out/dp2/bench-small/metrics.jsonl" tokens_per_s)
exposed=$(median_field "$out/dp2/bench-small/metrics.jsonl" comm_exposed_ms)
step_ms=$(median_field "$out/dp2/bench-small/metrics.jsonl" ms_per_step)
step1_ms=$(median_field "$out/dp1/bench-small/metrics.jsonl" ms_per_step)
# per step: skew = busy_ms_max - busy_ms (rank 0), exposed communication = wait - skew
split=$(grep '"tokens_per_s"' "$out/dp2/bench-small/metrics.jsonl" | tail -n +6 | python3 -c '
import json, sys
skew, comm, busy = [], [], []
for line in sys.stdin:
    r = json.loads(line)
    s = r["busy_ms_max"] - r["busy_ms"]
    skew.append(s); comm.append(r["comm_exposed_ms"] - s); busy.append(r["busy_ms_max"])
med = lambda v: sorted(v)[len(v) // 2]
print(med(skew), med(comm), med(busy))')
params=$(grep -o '[0-9]* parameters' "$out/dp1.log" | head -1 | cut -d' ' -f1)
ar_us=$("$build/bench/bench_allreduce_bw" --nproc 2 --bytes $((params * 4)) | tail -1 | awk '{print $2}')
read -r skew comm busy <<< "$split"
awk -v t1="$tps1" -v t2="$tps2" -v e="$exposed" -v ar="$ar_us" -v p="$params" \
    -v sk="$skew" -v cm="$comm" -v bz="$busy" -v st="$step_ms" -v s1="$step1_ms" 'BEGIN {
  printf "1 process:        %8.0f tokens/s\n", t1
  printf "DP=2 (2 procs):   %8.0f tokens/s\n", t2
  printf "scaling efficiency: %.1f%%  (target >= 95%%)\n", 100 * t2 / (2 * t1)
  printf "gradient all-reduce of %d floats: %.1f ms blocking; exposed per step %.2f ms; hidden %.1f%%\n",
         p, ar / 1000, e, 100 * (1 - e / (ar / 1000))
  printf "DP=2 step %.1f ms (1 process: %.1f ms); slower rank busy %.1f ms; rank 0 waits %.2f ms = skew %.2f ms + exposed communication %.2f ms\n",
         st, s1, bz, e, sk, cm
}'
echo "CPU during the DP=2 run (bench/cpu_split.py):"
sed 's/^/  /' "$out/cpu.txt"
