#!/usr/bin/env bash
# Checkpointing inside training: a ~25M-parameter GPT (d_model 512, 8 layers, vocab 256,
# context 64) on `brigade launch --nproc 2` (DDP), trained three ways back to back in one
# invocation, so that both see the same machine load:
#   none   train.ckpt_every = 0 (only the final checkpoint, after the timed steps)
#   async  train.ckpt_every = 50, train.async_checkpoint = true (saves at 50 and 100 inside
#          the 110 timed steps; the last one after them)
# Prints the mean step time of each (all steps but the first 3; the checkpoint's cost falls in
# the steps that follow it: the snapshot, then the background write competing for the cores),
# the async overhead against none (target < 3%), the blocking part and the total of each save
# (from rank 0's log), and the restart time: a third invocation resumes the async run from
# its last checkpoint and reports how long every rank took to verify and read it.
#
# With REPEATS > 1 the two runs alternate (none, async, none, async, ...) and each mean is over
# its runs, so that load drifting during the invocation hits both alike.
#
#   bench/ckpt_train.sh [BUILD_DIR] [STEPS] [REPEATS]
set -euo pipefail
build=${1:-build/release}
steps=${2:-110}
repeats=${3:-1}
bin=$build/brigade
out=$(mktemp -d /tmp/brigade-ckpt-train-XXXXXX)
trap 'rm -rf "$out"' EXIT
cat > "$out/gpt25m.toml" <<EOF
[run]
name = "gpt25m"
seed = 1
[model]
kind = "gpt"
vocab = 256
seq_len = 64
d_model = 512
n_layer = 8
n_head = 8
[data]
source = "fortunes"
[train]
micro_batch = 2
steps = $steps
lr = 3e-4
warmup = 5
eval_every = 0
eval_batches = 1
log_every = 1000
EOF

run() {  # name, extra --set args...
  local name=$1
  shift
  "$bin" launch --nproc 2 -- train "$out/gpt25m.toml" --set run.out_dir="$out/$name" "$@" \
    > "$out/$name.log" 2>&1
}
mean_ms() {  # mean ms_per_step over step records after the first 3
  grep '"tokens_per_s"' "$1" | tail -n +4 | sed -E 's/.*"ms_per_step":([0-9.e+-]+).*/\1/' |
    awk '{s += $1; n++} END {printf "%.1f", s / n}'
}

for ((i = 1; i <= repeats; i++)); do
  sfx=$([ "$i" -gt 1 ] && echo "$i" || true)
  run "none$sfx" --set train.ckpt_every=0
  run "async$sfx" --set train.ckpt_every=50 --set train.async_checkpoint=true
done
mean_of_runs() {  # prefix: mean of mean_ms over its repeats
  for ((i = 1; i <= repeats; i++)); do
    sfx=$([ "$i" -gt 1 ] && echo "$i" || true)
    mean_ms "$out/$1$sfx/gpt25m/metrics.jsonl"
    echo
  done | awk '{s += $1; n++; v = v sprintf("%s%.1f", n > 1 ? " / " : "", $1)} END {
    printf "%.1f %s", s / n, v}'
}
params=$(grep -o '[0-9]* parameters' "$out/none.log" | head -1 | cut -d' ' -f1)
bytes=$(du -sb "$out/async/gpt25m/checkpoints/step_$(printf %08d "$steps")" | cut -f1)
read -r m_none runs_none <<< "$(mean_of_runs none)"
read -r m_async runs_async <<< "$(mean_of_runs async)"

log=$out/async/gpt25m/train.log
blocking=$(grep -o 'started ([0-9]* ms blocking)' "$log" | grep -o '[0-9]*' |
  awk '{s += $1; n++} END {printf "%.0f", s / n}')
total=$(grep -E 'checkpoint /.*step_[0-9]+ \([0-9]+ ms\)' "$log" | sed -E 's/.*\(([0-9]+) ms\)/\1/' |
  awk '{s += $1; n++} END {printf "%.0f", s / n}')
# Restart: the async run again with more steps resumes from its final checkpoint.
"$bin" launch --nproc 2 -- train "$out/gpt25m.toml" --set run.out_dir="$out/async" \
  --set train.steps=$((steps + 1)) > "$out/resume.log" 2>&1

load=$(grep -o 'loaded in [0-9]* ms' "$out/resume.log" | head -1 | grep -o '[0-9]*')
echo "runs, no checkpoints (ms/step): $runs_none; async: $runs_async"
awk -v p="$params" -v b="$bytes" -v n="$m_none" -v a="$m_async" -v bl="$blocking" \
  -v t="$total" -v l="$load" -v steps="$steps" 'BEGIN {
  printf "model: %d parameters; checkpoint %.0f MB on 2 ranks; %d steps, a save every 50\n", p, b / 1e6, steps
  printf "mean step, no checkpoints:     %8.1f ms\n", n
  printf "mean step, async every 50:     %8.1f ms  overhead %+.2f%% (target < 3%%)\n", a, 100 * (a / n - 1)
  printf "async save: blocking %d ms, total (write + commit) %d ms\n", bl, t
  printf "restart: open + verify + read on 2 ranks: %d ms\n", l
}'
