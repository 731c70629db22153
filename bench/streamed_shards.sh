#!/usr/bin/env bash
# Streamed token folders (issue 18): the resident memory and the training speed of
# configs/bench-small.toml (3.3M parameters) on a token folder much larger than the model,
# whole-load (a brigade built before the folder was mapped: every split read into one int32
# vector, and its text decoded for the unigram baseline) against streamed (this build: shards
# mapped, one window copied per example), run interleaved A B A B on the same folder, warm in the
# page cache. A third row trains the same build on the same text through data.source = "text"
# (tokens in one vector: TokenDataset) to compare tokens/s within one binary.
#
# Reports per run: max RSS (/usr/bin/time -v, which counts the mapped file pages this process had
# in memory too), the time from start to the first step (load and checks), and the median
# tokens/s and time filling the batch over steps 6.. (metrics.jsonl). Needs python3.
#
#   bench/streamed_shards.sh WHOLE_LOAD_BRIGADE [BUILD_DIR] [TEXT_MB] [STEPS]
#
# e.g. git worktree add /tmp/old ca331d3 && cmake -S /tmp/old -B /tmp/old/build -G Ninja
#      -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/old/build --target brigade, then
#      bench/streamed_shards.sh /tmp/old/build/brigade
set -euo pipefail
old=${1:?usage: bench/streamed_shards.sh WHOLE_LOAD_BRIGADE [BUILD_DIR] [TEXT_MB] [STEPS]}
build=${2:-build/release}
mb=${3:-200}
steps=${4:-40}
new=$build/brigade
out=$(mktemp -d /tmp/brigade-streamed-XXXXXX)
trap 'rm -rf "$out"' EXIT

# A deterministic corpus of `mb` MB of word-like text in 16 files, paragraphs of 20-300 words.
python3 - "$out/corpus" "$mb" <<'EOF'
import os, random, sys
root, mb = sys.argv[1], int(sys.argv[2])
os.makedirs(root)
rng = random.Random(1)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 9)))
         for _ in range(20000)]
per_file = mb * 1_000_000 // 16
for f in range(16):
    parts, size = [], 0
    while size < per_file:
        p = " ".join(rng.choices(words, k=rng.randint(20, 300))) + "\n\n"
        parts.append(p)
        size += len(p)
    with open(f"{root}/part_{f:02d}.txt", "w") as out:
        out.write("".join(parts))
EOF
"$new" tokenize --source text --input "$out/corpus" --out "$out/tok" --vocab 256 > "$out/tokenize.log" 2>&1
tail -1 "$out/tokenize.log"
shards=$(ls "$out/tok" | grep -c '\.bin$')
folder_mb=$(du -sm "$out/tok" | cut -f1)
cat "$out"/tok/*.bin > /dev/null  # warm: every run reads from the page cache

common=(configs/bench-small.toml --set train.steps="$steps" --set train.warmup=5
        --set train.log_every=1000 --set train.eval_batches=2)

median_field() {  # median of a numeric field over step records after the first 5
  grep '"tokens_per_s"' "$1" | tail -n +6 | sed -E "s/.*\"$2\":([0-9.e+-]+).*/\\1/" |
    sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
# Seconds from the process's start (epoch seconds) to the first step record's time.
to_first_step() {
  python3 - "$1" "$2" <<'EOF'
import datetime, json, sys
start, metrics = float(sys.argv[1]), sys.argv[2]
for line in open(metrics):
    r = json.loads(line)
    if r.get("type") == "train":
        t = datetime.datetime.fromisoformat(r["time"].replace("Z", "+00:00")).timestamp()
        print(f"{t - start:.2f}")
        break
EOF
}
run() {  # run NAME BINARY DATA_ARGS...
  local name=$1 bin=$2
  shift 2
  local start
  start=$(date +%s.%N)
  /usr/bin/time -v -o "$out/$name.time" "$bin" train "${common[@]}" --set run.name="$name" \
    --set run.out_dir="$out/runs" "$@" > "$out/$name.log" 2>&1 ||
    { echo "$name failed:" >&2; tail -5 "$out/$name.log" >&2; exit 1; }
  local rss_kb
  rss_kb=$(grep 'Maximum resident set size' "$out/$name.time" | awk '{print $NF}')
  local m=$out/runs/$name/metrics.jsonl
  printf '| %s | %d | %s | %s | %s |\n' "$name" $((rss_kb / 1024)) \
    "$(to_first_step "$start" "$m")" "$(median_field "$m" tokens_per_s)" \
    "$(median_field "$m" time_data_ms)"
}

echo "token folder: $folder_mb MB in $shards shards (byte tokens as uint16), $mb MB of text"
echo "| run | max RSS MiB | s to first step | tokens/s (median) | batch fill ms (median) |"
echo "|---|---:|---:|---:|---:|"
shard_args=(--set data.source=shards --set data.path="$out/tok")
run whole-load-1 "$old" "${shard_args[@]}"
run streamed-1 "$new" "${shard_args[@]}"
run whole-load-2 "$old" "${shard_args[@]}"
run streamed-2 "$new" "${shard_args[@]}"
run text-source "$new" --set data.source=text --set data.path="$out/corpus"
# The same examples: every run's losses agree step by step.
for name in streamed-1 whole-load-2 streamed-2; do
  if ! cmp -s <(grep -o '"loss":[^,]*' "$out/runs/whole-load-1/metrics.jsonl") \
              <(grep -o '"loss":[^,]*' "$out/runs/$name/metrics.jsonl"); then
    echo "losses of $name differ from whole-load-1" >&2
    exit 1
  fi
done
echo "losses: identical step by step in all four shard runs"
