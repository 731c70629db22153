#!/usr/bin/env python3
"""Time to a target loss over shaped links: DDP-AdamW against low-communication arms.

Every arm runs configs/default.toml on 4 ranks in 4 network namespaces whose links are shaped
with tc to --rate each way (scripts/wan/run.sh; needs root), with the same steps, micro-batch
and seed. From rank 0's metrics.jsonl it reports, per arm:

  wall s        the shaped run's measured training time (sum of ms_per_step)
  rounds/step   sequential round trips per step (CommStats, exact per collective; for the
                store exchange of DiLoCo's quorum mode, the method's formula)
  + RTT s       wall + rounds x --rtt-ms: this kernel has no netem, so latency is modeled
  val loss      the final validation loss
  at step       the first step whose trailing --window-step mean training loss is <= --target
  to target s   measured shaped time up to that step, and with its rounds x RTT added
  speed-up      the faster DDP arm's time to target / the arm's

With sync.quorum < 1 DiLoCo exchanges nothing between outer steps, so its logged loss is
rank 0's own (not the replicas' mean): the trailing mean smooths that.

  sudo bench/lowcomm/wan_time_to_target.py [--binary build/release/brigade] [--steps 256]
      [--target 2.75] [--arms ddp,ddp_one_bucket,diloco_int8_h16_quorum] [--keep DIR [--reuse]]
  Model-parallel replicas (two hosts of tp = 2):
      --arms ddp_tp2,diloco_h16_tp2 --micro-batch 8
"""
import argparse
import math
import os
import shutil
import sys
import tempfile

from run_records import read_metrics, run_arm_logged

ARMS = {
    "ddp": [],
    # DDP tuned for a high-latency link: one bucket for the whole gradient (3.4 MB), so one
    # ring all-reduce (2 (W - 1) rounds) per step instead of one per 1 MiB bucket.
    "ddp_one_bucket": ["parallel.bucket_mb=8"],
    # DiLoCo whose outer steps go through the rendezvous store (quorum mode): nothing is
    # exchanged between outer steps, not even the loss average.
    "diloco_int8_h16_quorum": ["sync.method=diloco", "sync.inner_steps=16", "sync.payload=int8",
                               "sync.quorum=0.75"],
    "diloco_int8_h64_quorum": ["sync.method=diloco", "sync.inner_steps=64", "sync.payload=int8",
                               "sync.quorum=0.75"],
    "diloco_int8_h64": ["sync.method=diloco", "sync.inner_steps=64", "sync.payload=int8"],
    # Model-parallel replicas (issue 33): two hosts of two ranks each, tp = 2 inside a host (its
    # loopback, unshaped), dp = 2 across the shaped link. DDP all-reduces every step; DiLoCo
    # syncs each tp shard over the dp link every 16 steps.
    "ddp_tp2": ["parallel.tp=2"],
    "diloco_h16_tp2": ["parallel.tp=2", "sync.method=diloco", "sync.inner_steps=16"],
}
# Ranks per host (per network namespace and shaped link) by arm; 1 where not listed.
PER_HOST = {"ddp_tp2": 2, "diloco_h16_tp2": 2}


