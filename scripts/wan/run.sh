#!/usr/bin/env bash
# Slow-link emulation: N ranks in N network namespaces, each joined by a veth pair to a bridge
# that lives in its own hub namespace (the host's namespaces are never touched), every link
# shaped with tc. Runs a brigade job across them with torchrun's environment contract, or
# measures one shaped link. docs/slow-links.md explains the set-up and the figures.
#
#   scripts/wan/run.sh [options] -- <brigade subcommand and arguments>
#   scripts/wan/run.sh --measure [options]
#
# Topology: host h lives in namespace <prefix>-h with address 10.200.0.(h+1)/24 on eth0; its
# veth peer h<h> is a port of bridge br0 in <prefix>-hub. A host holds --per-host ranks (one by
# default; rank r on host r / per-host, or r mod hosts with --distribution cyclic), which reach
# each other over the namespace's loopback, unshaped, as the processes of one machine do. Shaping is on egress at both ends of
# each veth (eth0: the rank's upload; h<r>: its download), so each rank has a --rate link in
# each direction, like a host on an access line. netem (delay, loss) sits under the tbf where
# the kernel has sch_netem.
#
# Exit code: that of the first rank to fail (the others are stopped then), 0 if all succeed,
# 124 if --timeout expired, 2 for bad options, 3 if the namespaces cannot be set up,
# 128+n after signal n.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: scripts/wan/run.sh [options] -- <brigade subcommand and arguments>
       scripts/wan/run.sh --measure [options]
options:
  --nproc N       ranks (default 2, at most 200)
  --per-host K    ranks per host, i.e. per network namespace and shaped link (default 1; must
                  divide N): ranks of one host talk over its loopback, unshaped
  --distribution D  block (default: ranks 0..K-1 on host 0, ...) or cyclic (rank r on host
                  r mod N/K), as Slurm's --distribution; pick the one that puts the ranks of a
                  model replica on one host (tp fastest in brigade's mesh, pp slowest)
  --rate R        bandwidth of each link direction, tc units: 100mbit (default), 10mbit, 1gbit;
                  "none" leaves the links unshaped
  --delay D       one-way delay added on each rank's upload (netem), e.g. 25ms: RTT = 2 x D.
                  Without sch_netem the delay is not emulated; the latency cost is modelled
  --loss P        packet loss on each rank's upload (netem), e.g. 0.1%; needs sch_netem
  --port P        MASTER_PORT (default 29500)
  --binary PATH   brigade executable (default: $BRIGADE_BINARY, else brigade on PATH)
  --exec          the command is a program, not a brigade subcommand: nothing is appended
                  (a rank's address is in $BRIGADE_WAN_IP)
  --run-dir DIR   after a successful job, read DIR/metrics.jsonl and print the modelled
                  latency cost per step (rounds from the run summary x RTT)
  --rtt-model MS  RTT for that model when --delay is not given (default 50)
  --timeout S     bound on the whole job (default 600 s)
  --grace S       seconds between SIGTERM and SIGKILL when ranks are stopped (default 5)
  --measure       measure the shaped link from rank 0 to rank 1 instead of running a job
  --tool PATH     bench_link_throughput for --measure (default: beside the binary's build)
  --bytes N       payload for --measure (default 16000000)
  --keep          leave the namespaces for debugging (prints how to remove them)
  -h, --help      this text
Each rank gets RANK, WORLD_SIZE, LOCAL_RANK (r mod K), LOCAL_WORLD_SIZE (K), MASTER_ADDR (rank 0's
address), MASTER_PORT, BRIGADE_RUN_ID and a fresh BRIGADE_STORE_TOKEN, so the job meets at
rank 0's TCP store; a brigade subcommand also gets --set comm.host=<its address>.
EOF
}

die() {
  echo "wan: error: $*" >&2
  exit 2
}

nproc=2 per_host=1 distribution=block rate=100mbit delay="" loss="" port=29500 binary="${BRIGADE_BINARY:-}" exec_mode=0
run_dir="" rtt_model_ms=50 timeout_s=600 grace_s=5 measure=0 tool="" bytes=16000000 keep=0
cmd=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) nproc="${2:-}"; shift 2 ;;
    --per-host) per_host="${2:-}"; shift 2 ;;
    --distribution) distribution="${2:-}"; shift 2 ;;
    --rate) rate="${2:-}"; shift 2 ;;
    --delay) delay="${2:-}"; shift 2 ;;
    --loss) loss="${2:-}"; shift 2 ;;
    --port) port="${2:-}"; shift 2 ;;
    --binary) binary="${2:-}"; shift 2 ;;
    --exec) exec_mode=1; shift ;;
    --run-dir) run_dir="${2:-}"; shift 2 ;;
    --rtt-model) rtt_model_ms="${2:-}"; shift 2 ;;
    --timeout) timeout_s="${2:-}"; shift 2 ;;
    --grace) grace_s="${2:-}"; shift 2 ;;
    --measure) measure=1; shift ;;
    --tool) tool="${2:-}"; shift 2 ;;
    --bytes) bytes="${2:-}"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; cmd=("$@"); break ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
