#!/usr/bin/env python3
"""Parameter servers against DDP on the default GPT (configs/ps.toml: micro-batch 4 per worker,
the default job's global batch of 16 on 4 workers), with and without one worker slowed.

Every method trains STEPS steps of WORKERS workers (plus SERVERS servers for "ps"), evaluating
every EVAL steps on EVAL_BATCHES batches; runs alternate method by method so the machine's drift
falls on all of them. A method ending in "d" (ssp3d, aspd) hands the slices of the data order out
dynamically (ps.assignment = "dynamic"): fast workers train more of them; one ending in "a"
(ssp1da, aspa) has the servers apply every WORKERS pushes as one update on their mean
(ps.aggregate = WORKERS). Reported per run, from
worker 0's metrics.jsonl:
  wall      seconds from the first train record to the final evaluation
  val       the final validation loss: the loss at equal samples (STEPS global batches)
  target    seconds until the first evaluation at or below TARGET (the BSP run's final loss
            without straggler times 1.02, unless given), "-" if never
  upd/s     updates the servers applied per second (bsp: clocks; ssp/asp: pushes)
  B/step    bytes worker 0 moved to and from the servers per step (per slice it trained)
  slices    dynamic: the slices each worker trained (worker 1 is the slowed one)
A slowed worker sleeps SLOW_MS ms per micro-step (BRIGADE_FAULT_SLOW_RANK=1), which with the
default of 0 is set to worker 1's own step time (a 2x straggler).

  /usr/bin/python3 bench/ps_consistency.py [--build build/release] [--steps 200] [--workers 4]
      [--servers 1] [--methods ddp,bsp,ssp1,ssp3,ssp8,asp] [--slow-ms 0]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def records(path, kind):
    out = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == kind:
                out.append(r)
    return out


def run(args, method, slow_ms, out):
    sets = [f"train.steps={args.steps}", f"train.warmup={min(50, args.steps // 4)}",
            f"train.eval_every={args.eval}", f"train.eval_batches={args.eval_batches}",
            "train.ckpt_every=0", f"train.log_every={args.steps}", f"run.out_dir={out}"]
    nproc = args.workers
    if method == "ddp":
        sets.append('sync.method="ddp"')
    else:
        nproc += args.servers
        sets.append(f"ps.servers={args.servers}")
        if method.endswith("a"):
            sets.append(f"ps.aggregate={args.workers}")
            method = method[:-1]
        if method.endswith("d"):
            sets.append('ps.assignment="dynamic"')
            method = method[:-1]
        if method == "bsp" or method == "asp":
            sets.append(f'ps.consistency="{method}"')
        else:
            sets += ['ps.consistency="ssp"', f"ps.staleness={int(method[3:])}"]
    env = dict(os.environ)
    if slow_ms > 0:
        env.update(BRIGADE_FAULT_SLOW_RANK="1", BRIGADE_FAULT_SLOW_MS=str(slow_ms))
    cmd = [args.build + "/brigade", "launch", "--nproc", str(nproc), "--", "train",
           "configs/ps.toml"] + [x for s in sets for x in ("--set", s)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    metrics = out + "/ps/metrics.jsonl"
    train = records(metrics, "train")
    evals = records(metrics, "eval")
    summary = records(metrics, "summary")[-1]
    slices = []
    for w in range(args.workers):
        log = out + ("/ps/train.log" if w == 0 else f"/ps/logs/rank_{w}.log")
        with open(log) as f:
            found = [l.split("ps_slices_trained")[1].split()[0] for l in f if "ps_slices_trained" in l]
        if found:
            slices.append(int(found[-1]))
    return train, evals, summary, slices


def seconds(r):
    from datetime import datetime
    return datetime.strptime(r["time"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval", type=int, default=25)
    ap.add_argument("--eval-batches", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--methods", default="ddp,bsp,ssp1,ssp3,ssp8,asp")
    ap.add_argument("--slow-ms", type=float, default=0)
    ap.add_argument("--target", type=float, default=0)
    args = ap.parse_args()
    methods = args.methods.split(",")
    tmp = tempfile.mkdtemp(prefix="brigade-ps-")
    rows = []
    target = args.target
    slow_ms = args.slow_ms
    for straggler in (False, True):
        for m in methods:
            out = f"{tmp}/{m}-{'slow' if straggler else 'even'}"
            train, evals, summary, slices = run(args, m, slow_ms if straggler else 0, out)
            wall = seconds(evals[-1]) - seconds(train[0])
            if not straggler and slow_ms == 0 and m in ("bsp", "ddp"):
                # A 2x straggler: sleep as long as one micro-step of this run computes.
                slow_ms = 1000 * wall / (len(train) - 1)
            if not target and m == "bsp" and not straggler:
                target = evals[-1]["val_loss"] * 1.02
            applied = summary.get("ps_updates_applied", 0)
            ps_bytes = sum(summary.get("comm_sent_by", {}).get(k, 0) +
                           summary.get("comm_recv_by", {}).get(k, 0) for k in ("ps/push", "ps/pull"))
            rows.append([m, "1 of %d slowed %.0f ms" % (args.workers, slow_ms) if straggler else "none",
                         wall, evals[-1]["val_loss"], evals, seconds(train[0]),
                         applied / wall if applied else 0, ps_bytes / len(train) if applied else 0,
                         " / ".join(map(str, slices)) or "-"])
            r = rows[-1]
            print(f"{r[0]:6} straggler {r[1]:24} wall {r[2]:7.1f} s  val {r[3]:.4f}  "
                  f"upd/s {r[6]:7.1f}  B/step {r[7]:,.0f}  slices {r[8]}", flush=True)
    for r in rows:
        r[4] = next((f"{seconds(e) - r[5]:.1f}" for e in r[4] if e["val_loss"] <= target), "-")
    print(f"\ntarget validation loss {target:.4f} (bsp without straggler x 1.02); "
          f"{args.workers} workers, {args.servers} server(s), {args.steps} steps")
    print("| method | straggler | wall s | final val loss | s to target | server updates/s | "
          "bytes per step (worker 0) | slices per worker |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.4f} | {r[4]} | "
              f"{r[6]:.1f} | {r[7]:,.0f} | {r[8]} |")


if __name__ == "__main__":
    main()