def run_arm(args, name, out):
    run_dir = os.path.join(out, name)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    if not (args.reuse and os.path.exists(metrics)):
        cmd = [os.path.join(args.source, "scripts/wan/run.sh"), "--nproc", str(args.nproc),
               "--per-host", str(PER_HOST.get(name, 1)), "--rate", args.rate, "--binary", args.binary, "--timeout", str(args.timeout), "--",
               "train", os.path.join(args.source, "configs/default.toml"),
               "--set", f"run.out_dir={out}", "--set", f"run.name={name}",
               "--set", f"train.steps={args.steps}",
               "--set", f"train.micro_batch={args.micro_batch}",
               "--set", f"train.warmup={max(1, args.steps // 12)}",
               "--set", "train.eval_every=0", "--set", "train.ckpt_every=0"]
        for o in ARMS[name]:
            cmd += ["--set", o]
        run_arm_logged(cmd, os.path.join(out, name + ".log"), name)
    steps, summary = read_metrics(metrics)
    rtt = args.rtt_ms / 1e3
    wall = rounds = dp_bytes = 0.0
    hit = None
    for i, s in enumerate(steps):
        wall += s["ms_per_step"] / 1e3
        # What crossed the link: the dp communicator's bytes (the tp ones stay on a host).
        dp_bytes += sum(b for op, b in s.get("comm_sent_by", {}).items() if op.startswith("dp/"))
        # Collectives are counted where they run; DiLoCo's quorum exchange goes through the
        # store, whose rounds only the formula counts.
        rounds += s.get("comm_rounds") or s.get("comm_formula_rounds", 0)
        window = steps[max(0, i + 1 - args.window):i + 1]
        if hit is None and len(window) == args.window and \
                sum(w["loss"] for w in window) / len(window) <= args.target:
            hit = (s["step"], wall + rounds * rtt, wall)
    if PER_HOST.get(name, 1) > 1:
        # Rounds are counted over every communicator, and a host's own ranks pay no RTT: no
        # latency model for these arms (their shaped times stand alone).
        rounds = float("nan")
        hit = (hit[0], float("nan"), hit[2]) if hit else None
    return {"name": name, "wall": wall, "rounds": rounds / len(steps),
            "modeled": wall + rounds * rtt, "val": summary["val_loss"], "hit": hit,
            "dp_mb": dp_bytes / len(steps) / 1e6}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--binary", default="build/release/brigade")
    p.add_argument("--source", default=".")
    p.add_argument("--nproc", type=int, default=4)
    p.add_argument("--rate", default="100mbit")
    p.add_argument("--rtt-ms", type=float, default=50.0)
    p.add_argument("--steps", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--target", type=float, default=2.75)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--arms", default="ddp,ddp_one_bucket,diloco_int8_h16_quorum")
    p.add_argument("--keep", help="keep the run folders here (default: a temporary folder)")
    p.add_argument("--reuse", action="store_true",
                   help="with --keep: read arms already run there instead of running them again")
    args = p.parse_args()
    args.binary = os.path.abspath(args.binary)
    names = args.arms.split(",")
    if not names[0].startswith("ddp"):
        names = ["ddp"] + [n for n in names if n != "ddp"]
    for n in names:
        if n not in ARMS:
            sys.exit(f"unknown arm {n}; known: {', '.join(ARMS)}")
    out = os.path.abspath(args.keep or tempfile.mkdtemp(prefix="brigade-wan-ttt-"))
    os.makedirs(out, exist_ok=True)
    rows = []
    for n in names:
        rows.append(run_arm(args, n, out))
        print(f"# {n}: wall {rows[-1]['wall']:.0f} s, hit {rows[-1]['hit']}", file=sys.stderr,
              flush=True)
    # The reference is the faster DDP arm to the target (default buckets or one bucket).
    ddp_hits = [r for r in rows if r["name"].startswith("ddp") and r["hit"]]
    ref_row = min(ddp_hits, key=lambda r: (math.isnan(r["hit"][1]), r["hit"][1])) \
        if ddp_hits else None
    ref = ref_row["hit"] if ref_row else None
    ref_shaped = min((r["hit"] for r in ddp_hits), key=lambda h: h[2]) if ddp_hits else None
    print(f"{args.nproc} ranks, links shaped to {args.rate} each way, RTT modeled at "
          f"{args.rtt_ms:.0f} ms; {args.steps} steps x {args.micro_batch} sequences per rank; "
          f"target: trailing {args.window}-step mean training loss <= {args.target}\n")
    if ref_row:
        print("speed-up: against the faster DDP arm to the target, in each column\n")
    print("| arm | wall s | dp MB sent/step | rounds/step | + RTT s | val loss | at step | "
          "to target s, shaped | speed-up | to target s, shaped + RTT | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    nan = float("nan")
    for r in rows:
        step, t, t_shaped = r["hit"] if r["hit"] else ("-", nan, nan)
        sp = ref[1] / t if ref and r["hit"] else nan
        sp_shaped = ref_shaped[2] / t_shaped if ref_shaped and r["hit"] else nan
        print(f"| {r['name']} | {r['wall']:.0f} | {r['dp_mb']:.3f} | {r['rounds']:.1f} | "
              f"{r['modeled']:.0f} | "
              f"{r['val']:.4f} | {step} | {t_shaped:.0f} | {sp_shaped:.2f}x | {t:.0f} | "
              f"{sp:.2f}x |")
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
