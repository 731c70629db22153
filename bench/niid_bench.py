#!/usr/bin/env python3
"""NIID-Bench on brigade's federated learning (Li et al., ICDE 2022; Flower's baseline).

Fashion-MNIST, the CNN of configs/federated.toml, 10 clients all in every round, 50 rounds of
10 local epochs, batch 64, SGD lr 0.01 momentum 0.9. Each cell partitions the training split
with `brigade partition` (seed 0), runs `brigade launch --nproc 11 -- train
configs/federated.toml` with the strategy, and reads the coordinator's metrics: final test
accuracy, wall time, bytes per round. Prints a table next to the published one and writes the
results as JSON (--out). Splits c2f and c3f use the label sets that Flower's NIID-Bench baseline
draws (its partition_data_label_quantity with numpy's default_rng(42)), given to
`brigade partition --label-sets`, so the #C cells compare on the anchor's own draw.

  python3 bench/niid_bench.py --cells dir0.5:fedavg,dir0.5:fedprox,dir0.5:scaffold
"""
import argparse
import os
import subprocess
import sys
import time

from fed_metrics import coordinator_rounds, metrics_records, save_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "build", "release", "brigade")
CONFIG = os.path.join(ROOT, "configs", "federated.toml")

# Test accuracy (%) of NIID-Bench's Table (Fashion-MNIST, 10 clients).
ANCHOR = {
    ("iid", "fedavg"): 89.0, ("iid", "fedprox"): 89.5, ("iid", "scaffold"): 89.5,
    ("dir0.5", "fedavg"): 88.4, ("dir0.5", "fedprox"): 88.6, ("dir0.5", "scaffold"): 88.4,
    ("c2", "fedavg"): 81.0, ("c2", "fedprox"): 78.8, ("c2", "scaffold"): 10.0,
    ("c3", "fedavg"): 83.2, ("c3", "fedprox"): 82.5, ("c3", "scaffold"): 84.2,
}
SCHEMES = {
    "iid": ["--scheme", "iid"],
    "dir0.5": ["--scheme", "dirichlet", "--alpha", "0.5"],
    "c2": ["--scheme", "labels", "--labels-per-client", "2"],
    "c3": ["--scheme", "labels", "--labels-per-client", "3"],
    # Flower's draw: client i's labels (see the docstring).
    "c2f": ["--scheme", "labels", "--label-sets", "0,7;1,6;2,4;3,4;4,8;5,0;6,2;7,0;8,5;9,7"],
    "c3f": ["--scheme", "labels", "--label-sets",
            "0,7,6;1,4,8;2,0,6;3,2,0;4,5,9;5,7,1;6,8,4;7,5,3;8,1,9;9,7,6"],
}


def partition(work, split):
    out = os.path.join(work, split)
    if not os.path.isdir(out):
        subprocess.run([BINARY, "partition", "--data", "fashion_mnist", "--clients", "10",
                        "--seed", "0", "--out", out] + SCHEMES[split], check=True)
    return out


def run_cell(work, split, strategy, rounds, epochs, seed=None, extra=()):
    data = partition(work, split)
    name = f"{split}-{strategy}-r{rounds}-e{epochs}"
    if seed is not None:
        name += f"-s{seed}"
    for s in extra:
        name += "-" + s.replace("fed.", "").replace("=", "")
    overrides = [] if seed is None else ["--set", f"run.seed={seed}"]
    for s in extra:
        overrides += ["--set", s]
    cmd = [BINARY, "launch", "--nproc", "11", "--", "train", CONFIG,
           "--set", f"fed.client_data={data}/client_{{client}}",
           "--set", f"fed.strategy={strategy}", "--set", f"fed.rounds={rounds}",
           "--set", f"fed.local_epochs={epochs}", "--set", f"run.out_dir={work}/runs",
           "--set", f"run.name={name}", "--set", "run.resume=auto"] + overrides
    start = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.time() - start
    rounds_done = coordinator_rounds(metrics_records(f"{work}/runs/{name}/metrics.jsonl"))
    last = rounds_done[-1]
    return {
        "split": split, "strategy": strategy, "rounds": rounds, "local_epochs": epochs,
        "seed": seed, "overrides": list(extra),
        "test_accuracy": 100 * last["test_accuracy"], "test_loss": last["test_loss"],
        "best_accuracy": 100 * max(r["test_accuracy"] for r in rounds_done),
        # Label-skewed cells swing by several points from round to round: the mean of the
        # last ten rounds says more than the last one alone.
        "last10_mean_accuracy": 100 * sum(r["test_accuracy"] for r in rounds_done[-10:])
        / len(rounds_done[-10:]),
        "wall_s": wall, "bytes_per_round": last["bytes_down"] + last["bytes_up"],
        "anchor": ANCHOR.get((split.rstrip("f"), strategy)),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cells", default="iid:fedavg,dir0.5:fedavg,c2:fedavg",
                   help="comma-separated split:strategy (splits iid, dir0.5, c2, c3)")
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--local-epochs", type=int, default=10)
    p.add_argument("--work", default="/tmp/brigade-niid")
    p.add_argument("--out", default="")
    p.add_argument("--seeds", default="",
                   help="comma-separated run.seed values (model init and example order); each "
                        "cell runs once per seed (default: the config's seed)")
    p.add_argument("--set", action="append", default=[], dest="extra",
                   help="a config override for every cell, e.g. fed.server_optimizer=avgm")
    a = p.parse_args()
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
    os.makedirs(a.work, exist_ok=True)
    results = []
    print(f"{'split':8} {'strategy':9} {'brigade %':>9} {'NIID-Bench %':>12} {'wall s':>8} "
          f"{'MB/round':>9}", flush=True)
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else [None]
    for cell, seed in [(c, s) for c in a.cells.split(",") for s in seeds]:
        split, strategy = cell.split(":")
        r = run_cell(a.work, split, strategy, a.rounds, a.local_epochs, seed, a.extra)
        results.append(r)
        print(f"{split:8} {strategy:9} {r['test_accuracy']:9.2f} {r['anchor'] or 0:12.1f} "
              f"{r['wall_s']:8.0f} {r['bytes_per_round'] / 1e6:9.2f}", flush=True)
        save_results(a.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
