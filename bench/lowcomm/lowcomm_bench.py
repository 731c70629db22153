#!/usr/bin/env python3
"""Low-communication sync methods against DDP-AdamW on the default GPT and the fortunes corpus.

Every arm runs configs/default.toml on `brigade launch --nproc R` (R replicas, default 4) with
the same steps, micro-batch and seed, so every arm sees the same tokens; only [sync] (and, for
the DDP-SGD-free arms, nothing else) changes. For each arm it prints, from rank 0's
metrics.jsonl:

  bytes/step   mean payload bytes rank 0 sent per step (CommStats, exact; framing excluded)
  ratio        DDP-AdamW f32 bytes/step divided by the arm's
  val loss     the final validation loss, and its gap to DDP-AdamW in percent
  wall s       measured wall time of the training steps (loopback, shared cores)
  model s      modeled time over a 100 Mbit/s link with 50 ms RTT:
               sum over steps of max(sent, received) / 12.5 MB/s + rounds x RTT + compute,
               with compute = the measured step time (loopback communication is negligible
               next to the modeled link) and rounds = the sequential round trips CommStats
               derives for each collective (docs/slow-links.md).

  bench/lowcomm/lowcomm_bench.py [--build build/release] [--nproc 4] [--steps 150]
      [--micro-batch 8] [--arms ddp,diloco_int8,...] [--keep DIR [--reuse]]
      [--config configs/default.toml]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

from run_records import read_metrics, run_arm_logged

LINK_BYTES_PER_S = 100e6 / 8  # 100 Mbit/s
RTT_S = 0.050

# name -> [sync] overrides. DDP-AdamW f32 (the reference) must come first.
ARMS = {
    "ddp": [],
    "ddp_bf16": ["sync.payload=bf16"],
    "diloco_f32_h50": ["sync.method=diloco", "sync.inner_steps=50"],
    "diloco_f32_h16": ["sync.method=diloco", "sync.inner_steps=16"],
    "diloco_f32_h8": ["sync.method=diloco", "sync.inner_steps=8"],
    "diloco_f32_h4": ["sync.method=diloco", "sync.inner_steps=4"],
    # Plain model averaging every H steps (outer SGD at lr 1, no momentum: local AdamW).
    "diloco_f32_h4_avg": ["sync.method=diloco", "sync.inner_steps=4", "sync.outer_lr=1.0",
                          "sync.outer_momentum=0.0"],
    "diloco_f32_h8_avg": ["sync.method=diloco", "sync.inner_steps=8", "sync.outer_lr=1.0",
                          "sync.outer_momentum=0.0"],
    "diloco_f32_h16_avg": ["sync.method=diloco", "sync.inner_steps=16", "sync.outer_lr=1.0",
                           "sync.outer_momentum=0.0"],
    "diloco_int8_h50": ["sync.method=diloco", "sync.inner_steps=50", "sync.payload=int8"],
    "diloco_int8_h50_p5": ["sync.method=diloco", "sync.inner_steps=50", "sync.payload=int8",
                           "sync.fragments=5"],
    # Towards 1000x: two outer steps of int8 over a 1024-step run (run with --steps 1024).
    "diloco_int8_h512": ["sync.method=diloco", "sync.inner_steps=512", "sync.payload=int8"],
    "diloco_int8_h256": ["sync.method=diloco", "sync.inner_steps=256", "sync.payload=int8"],
    # DiLoCo whose pseudo-gradient goes through DeMo's DCT top-k with error feedback
    # (sync.payload = dct_topk): k coefficients per chunk of <= 64 x 64, bf16 or 1-bit values.
    "diloco_dct_k32_1bit_h16": ["sync.method=diloco", "sync.inner_steps=16",
                                "sync.payload=dct_topk", "sync.dct_k=32", "sync.dct_values=1bit"],
    "diloco_dct_k64_1bit_h24": ["sync.method=diloco", "sync.inner_steps=24",
                                "sync.payload=dct_topk", "sync.dct_k=64", "sync.dct_values=1bit"],
    "diloco_dct_k64_bf16_h44": ["sync.method=diloco", "sync.inner_steps=44",
                                "sync.payload=dct_topk", "sync.dct_k=64", "sync.dct_values=bf16"],
    # The same with plain outer SGD at lr 1 (the error feedback already carries momentum).
    "diloco_dct_k32_1bit_h16_sgd": ["sync.method=diloco", "sync.inner_steps=16",
                                    "sync.payload=dct_topk", "sync.dct_k=32",
                                    "sync.dct_values=1bit", "sync.outer_lr=1.0",
                                    "sync.outer_momentum=0.0"],
    # More bytes (223x): where does the compressed pseudo-gradient's quality come back?
    "diloco_dct_k256_1bit_h16": ["sync.method=diloco", "sync.inner_steps=16",
                                 "sync.payload=dct_topk", "sync.dct_k=256",
                                 "sync.dct_values=1bit"],
    "diloco_dct_k256_1bit_h16_sgd": ["sync.method=diloco", "sync.inner_steps=16",
                                     "sync.payload=dct_topk", "sync.dct_k=256",
                                     "sync.dct_values=1bit", "sync.outer_lr=1.0",
                                     "sync.outer_momentum=0.0"],
    # Syncing 4x more often with 4x fewer coefficients (1061x).
    "diloco_dct_k8_1bit_h4_sgd": ["sync.method=diloco", "sync.inner_steps=4",
                                  "sync.payload=dct_topk", "sync.dct_k=8", "sync.dct_values=1bit",
                                  "sync.outer_lr=1.0", "sync.outer_momentum=0.0"],
    "diloco_dct_k16_1bit_h8": ["sync.method=diloco", "sync.inner_steps=8",
                               "sync.payload=dct_topk", "sync.dct_k=16", "sync.dct_values=1bit"],
    # Around 1000x with outer SGD at lr 1: fewer coefficients more often, or more of them.
    "diloco_dct_k16_1bit_h8_sgd": ["sync.method=diloco", "sync.inner_steps=8",
                                   "sync.payload=dct_topk", "sync.dct_k=16",
                                   "sync.dct_values=1bit", "sync.outer_lr=1.0",
                                   "sync.outer_momentum=0.0"],
    "diloco_dct_k32_1bit_h12_sgd": ["sync.method=diloco", "sync.inner_steps=12",
                                    "sync.payload=dct_topk", "sync.dct_k=32",
                                    "sync.dct_values=1bit", "sync.outer_lr=1.0",
                                    "sync.outer_momentum=0.0"],
    "diloco_dct_k48_1bit_h16_sgd": ["sync.method=diloco", "sync.inner_steps=16",
                                    "sync.payload=dct_topk", "sync.dct_k=48",
                                    "sync.dct_values=1bit", "sync.outer_lr=1.0",
                                    "sync.outer_momentum=0.0"],
    # DiLoCo through the error-fed 1-bit all-reduce (sync.payload = 1bit): 32x per outer step.
    "diloco_f32_h32": ["sync.method=diloco", "sync.inner_steps=32"],
    "diloco_1bit_h16": ["sync.method=diloco", "sync.inner_steps=16", "sync.payload=1bit"],
    "diloco_1bit_h32": ["sync.method=diloco", "sync.inner_steps=32", "sync.payload=1bit",
                        "sync.sign_block=1024"],
    # One level (no owner stage): the quorum exchange through the store.
    "diloco_1bit_h16_onelevel": ["sync.method=diloco", "sync.inner_steps=16", "sync.payload=1bit",
                                 "sync.quorum=0.99"],
    # Outer learning rate around DiLoCo's 0.7.
    "diloco_f32_h16_lr1": ["sync.method=diloco", "sync.inner_steps=16", "sync.outer_lr=1.0"],
    "diloco_f32_h16_lr05": ["sync.method=diloco", "sync.inner_steps=16", "sync.outer_lr=0.5"],
    "diloco_f32_h8_lr035": ["sync.method=diloco", "sync.inner_steps=8", "sync.outer_lr=0.35"],
    # DiLoCo whose mean pseudo-gradient is compressed to rank r by PowerSGD (P, Q all-reduced).
    "diloco_psgd2_bf16_h16": ["sync.method=diloco", "sync.inner_steps=16",
                              "sync.payload=powersgd_bf16", "sync.powersgd_rank=2"],
    "diloco_psgd4_h16": ["sync.method=diloco", "sync.inner_steps=16", "sync.payload=powersgd",
                         "sync.powersgd_rank=4"],
    "diloco_f32_h8_lr025": ["sync.method=diloco", "sync.inner_steps=8", "sync.outer_lr=0.25"],
    "diloco_f32_h4_lr02": ["sync.method=diloco", "sync.inner_steps=4", "sync.outer_lr=0.2"],
    # SparseLoCo-style: the error feedback decays (beta) and replaces outer momentum.
    "diloco_dct_k32_1bit_h16_b095": ["sync.method=diloco", "sync.inner_steps=16",
                                     "sync.payload=dct_topk", "sync.dct_k=32",
                                     "sync.dct_values=1bit", "sync.outer_lr=1.0",
                                     "sync.outer_momentum=0.0", "sync.residual_decay=0.95"],
    "diloco_dct_k16_1bit_h8_b095": ["sync.method=diloco", "sync.inner_steps=8",
                                    "sync.payload=dct_topk", "sync.dct_k=16",
                                    "sync.dct_values=1bit", "sync.outer_lr=1.0",
                                    "sync.outer_momentum=0.0", "sync.residual_decay=0.95"],
    # Larger outer steps on the compressed mean (plain averaging under-steps: f32 H = 16 at lr 1
    # without momentum is +12.6%, with Nesterov 0.7/0.9 +4.0%).
    "diloco_dct_k32_1bit_h16_lr2": ["sync.method=diloco", "sync.inner_steps=16",
                                    "sync.payload=dct_topk", "sync.dct_k=32",
                                    "sync.dct_values=1bit", "sync.outer_lr=2.0",
                                    "sync.outer_momentum=0.0"],
    "diloco_dct_k32_1bit_h16_lr4": ["sync.method=diloco", "sync.inner_steps=16",
                                    "sync.payload=dct_topk", "sync.dct_k=32",
                                    "sync.dct_values=1bit", "sync.outer_lr=4.0",
                                    "sync.outer_momentum=0.0"],
    "diloco_dct_k32_1bit_h16_lr8": ["sync.method=diloco", "sync.inner_steps=16",
                                    "sync.payload=dct_topk", "sync.dct_k=32",
                                    "sync.dct_values=1bit", "sync.outer_lr=8.0",
                                    "sync.outer_momentum=0.0"],
    "diloco_dct_k32_1bit_h16_lr3": ["sync.method=diloco", "sync.inner_steps=16",
                                    "sync.payload=dct_topk", "sync.dct_k=32",
                                    "sync.dct_values=1bit", "sync.outer_lr=3.0",
                                    "sync.outer_momentum=0.0"],
    "diloco_dct_k16_1bit_h8_lr4": ["sync.method=diloco", "sync.inner_steps=8",
                                   "sync.payload=dct_topk", "sync.dct_k=16",
                                   "sync.dct_values=1bit", "sync.outer_lr=4.0",
                                   "sync.outer_momentum=0.0"],
    "diloco_dct_k8_1bit_h4_lr4": ["sync.method=diloco", "sync.inner_steps=4",
                                  "sync.payload=dct_topk", "sync.dct_k=8", "sync.dct_values=1bit",
                                  "sync.outer_lr=4.0", "sync.outer_momentum=0.0"],
    "demo_bf16_k32": ["sync.method=demo", "sync.payload=bf16", "sync.demo_k=32"],
    "demo_1bit_k4": ["sync.method=demo", "sync.payload=1bit", "sync.demo_k=4"],
    "demo_1bit_k1": ["sync.method=demo", "sync.payload=1bit", "sync.demo_k=1"],
    # DeMo's sign update moves every weight by lr each step: try smaller and larger steps.
    "demo_1bit_k1_lr5e-4": ["sync.method=demo", "sync.payload=1bit", "sync.demo_k=1",
                            "train.lr=5e-4", "train.min_lr=5e-5"],
    "demo_1bit_k2_lr1e-3": ["sync.method=demo", "sync.payload=1bit", "sync.demo_k=2",
                            "train.lr=1e-3", "train.min_lr=1e-4"],
    "powersgd_r4": ["sync.method=powersgd", "sync.powersgd_rank=4"],
    "signef": ["sync.method=signef"],
    "topk_001": ["sync.method=topk", "sync.topk_fraction=0.01"],
}


def run_arm(args, name, overrides, out):
    cmd = [os.path.join(args.build, "brigade"), "launch", "--nproc", str(args.nproc), "--",
           "train", os.path.join(args.source, args.config),
           "--set", f"run.out_dir={out}", "--set", f"run.name={name}",
           "--set", f"train.steps={args.steps}", "--set", f"train.micro_batch={args.micro_batch}",
           "--set", f"train.warmup={max(1, args.steps // 12)}",
           "--set", "train.eval_every=0", "--set", "train.ckpt_every=0",
           "--set", f"train.log_every={args.steps}"]
    for o in overrides:
        cmd += ["--set", o]
    metrics = os.path.join(out, name, "metrics.jsonl")
    if args.reuse and os.path.exists(metrics):
        wall = float("nan")  # finished by an earlier invocation with the same --keep folder
    else:
        start = time.time()
        run_arm_logged(cmd, os.path.join(out, name + ".log"), name)
        wall = time.time() - start
    steps, summary = read_metrics(metrics)
    sent = sum(s["comm_sent_bytes"] for s in steps) / len(steps)
    link = sum(max(s["comm_sent_bytes"], s["comm_recv_bytes"]) for s in steps) / LINK_BYTES_PER_S
    rounds = sum(s.get("comm_rounds", 0) for s in steps)
    compute = sum(s["ms_per_step"] for s in steps) / 1e3
    return {"name": name, "bytes": sent, "val": summary["val_loss"], "wall": wall,
            "steps_s": compute, "model": link + rounds * RTT_S + compute, "rounds": rounds}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build/release")
    p.add_argument("--source", default=".")
    p.add_argument("--config", default="configs/default.toml",
                   help="the job (relative to --source); the issue's benchmark is the default")
    p.add_argument("--nproc", type=int, default=4)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--keep", help="keep the run folders here (default: a temporary folder)")
    p.add_argument("--reuse", action="store_true",
                   help="with --keep: read arms whose metrics are already there instead of "
                        "running them again (same steps and micro-batch assumed)")
    args = p.parse_args()
    names = args.arms.split(",")
    if names[0] != "ddp":
        names = ["ddp"] + [n for n in names if n != "ddp"]
    out = args.keep or tempfile.mkdtemp(prefix="brigade-lowcomm-")
    os.makedirs(out, exist_ok=True)
    rows = []
    for n in names:
        if n not in ARMS:
            sys.exit(f"unknown arm {n}; known: {', '.join(ARMS)}")
        rows.append(run_arm(args, n, ARMS[n], out))
        r = rows[-1]
        print(f"# {n}: {r['bytes']:.0f} B/step, val {r['val']:.4f}, {r['wall']:.0f} s",
              file=sys.stderr, flush=True)
    ref = rows[0]
    print(f"{args.nproc} replicas, {args.steps} steps x {args.micro_batch} sequences per replica "
          f"(same tokens per arm); link model 100 Mbit/s, RTT {RTT_S * 1e3:.0f} ms\n")
    print("| arm | bytes/step/rank | ratio vs DDP-AdamW f32 | final val loss | gap | wall s "
          "| modeled s (100 Mbit/s, 50 ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        # Quorum arms exchange through the store, which CommStats does not count.
        ratio = f"{ref['bytes'] / r['bytes']:.0f}x" if r["bytes"] else "n/a (store)"
        print(f"| {r['name']} | {r['bytes']:.0f} | {ratio} | "
              f"{r['val']:.4f} | {100 * (r['val'] / ref['val'] - 1):+.2f}% | {r['wall']:.0f} | "
              f"{r['model']:.0f} |")
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