done

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_uint "$nproc" && [ "$nproc" -ge 1 ] && [ "$nproc" -le 200 ] || die "--nproc must be 1..200, got '$nproc'"
is_uint "$per_host" && [ "$per_host" -ge 1 ] && [ $((nproc % per_host)) = 0 ] ||
  die "--per-host must be >= 1 and divide --nproc $nproc, got '$per_host'"
nhost=$((nproc / per_host))
[ "$distribution" = block ] || [ "$distribution" = cyclic ] ||
  die "--distribution must be block or cyclic, got '$distribution'"
host_of() { if [ "$distribution" = block ]; then echo $(($1 / per_host)); else echo $(($1 % nhost)); fi; }
is_uint "$port" && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || die "--port must be 1..65535, got '$port'"
is_uint "$timeout_s" && [ "$timeout_s" -ge 1 ] || die "--timeout must be a whole number of seconds >= 1"
is_uint "$grace_s" || die "--grace must be a whole number of seconds"
is_uint "$bytes" && [ "$bytes" -ge 1 ] || die "--bytes must be a positive integer"
[[ "$rtt_model_ms" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--rtt-model must be milliseconds, got '$rtt_model_ms'"
[[ "$rate" == none || "$rate" =~ ^[0-9]+([.][0-9]+)?(bit|kbit|mbit|gbit)$ ]] ||
  die "--rate must look like 100mbit (bit, kbit, mbit, gbit) or be none, got '$rate'"
[ -z "$delay" ] || [[ "$delay" =~ ^[0-9]+([.][0-9]+)?(us|ms|s)$ ]] || die "--delay must look like 25ms, got '$delay'"
[ -z "$loss" ] || [[ "$loss" =~ ^[0-9]+([.][0-9]+)?%$ ]] || die "--loss must look like 0.1%, got '$loss'"
if [ "$measure" = 1 ]; then
  [ "$nhost" -ge 2 ] || die "--measure needs two hosts (--nproc >= 2 x --per-host)"
else
  [ ${#cmd[@]} -gt 0 ] || { usage >&2; die "no command after --"; }
fi
[ "$(id -u)" = 0 ] || { echo "wan: error: network namespaces need root (CAP_NET_ADMIN)" >&2; exit 3; }
command -v ip >/dev/null && command -v tc >/dev/null ||
  { echo "wan: error: needs ip and tc (Debian package iproute2)" >&2; exit 3; }

# Rate in bytes per second (for the tbf burst and the report).
rate_bytes_per_s() {
  local r="$1" num unit
  num="${r%%[a-z]*}" unit="${r##*[0-9.]}"
  case "$unit" in
    bit) awk -v n="$num" 'BEGIN { printf "%.0f", n / 8 }' ;;
    kbit) awk -v n="$num" 'BEGIN { printf "%.0f", n * 1e3 / 8 }' ;;
    mbit) awk -v n="$num" 'BEGIN { printf "%.0f", n * 1e6 / 8 }' ;;
    gbit) awk -v n="$num" 'BEGIN { printf "%.0f", n * 1e9 / 8 }' ;;
  esac
}

# Names unique to this invocation, so parallel runs do not collide.
id="$$-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
prefix="brigade-wan-$id"
hub="$prefix-hub"
ns_name=() ip_addr=()  # host h's namespace and address
for ((h = 0; h < nhost; h++)); do
  ns_name[h]="$prefix-$h"
  ip_addr[h]="10.200.0.$((h + 1))"
