"""brigade against PyTorch on the same CPU, side by side (issue 14).

For each shape, mode (1 process, DP=2) and precision (f32; bf16 = brigade's train.precision =
"bf16" against PyTorch's torch.autocast("cpu", dtype=torch.bfloat16)), the two trainers
alternate round by round (brigade, PyTorch, brigade, ...; the first of each pair alternates
too), so that the machine's drift falls on both. Each run trains --steps steps; its figure is
the median step time of rank 0 after the first 3 steps (brigade: metrics.jsonl's ms_per_step;
PyTorch: bench/vs_pytorch/gpt_torch.py's timer around zero_grad .. optimizer step), and the
verdict per cell the median over rounds. Both run one thread per process, the same model
(gpt_torch.py says how it matches brigade's), AdamW and clipping, micro-batch and context.

Also printed: each trainer's model FLOP/s as a fraction of the GEMM peak that brigade measured
at start in the same precision (its `GEMM peak` calibration, the denominator of its `mfu`), and
DP=2 scaling efficiency (DP=2 tokens/s over twice the 1-process tokens/s).

  python3 bench/vs_pytorch/vs_pytorch.py [--build build/release] [--shapes bench-small,25m]
      [--modes 1,2] [--precisions f32,bf16] [--steps 12] [--rounds 3]

Needs Debian's python3-torch (bench/vs_pytorch/install.sh; not a dependency of make run/test).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# name: (vocab, seq, d_model, layers, heads, micro_batch)
SHAPES = {
    "bench-small": (256, 256, 256, 4, 4, 8),
    "25m": (256, 256, 512, 8, 8, 4),
    "gpt2-small": (256, 1024, 768, 12, 12, 1),
}
WARMUP = 3


def flops_per_step(shape):
    """PaLM's 6 N T + 12 L C T^2 per sequence, N without wpe (brigade's flops_per_example)."""
    V, T, C, L, H, B = shape
    n = V * C + L * (12 * C * C + 13 * C) + 2 * C
    return (6 * n * T + 12 * L * C * T * T) * B


def run_brigade(args, shape, nproc, precision, out):
    V, T, C, L, H, B = shape
    sets = {"model.vocab": V, "model.seq_len": T, "model.d_model": C, "model.n_layer": L,
            "model.n_head": H, "train.micro_batch": B, "train.grad_accum": 1,
            "train.steps": args.steps, "train.warmup": 2, "train.eval_every": 0,
            "train.ckpt_every": 0, "train.log_every": 1000, "train.precision": f'"{precision}"',
            "run.out_dir": f'"{out}"'}
    cmd = [os.path.join(args.build, "brigade"), "launch", "--nproc", str(nproc), "--", "train",
           os.path.join(ROOT, "configs/bench-small.toml")]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    steps, mfu = [], []
    with open(os.path.join(out, "bench-small", "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "train" and r["step"] > WARMUP:
                steps.append(r["ms_per_step"] / 1e3)
                mfu.append(r["mfu"])
    with open(os.path.join(out, "bench-small", "train.log")) as f:
        peak = re.search(r"GEMM peak ([0-9.]+) GFLOP/s", f.read())
    return statistics.median(steps), float(peak.group(1)) * 1e9 if peak else float("nan")


def run_torch(args, shape, nproc, precision, out):
    V, T, C, L, H, B = shape
    path = os.path.join(out, "torch.json")
    cmd = [sys.executable, os.path.join(HERE, "gpt_torch.py"), "--nproc", str(nproc),
           "--precision", precision, "--steps", str(args.steps), "--vocab", str(V), "--seq",
           str(T), "--d", str(C), "--layers", str(L), "--heads", str(H), "--micro-batch", str(B),
           "--out", path]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(path) as f:
        r = json.load(f)
    return statistics.median(r["step_s"][WARMUP:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build/release"))
    p.add_argument("--shapes", default="bench-small,25m")
    p.add_argument("--modes", default="1,2")
    p.add_argument("--precisions", default="f32,bf16")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    cells = [(s, int(m), pr) for s in args.shapes.split(",") for m in args.modes.split(",")
             for pr in args.precisions.split(",")]
    times = {c: {"brigade": [], "pytorch": []} for c in cells}
    peaks = {}
    with tempfile.TemporaryDirectory(prefix="brigade-vs-pytorch-") as tmp:
        for rnd in range(args.rounds):
            for i, (s, m, pr) in enumerate(cells):
                order = ["brigade", "pytorch"] if (rnd + i) % 2 == 0 else ["pytorch", "brigade"]
                for who in order:
                    out = os.path.join(tmp, f"{who}-{s}-{m}-{pr}-{rnd}")
                    os.makedirs(out)
                    if who == "brigade":
                        t, peak = run_brigade(args, SHAPES[s], m, pr, out)
                        peaks.setdefault((s, pr), []).append(peak)
                    else:
                        t = run_torch(args, SHAPES[s], m, pr, out)
                    times[(s, m, pr)][who].append(t)
                    tokens = m * SHAPES[s][5] * SHAPES[s][1]
                    print(f"round {rnd + 1} {s} nproc={m} {pr} {who}: {t * 1e3:.1f} ms/step, "
                          f"{tokens / t:.0f} tokens/s", flush=True)
    print("\n| shape | ranks | precision | brigade tokens/s | PyTorch tokens/s | brigade / PyTorch "
          "| brigade, of GEMM peak | PyTorch, of GEMM peak |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    tps = {}
    for (s, m, pr) in cells:
        shape = SHAPES[s]
        tokens = m * shape[5] * shape[1]
        b = statistics.median(times[(s, m, pr)]["brigade"])
        t = statistics.median(times[(s, m, pr)]["pytorch"])
        peak = statistics.median(peaks[(s, pr)])  # per process
        frac = lambda sec: flops_per_step(shape) / sec / peak  # per rank: each does its batch
        tps[(s, m, pr)] = (tokens / b, tokens / t)
        print(f"| {s} | {m} | {pr} | {tokens / b:,.0f} | {tokens / t:,.0f} | **{t / b:.2f}x** | "
              f"{100 * frac(b):.0f}% | {100 * frac(t):.0f}% |")
    for (s, m, pr) in cells:
        if m == 2 and (s, 1, pr) in tps:
            one, two = tps[(s, 1, pr)], tps[(s, 2, pr)]
            print(f"DP=2 scaling, {s} {pr}: brigade {100 * two[0] / (2 * one[0]):.0f}%, "
                  f"PyTorch {100 * two[1] / (2 * one[1]):.0f}%")
    print(f"GEMM peak per process (brigade's calibration, medians): " + ", ".join(
        f"{s} {pr} {statistics.median(v) * 1e-9:.0f} GFLOP/s" for (s, pr), v in peaks.items()))
    with open("/proc/loadavg") as f:
        print("load average", " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
