#!/usr/bin/env bash
# Generation throughput of `brigade generate` on the bench-small GPT (configs/bench-small.toml:
# 3.3M parameters, seq_len 256), run back to back in one invocation: the full window rerun per
# token (--no-kv-cache, what generate did before the cache) against the key-value cache, batch 1
# and 8 (8 prompts through 1 or 8 slots), on 1 process and on 2 (`brigade launch --nproc 2`):
# tensor parallel, and pipeline parallel (--set parallel.pp=2: two blocks per stage). Greedy, NEW
# tokens per prompt (default 128, so windows grow to about 140 of the 256 positions). Prints new tokens/s of each and the ratios to the baseline.
#
#   bench/generate_throughput.sh [BUILD_DIR] [NEW_TOKENS]
set -euo pipefail
build=${1:-build/release}
new=${2:-128}
bin=$build/brigade
out=$(mktemp -d /tmp/brigade-generate-XXXXXX)
trap 'rm -rf "$out"' EXIT
# Throughput does not depend on what the weights learned: a one-step checkpoint is enough.
"$bin" train configs/bench-small.toml --set run.out_dir="$out" --set train.steps=1 \
  --set train.warmup=0 --set train.eval_batches=1 > "$out/train.log" 2>&1
ckpt=$out/bench-small
for p in "The meaning of life" "Once upon a time" "Q: What is the capital of" \
         "A man walks into a bar" "It was a dark and stormy night" "Why do birds" \
         "In the beginning" "To be or not to be"; do echo "$p"; done > "$out/prompts.txt"

run() {  # label, nproc, generate flags...
  local label=$1 nproc=$2
  shift 2
  local cmd=("$bin")
  [ "$nproc" -gt 1 ] && cmd+=(launch --nproc "$nproc" --)
  cmd+=(generate --ckpt "$ckpt" --prompts "$out/prompts.txt" --temperature 0 --tokens "$new" "$@")
  "${cmd[@]}" > "$out/$label.jsonl" 2> "$out/$label.err"
  sed -nE 's/.*: ([0-9.]+) tokens\/s.*/\1/p' "$out/$label.err" | tail -1
}

base=$(run full-window 1 --no-kv-cache)
kv1=$(run kv-b1 1 --batch 1)
kv8=$(run kv-b8 1 --batch 8)
tp1=$(run kv-b1-tp2 2 --batch 1)
tp8=$(run kv-b8-tp2 2 --batch 8)
pp1=$(run kv-b1-pp2 2 --batch 1 --set parallel.pp=2)
pp8=$(run kv-b8-pp2 2 --batch 8 --set parallel.pp=2)
# Greedy is greedy: every variant must produce the baseline's text.
for v in kv-b1 kv-b8 kv-b1-tp2 kv-b8-tp2 kv-b1-pp2 kv-b8-pp2; do
  if ! diff <(sed 's/^\[rank 0\] //' "$out/$v.jsonl") "$out/full-window.jsonl" > /dev/null; then
    echo "warning: $v's completions differ from the full-window baseline's" >&2
  fi
done
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
printf '%-34s %12s %8s\n' "variant (8 prompts x $new tokens)" "tokens/s" "ratio"
printf '%-34s %12s %8s\n' "full window per token, 1 process" "$base" "1.00"
printf '%-34s %12s %8s\n' "kv cache, batch 1, 1 process" "$kv1" "$(ratio "$kv1" "$base")"
printf '%-34s %12s %8s\n' "kv cache, batch 8, 1 process" "$kv8" "$(ratio "$kv8" "$base")"
printf '%-34s %12s %8s\n' "kv cache, batch 1, tp = 2" "$tp1" "$(ratio "$tp1" "$base")"
printf '%-34s %12s %8s\n' "kv cache, batch 8, tp = 2" "$tp8" "$(ratio "$tp8" "$base")"
printf '%-34s %12s %8s\n' "kv cache, batch 1, pp = 2" "$pp1" "$(ratio "$pp1" "$base")"
printf '%-34s %12s %8s\n' "kv cache, batch 8, pp = 2" "$pp8" "$(ratio "$pp8" "$base")"