done
created=()   # namespaces to remove
pids=()      # rank (or measure) processes, by rank
watchdog=""

# Each rank leads its own process group (setsid), so a signal reaches what it started too.
signal_rank() { kill "-$1" -- "-$2" 2>/dev/null || kill "-$1" "$2" 2>/dev/null; }

stop_ranks() {
  local p deadline err
  # bash reports each killed background job on stderr when it reaps it: keep that quiet.
  exec {err}>&2 2>/dev/null
  for p in "${pids[@]}"; do [ -n "$p" ] && signal_rank TERM "$p"; done
  deadline=$((SECONDS + grace_s))
  for p in "${pids[@]}"; do
    [ -n "$p" ] || continue
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then
      echo "wan: pid $p did not stop within ${grace_s} s; sending SIGKILL" >&$err
    fi
    signal_rank KILL "$p"  # also whatever the rank left behind in its group
  done
  # Reap, bounded: a process killed by SIGKILL leaves at once.
  deadline=$((SECONDS + 10))
  for p in "${pids[@]}"; do
    [ -n "$p" ] || continue
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    wait "$p"
  done
  pids=()
  exec 2>&$err {err}>&-
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null && wait "$watchdog" 2>/dev/null
  [ ${#pids[@]} -gt 0 ] && stop_ranks
  if [ "$keep" = 1 ] && [ ${#created[@]} -gt 0 ]; then
    echo "wan: kept namespaces: ${created[*]}" >&2
    echo "wan: remove with: for n in ${created[*]}; do ip netns del \$n; done" >&2
  else
    # Deleting a namespace removes its veth ends (and the hub's bridge) with it. -force: go on
    # past names that were never made.
    printf 'netns del %s\n' "${created[@]}" | timeout 20 ip -force -batch - >/dev/null 2>&1
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

setup_failed() {
  echo "wan: error: cannot set up the namespaces: $*" >&2
  exit 3
}

# batch COMMANDS TOOL ARGS...: runs `ip`/`tc` on the newline-separated COMMANDS (-batch: one
# process for many commands; process creation is what makes set-up slow on a loaded machine).
# Stops at the first failure. Not to be used in a pipeline: it must exit the script itself.
batch() {
  local commands="$1" err
  shift
  err=$("$@" -batch - <<<"$commands" 2>&1 >/dev/null) || setup_failed "$* -batch: $err"
}

# Namespaces first (all names are recorded before, so cleanup removes whatever was made).
created=("$hub")
for ((h = 0; h < nhost; h++)); do created+=("${ns_name[h]}"); done
batch "$(printf 'netns add %s\n' "${created[@]}")" ip

# The hub: a bridge, and one veth pair per rank with the rank's end moved into its namespace.
cmds="link set lo up
link add br0 type bridge
link set br0 up"
for ((h = 0; h < nhost; h++)); do
  cmds+="
link add h$h type veth peer name eth0 netns ${ns_name[h]}
link set h$h master br0
link set h$h up"
done
batch "$cmds" ip -n "$hub"
for ((h = 0; h < nhost; h++)); do
  batch "link set lo up
addr add ${ip_addr[h]}/24 dev eth0
link set eth0 up" ip -n "${ns_name[h]}"
done

# Does this kernel have sch_netem? Probe on the hub's loopback (it carries nothing).
have_netem=0
if tc -n "$hub" qdisc add dev lo root netem delay 1ms 2>/dev/null; then
  have_netem=1
  tc -n "$hub" qdisc del dev lo root 2>/dev/null
fi

burst=""
if [ "$rate" != none ]; then
  bps=$(rate_bytes_per_s "$rate")
  # 10 ms worth of bytes, at least 16 kB: enough for the kernel's timer granularity.
  burst=$(awk -v b="$bps" 'BEGIN { v = b / 100; if (v < 16000) v = 16000; printf "%.0f", v }')
fi

# tc commands shaping egress of `dev`: tbf at the rate, netem (if any) under it.
shape() {
  local dev="$1" with_netem="$2"
  local netem=""
  if [ "$with_netem" = 1 ] && [ "$have_netem" = 1 ]; then
    netem="${delay:+delay $delay}${loss:+ loss $loss}"
  fi
  if [ "$rate" != none ]; then
    echo "qdisc add dev $dev root handle 1: tbf rate $rate burst $burst latency 200ms"
    [ -n "$netem" ] && echo "qdisc add dev $dev parent 1:1 handle 10: netem $netem"
  elif [ -n "$netem" ]; then
    echo "qdisc add dev $dev root handle 10: netem $netem"
  fi
  return 0
}
for ((h = 0; h < nhost; h++)); do
  cmds=$(shape eth0 1)
  [ -z "$cmds" ] || batch "$cmds" tc -n "${ns_name[h]}"
done
cmds=$(for ((h = 0; h < nhost; h++)); do shape "h$h" 0; done)
[ -z "$cmds" ] || batch "$cmds" tc -n "$hub"

netem_note="sch_netem: yes"
if [ "$have_netem" = 0 ]; then
  netem_note="sch_netem: not in this kernel"
  if [ -n "$delay" ] || [ -n "$loss" ]; then
    netem_note+="; --delay/--loss NOT emulated (latency cost is reported as a model)"
  fi
fi
echo "wan: $nproc ranks, $per_host per host, in namespaces $prefix-{0..$((nhost - 1))}, bridge in $hub;" \
  "links ${rate} each way${delay:+, delay $delay}${loss:+, loss $loss}; $netem_note" >&2

# Bytes sent and received on a rank's link (eth0), from the kernel's interface counters.
link_bytes() {
  ip -n "$1" -s link show dev eth0 |
    awk '/RX:/ { getline; rx = $1 } /TX:/ { getline; tx = $1 } END { print "tx=" tx " rx=" rx }'
}

prefix_lines() {  # prefix_lines RANK: "[rank R] " before each line that has no rank prefix yet
  sed -u "/^\[rank /!s/^/[rank $1] /"
}

if [ "$measure" = 1 ]; then
  if [ -z "$tool" ]; then
    for c in "${binary:+$(dirname "$binary")/bench/bench_link_throughput}" \
      "$(command -v bench_link_throughput 2>/dev/null)"; do
      [ -n "$c" ] && [ -x "$c" ] && { tool="$c"; break; }
    done
  fi
  [ -n "$tool" ] && [ -x "$tool" ] || die "--measure needs bench_link_throughput (--tool PATH)"
  server_ns=${ns_name[1]} client_ns=${ns_name[0]}
  ip netns exec "$server_ns" "$tool" serve --bind "${ip_addr[1]}" --port "$port" --timeout 60 &
  pids=($!)
  out=$(ip netns exec "$client_ns" "$tool" send --host "${ip_addr[1]}" --port "$port" \
    --bytes "$bytes" --pings 20 --timeout 60)
  rc=$?
  wait "${pids[0]}"
  src=$?
  pids=()
  [ $rc = 0 ] || exit $rc
  [ $src = 0 ] || exit $src
  shaped=none
  [ "$rate" != none ] && shaped=$(awk -v b="$bps" 'BEGIN { printf "%.3f", b / 1e6 }')
  echo "wan: measure: rank 0 -> rank 1: $out shaped_MBps=$shaped rate=$rate netem=$have_netem"
  exit 0
fi

# The job. Every rank gets the torchrun contract; BRIGADE_STORE_DIR is dropped so the ranks
# meet at rank 0's TCP store, as they would across machines.
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
if [ "$exec_mode" = 0 ]; then
  if [ -z "$binary" ]; then
    binary=$(command -v brigade 2>/dev/null) || die "no brigade binary: pass --binary or set BRIGADE_BINARY"
  fi
  [ -x "$binary" ] || die "--binary '$binary' is not executable"
fi
for ((r = 0; r < nproc; r++)); do
  h=$(host_of "$r")
  local_rank=$((r / nhost))  # cyclic: the rank's place among its host's
  [ "$distribution" = block ] && local_rank=$((r % per_host))
  ns=${ns_name[h]}
  argv=("${cmd[@]}")
  [ "$exec_mode" = 0 ] && argv=("$binary" "${cmd[@]}" --set "comm.host=\"${ip_addr[h]}\"")
  (
    exec setsid ip netns exec "$ns" env -u BRIGADE_STORE_DIR RANK=$r WORLD_SIZE=$nproc \
      LOCAL_RANK=$local_rank LOCAL_WORLD_SIZE=$per_host MASTER_ADDR="${ip_addr[0]}" \
      MASTER_PORT="$port" BRIGADE_RUN_ID="wan-$id" \
      BRIGADE_STORE_TOKEN="$token" BRIGADE_WAN_IP="${ip_addr[h]}" "${argv[@]}" </dev/null
  ) > >(prefix_lines $r) 2> >(prefix_lines $r >&2) &
  pids[r]=$!
done
start_s=$SECONDS
sleep "$timeout_s" &  # the job's deadline: its end wakes the wait below
watchdog=$!

first_rank=""
live=("${pids[@]}")
while [ ${#live[@]} -gt 0 ]; do
  done_pid=""
  wait -n -p done_pid "${live[@]}" "$watchdog"
  rc=$?
  if [ "$done_pid" = "$watchdog" ]; then
    watchdog=""
    echo "wan: error: the job ran past --timeout ${timeout_s} s; stopping it" >&2
    exit 124
  fi
  [ -n "$done_pid" ] || continue  # woken by a signal whose trap does not exit
  next=()
  for p in "${live[@]}"; do [ "$p" != "$done_pid" ] && next+=("$p"); done
  live=("${next[@]}")
  if [ $rc != 0 ] && [ -z "$first_rank" ]; then
    for ((r = 0; r < nproc; r++)); do [ "${pids[r]}" = "$done_pid" ] && first_rank=$r; done
    echo "wan: rank $first_rank exited with code $rc; stopping the others" >&2
    exit "$rc"  # the EXIT trap stops the other ranks and removes the namespaces
  fi
done
for p in "${pids[@]}"; do signal_rank KILL "$p"; done  # leftovers in the ranks' groups
pids=()
kill "$watchdog" 2>/dev/null && wait "$watchdog" 2>/dev/null
watchdog=""
wait  # the output relays: let them flush
elapsed=$((SECONDS - start_s))
for ((h = 0; h < nhost; h++)); do
  echo "wan: host $h link bytes: $(link_bytes "${ns_name[h]}")" >&2
done
echo "wan: all $nproc ranks finished in ${elapsed} s" >&2

# The latency model: the rounds the communicator derived, per step, times the RTT. Taken from
# the per-step records (comm_rounds) when the trainer writes them, else from the run summary
# (start-up broadcasts and the final evaluation included then).
if [ -n "$run_dir" ]; then
  metrics="$run_dir/metrics.jsonl"
  if [ ! -f "$metrics" ]; then
    echo "wan: no $metrics: no latency model" >&2
  else
    steps=$(grep -c '"ms_per_step"' "$metrics")
    rounds=$(grep '"ms_per_step"' "$metrics" | grep -o '"comm_rounds":[0-9]*' |
      awk -F: '{ s += $2 } END { print s + 0 }')
    source="per-step metrics"
    if [ "$rounds" = 0 ]; then
      rounds=$(grep '"final":true' "$metrics" | tail -n 1 | grep -o '[0-9]* rounds' |
        awk '{ s += $1 } END { print s + 0 }')
      source="run summary, set-up included"
    fi
    ms_step=$(grep -o '"ms_per_step":[0-9.e+-]*' "$metrics" |
      awk -F: '{ s += $2; n++ } END { if (n) printf "%.1f", s / n; else print "?" }')
    if [ -n "$delay" ]; then
      rtt_ms=$(awk -v d="$delay" 'BEGIN { v = d + 0; if (d ~ /us$/) v /= 1000; else if (d ~ /[0-9]s$/) v *= 1000; printf "%g", 2 * v }')
    else
      rtt_ms=$rtt_model_ms
    fi
    if [ "$steps" -gt 0 ] && [ "$rounds" -gt 0 ]; then
      awk -v R="$rounds" -v S="$steps" -v rtt="$rtt_ms" -v ms="$ms_step" -v src="$source" \
        -v emulated="$([ "$have_netem" = 1 ] && [ -n "$delay" ] && echo 1)" 'BEGIN {
          per = R / S
          printf "wan: latency model: %d rounds over %d steps (%s) = %.1f round trips per step; " \
                 "at RTT %g ms: +%.0f ms per step over the measured %s ms\n",
                 R, S, src, per, rtt, per * rtt, ms
          if (emulated == 1) print "wan: (netem emulated that delay: the measured time already includes it)"
        }' >&2
    else
      echo "wan: the run records no round counts: no latency model" >&2
    fi
  fi
fi
exit 0
