#!/usr/bin/env bash
# The dp gradient average overlapped with the pipeline's backward (parallel.overlap_grad_reduce,
# parallel/ddp.h; issue 33), before (false: every bucket after the schedule) and
# after (true), side by side in one run: configs/hybrid-3d.toml on 8 processes (pp 2 x dp 2 x
# tp 2) and the same model as pp 2 x dp 2 on 4. Arms alternate (off, on, off, on, ...) so that a
# drift in the machine's load falls on both. Per layout and arm it prints the median step time and
# the median exposed wait for the dp average (comm_exposed_ms, rank 0) over the steps after the
# first 5 of every repeat, and the share of the off arm's exposed wait that the overlap hides.
# With WAN_RATE set (as root), also pp 2 x dp 2 on two hosts (network namespaces) whose links
# are shaped to that rate each way (scripts/wan/run.sh --per-host 2 --distribution cyclic: a
# replica's two stages on one host, the dp average across the link), where the average is
# slow enough for the overlap to matter.
#
#   [WAN_RATE=100mbit] bench/overlap.sh [BUILD_DIR] [STEPS] [REPEATS]
set -euo pipefail
build=${1:-build/release}
steps=${2:-30}
repeats=${3:-2}
bin=$build/brigade
out=$(mktemp -d /tmp/brigade-overlap-XXXXXX)
trap 'rm -rf "$out"' EXIT
common=(configs/hybrid-3d.toml --set train.steps="$steps" --set train.warmup=5
        --set train.eval_every=0 --set train.ckpt_every=0 --set train.log_every=1000)

# Step records after the first 5 of every run of one layout and arm, one field each.
fields() {  # fields NAME FIELD
  for f in "$out"/"$1"_*/hybrid-3d/metrics.jsonl; do
    grep '"tokens_per_s"' "$f" | tail -n +6 | sed -E "s/.*\"$2\":([0-9.e+-]+).*/\\1/"
  done
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

layouts=("hybrid3d:8:" "pp2dp2:4:--set parallel.tp=1")
[ -n "${WAN_RATE:-}" ] && layouts+=("pp2dp2_wan:4:--set parallel.tp=1")
for ((i = 0; i < repeats; i++)); do
  for layout in "${layouts[@]}"; do
    IFS=: read -r name nproc extra <<<"$layout"
    start=("$bin" launch --nproc "$nproc" --)
    if [[ "$name" == *_wan ]]; then
      start=(scripts/wan/run.sh --nproc "$nproc" --per-host 2 --distribution cyclic
             --rate "$WAN_RATE" --binary "$bin" --)
    fi
    for overlap in false true; do
      # shellcheck disable=SC2086
      "${start[@]}" train "${common[@]}" $extra --set parallel.overlap_grad_reduce="$overlap" \
        --set run.out_dir="$out/${name}_${overlap}_$i" > "$out/${name}_${overlap}_$i.log" 2>&1
    done
  done
done

echo "| layout | overlap | step ms (median) | exposed dp wait ms (median) | hidden |"
echo "|---|---|---:|---:|---:|"
for layout in "${layouts[@]}"; do
  IFS=: read -r name nproc extra <<<"$layout"
  off_wait=$(fields "${name}_false" comm_exposed_ms | median)
  for overlap in false true; do
    step=$(fields "${name}_$overlap" ms_per_step | median)
    wait=$(fields "${name}_$overlap" comm_exposed_ms | median)
    hidden=$(awk -v on="$wait" -v off="$off_wait" 'BEGIN { printf "%.0f%%", 100 * (1 - on / off) }')
    [ "$overlap" = false ] && hidden="-"
    printf "| %s (%s processes) | %s | %.1f | %.1f | %s |\n" "$name" "$nproc" "$overlap" "$step" \
      "$wait" "$hidden"
  done
done
echo
echo "$(nproc) cores; $steps steps x $repeats repeats per arm${WAN_RATE:+; wan links $WAN_RATE}"
