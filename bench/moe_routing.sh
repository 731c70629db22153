#!/usr/bin/env bash
# Mixture-of-experts routing on the default config (configs/default.toml, every block an MoE
# with 8 experts): tokens dropped (% of assignments over capacity) and expert load balance
# (max expert load / mean load per MoE layer forward, before capacity; 1 = balanced), for
# top-1 and top-2 at capacity factor 1.0 and 1.25, each a short run. Prints, per run, the
# mean over the first 10 and the last 10 steps of each metric, the run summary's values
# (every step), and the final training loss (which includes the aux loss).
#
#   bench/moe_routing.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build=${1:-build/release}
steps=${2:-100}
bin=$build/brigade
out=$(mktemp -d /tmp/brigade-moe-routing-XXXXXX)
trap 'rm -rf "$out"' EXIT

mean_field() {  # mean of a field over step records $3..$4 (1-based, inclusive)
  grep '"tokens_per_s"' "$1" | sed -n "$3,$4p" | sed -E "s/.*\"$2\":([0-9.e+-]+).*/\\1/" |
    awk '{s+=$1} END {printf "%.3f", s/NR}'
}
summary_field() {
  grep '"final":true' "$1" | tail -1 | sed -E "s/.*\"$2\":([0-9.e+-]+).*/\\1/" |
    awk '{printf "%.3f", $1}'
}

printf "%-5s %-4s %-22s %-22s %-26s %s\n" top_k cf "dropped % (first/last)" \
  "imbalance (first/last)" "run: dropped % / imbalance" "final loss (aux)"
for k in 1 2; do
  for cf in 1.0 1.25; do
    name=k${k}_cf${cf}
    "$bin" train configs/default.toml --set run.out_dir="$out/$name" --set train.steps="$steps" \
      --set train.warmup=10 --set train.eval_every=0 --set train.eval_batches=2 \
      --set train.ckpt_every=0 --set train.log_every=1000 --set model.n_experts=8 \
      --set model.moe_top_k="$k" --set model.capacity_factor="$cf" > "$out/$name.log" 2>&1
    m=$out/$name/default/metrics.jsonl
    last0=$((steps - 9))
    printf "%-5s %-4s %-22s %-22s %-26s %s\n" "$k" "$cf" \
      "$(mean_field "$m" moe_dropped_pct 1 10) / $(mean_field "$m" moe_dropped_pct "$last0" "$steps")" \
      "$(mean_field "$m" moe_load_imbalance 1 10) / $(mean_field "$m" moe_load_imbalance "$last0" "$steps")" \
      "$(summary_field "$m" moe_dropped_pct) / $(summary_field "$m" moe_load_imbalance)" \
      "$(mean_field "$m" loss "$steps" "$steps") ($(mean_field "$m" moe_aux_loss "$steps" "$steps"))"
  done
done
