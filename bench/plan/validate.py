#!/usr/bin/env python3
"""brigade plan's predictions against measured runs on this machine (issue 39).

For every layout below (configs/hybrid-3d.toml's GPT, 1 to 8 processes): calibrate this machine
for that many processes (`brigade plan --calibrate --nproc N`, once per N), predict the layout
as it is (`brigade plan --as-is --json`), then train it for --steps steps through
`brigade launch` and read rank 0's metrics: the mean step time over steps 6.. (ms_per_step)
and the largest peak resident memory of any rank (the run summary). Prints one row per layout
and the mean absolute error of each, and whether the measured-best layout of each process
count is among the predicted top 3 of that count.

  bench/plan/validate.py [--binary build/release/brigade] [--steps 30] [--only dp2,pp2]

With --wan (root): also the 2-process layouts across two network namespaces whose links are
shaped to --rate each way (scripts/wan/run.sh, docs/slow-links.md), predicted on this machine's
calibration as a cluster of two nodes joined by such a link (no delay is emulated: the link's
round trip is the loopback one calibration measured).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# name: (processes, --set overrides); the global batch is 8 examples of 128 tokens throughout,
# but for the 8-process hybrid-3d layout itself (16).
LAYOUTS = {
    "dp1": (1, ["train.micro_batch=2", "train.grad_accum=4"]),
    "dp2": (2, ["train.micro_batch=2", "train.grad_accum=2"]),
    "dp2_zero1": (2, ["train.micro_batch=2", "train.grad_accum=2", "parallel.zero=1"]),
    "dp2_zero2": (2, ["train.micro_batch=2", "train.grad_accum=2", "parallel.zero=2"]),
    "dp2_zero3": (2, ["train.micro_batch=2", "train.grad_accum=2", "parallel.zero=3"]),
    "dp2_diloco8": (2, ["train.micro_batch=2", "train.grad_accum=2", "sync.method=diloco",
                        "sync.inner_steps=8"]),
    "tp2": (2, ["train.micro_batch=2", "train.grad_accum=4", "parallel.tp=2"]),
    "pp2": (2, ["train.micro_batch=2", "train.grad_accum=4", "parallel.pp=2"]),
    "pp2_zb": (2, ["train.micro_batch=2", "train.grad_accum=4", "parallel.pp=2",
                   "parallel.schedule=zb-h1"]),
    "dp4": (4, ["train.micro_batch=2", "train.grad_accum=1"]),
    "dp4_zero1": (4, ["train.micro_batch=1", "train.grad_accum=2", "parallel.zero=1"]),
    "pp2_dp2": (4, ["train.micro_batch=2", "train.grad_accum=2", "parallel.pp=2"]),
    "pp4": (4, ["train.micro_batch=2", "train.grad_accum=4", "parallel.pp=4"]),
    "pp2_dp2_zero2": (4, ["train.micro_batch=4", "train.grad_accum=1", "parallel.pp=2",
                          "parallel.zero=2"]),
    "tp2_dp2": (4, ["train.micro_batch=2", "train.grad_accum=2", "parallel.tp=2"]),
    "pp2_tp2": (4, ["train.micro_batch=2", "train.grad_accum=4", "parallel.pp=2",
                    "parallel.tp=2"]),
    "pp2_dp2_tp2": (8, ["train.micro_batch=2", "train.grad_accum=4", "parallel.pp=2",
                        "parallel.tp=2"]),
}

# Across two hosts over the shaped link: the replicas' exchange and the pipeline's messages on it.
WAN_LAYOUTS = {
    "wan_dp2": (2, ["train.micro_batch=2", "train.grad_accum=2"]),
    "wan_dp2_diloco8": (2, ["train.micro_batch=2", "train.grad_accum=2", "sync.method=diloco",
                            "sync.inner_steps=8"]),
    "wan_pp2": (2, ["train.micro_batch=2", "train.grad_accum=4", "parallel.pp=2"]),
}

COMMON = ["train.warmup=5", "train.eval_every=0", "train.ckpt_every=0", "train.log_every=100",
          "data.val_fraction=0.05"]


def sets(overrides):
    out = []
    for o in overrides:
        out += ["--set", o]
    return out


def calibrate(binary, config, nproc, folder):
    path = os.path.join(folder, f"cluster{nproc}.toml")
    subprocess.run([binary, "plan", "--calibrate", config, "--nproc", str(nproc), "--out", path],
                   check=True, capture_output=True, text=True)
    return path


def predict(binary, config, cluster, overrides):
    out = subprocess.run([binary, "plan", config, "--cluster", cluster, "--as-is", "--json",
                          "--top", "1"] + sets(overrides),
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["layouts"][0]


def wan_cluster(path, rate_gbit, folder):
    """The 2-process calibration as two nodes of one process each, joined by the shaped link."""
    text = open(path).read()
    text = text.replace("nodes = 1", "nodes = 2").replace(
        "processes_per_node = 2", "processes_per_node = 1").replace(
        "devices_per_node = 2", "devices_per_node = 1")
    rtt = next(l for l in text.splitlines() if l.startswith("latency_us"))
    text += f"\n[link.cluster]\nbandwidth_gbit = {rate_gbit}\n{rtt}\n"
    out = os.path.join(folder, "cluster_wan.toml")
    with open(out, "w") as f:
        f.write(text)
    return out


def measure(binary, config, nproc, overrides, folder, name, steps, wan_rate=None):
    launcher = [binary, "launch", "--nproc", str(nproc), "--"]
    if wan_rate:
        launcher = [os.path.join(ROOT, "scripts/wan/run.sh"), "--nproc", str(nproc), "--rate",
                    wan_rate, "--binary", binary, "--timeout", "600", "--"]
    run = launcher + ["train", config] + sets(
        overrides + COMMON + [f"train.steps={steps}", f"run.name={name}",
                              f"run.out_dir={folder}"])
    subprocess.run(run, check=True, capture_output=True, text=True, timeout=600)
    records = [json.loads(line) for line in open(os.path.join(folder, name, "metrics.jsonl"))]
    train = [r for r in records if r.get("type") == "train" and r["step"] >= 6]
    summary = [r for r in records if r.get("type") == "summary"]
    rss = max(summary[-1]["peak_rss_mib_per_rank"]) if summary else float("nan")
    parts = {k: statistics.median(r.get(f"time_{k}_ms", 0) for r in train)
             for k in ("compute", "bubble", "comm", "other", "wait")}
    # The mean, not the median: a DiLoCo outer step every H steps is part of its cost per step.
    return statistics.mean(r["ms_per_step"] for r in train), rss, parts


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=os.path.join(ROOT, "build/release/brigade"))
    p.add_argument("--config", default=os.path.join(ROOT, "configs/hybrid-3d.toml"))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--only", default="", help="comma-separated layout names")
    p.add_argument("--parts", action="store_true", help="also each part of the step")
    p.add_argument("--wan", action="store_true", help="also across shaped links (root)")
    p.add_argument("--rate", default="100mbit", help="--wan: each link's rate (tc units)")
    args = p.parse_args()
    if args.wan:
        LAYOUTS.update(WAN_LAYOUTS)
    names = [n for n in LAYOUTS if not args.only or n in args.only.split(",")]
    folder = tempfile.mkdtemp(prefix="brigade-plan-validate-")
    clusters = {}
    rows = []
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    print(f"# {cpu}, {os.cpu_count()} cores; {args.steps} steps per run, mean of steps 6..")
    print(f"{'layout':<14} {'np':>3} {'pred ms':>8} {'meas ms':>8} {'err':>7} "
          f"{'pred MiB':>9} {'meas MiB':>9} {'err':>7}")
    for name in names:
        nproc, overrides = LAYOUTS[name]
        if nproc not in clusters:
            clusters[nproc] = calibrate(args.binary, args.config, nproc, folder)
        cluster = clusters[nproc]
        wan_rate = args.rate if name.startswith("wan_") else None
        if wan_rate:
            gbit = float(args.rate.replace("mbit", "")) / 1e3 if "mbit" in args.rate else float(
                args.rate.replace("gbit", ""))
            cluster = wan_cluster(clusters[nproc], gbit, folder)
        overrides = ["parallel.tp=1", "parallel.pp=1", "parallel.dp=0"] + overrides  # the layout's own win
        pred = predict(args.binary, args.config, cluster, overrides)
        ms, rss, parts = measure(args.binary, args.config, nproc, overrides, folder, name,
                                 args.steps, wan_rate)
        p_ms, p_mib = pred["time_ms"]["step"], pred["memory_mib"]["total"]
        rows.append((name, nproc, p_ms, ms, p_mib, rss))
        print(f"{name:<14} {nproc:>3} {p_ms:>8.1f} {ms:>8.1f} {100 * (p_ms / ms - 1):>+6.0f}% "
              f"{p_mib:>9.1f} {rss:>9.1f} {100 * (p_mib / rss - 1):>+6.0f}%", flush=True)
        if args.parts:
            t = pred["time_ms"]
            print(f"    predicted compute {t['compute']:.1f} tp {t['tp_comm']:.1f} bubble "
                  f"{t['bubble']:.1f} dp {t['dp_exposed']:.1f} optim {t['optimizer']:.1f}; "
                  f"measured compute {parts['compute']:.1f} bubble {parts['bubble']:.1f} comm "
                  f"{parts['comm']:.1f} other {parts['other']:.1f} wait {parts['wait']:.1f}")
    t_err = statistics.mean(abs(r[2] / r[3] - 1) for r in rows)
    m_err = statistics.mean(abs(r[4] / r[5] - 1) for r in rows)
    print(f"mean absolute error: step time {100 * t_err:.1f}%, peak memory {100 * m_err:.1f}%")
    for nproc in sorted({r[1] for r in rows}):
        group = [r for r in rows if r[1] == nproc]
        if len(group) < 2:
            continue
        best = min(group, key=lambda r: r[3])
        top3 = sorted(group, key=lambda r: r[2])[:3]
        print(f"{nproc} processes: measured best {best[0]}, predicted top 3 "
              f"{[r[0] for r in top3]}: {'yes' if best in top3 else 'NO'}")


if __name__ == "__main__":
    sys.exit(main())
