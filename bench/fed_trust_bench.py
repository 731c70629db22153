#!/usr/bin/env python3
"""Federated trust on brigade (issue 16): what DP-FedAvg costs in accuracy, and what the robust
aggregation rules hold off.

Both tables train the MLP 784-32-10 (25,450 parameters) on Fashion-MNIST split by
`brigade partition` (seed 0), clients running LOCAL_STEPS SGD steps of batch 32 at lr 0.05 per
round, the coordinator evaluating the global model on the 10,000 test images every round. Each
run is `brigade launch --nproc N+1 -- train BASE.toml --set ...` with run.seed in --seeds; the
script reads the coordinator's metrics.jsonl (summary: test_accuracy, dp_epsilon; rounds:
dp_clipped, answered, refused, selected).

  dp       Dirichlet(0.5) over each population of --dp-populations (clients:expected per round;
           DP-FedAvg samples each client with q = per_round / clients, Poisson), --dp-rounds
           rounds, delta --delta. Rows: FedAvg without DP (fixed-size sampling of per_round
           clients), clipping alone (fed.dp_clip, no noise: epsilon is infinite), and each epsilon
           of --epsilons with the noise multiplier `brigade privacy --epsilon E` gives. Reported:
           the epsilon the run itself reports (must be <= the target), final test accuracy, the
           share of updates the clip shortened.
  attacks  per split of --attack-splits, --attack-clients clients, clients 0 .. --attackers - 1
           attacking, --attack-rounds rounds, every client every round. Columns: no attack, then
           each of --attacks (scale x10, noise of std 1: fed.attack_scale and attack_noise
           defaults). Rows: each rule of --rules with fed.byzantine = f (--attackers) and
           fed.min_clients = every client; trimmed_mean trims --trim-fraction at each end.
           "nan" answers are refused, so that column runs with fed.min_clients = clients -
           attackers and f = attackers - 1 (Krum needs min_clients >= 2 f + 3).

Prints both tables as markdown and writes every run's settings and numbers to --out (JSON).

  OPENBLAS_CORETYPE=Haswell /usr/bin/python3 bench/fed_trust_bench.py \\
      --binary /tmp/trust-bench/brigade --out /tmp/trust-bench/fed_trust.json
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from fed_metrics import coordinator_rounds, metrics_records, save_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BASE_TOML = """\
[run]
name = "trust"
seed = 1

[model]
kind = "mlp"
hidden = [32]

[data]
source = "fashion_mnist"
path = "/usr/share/datasets/fashion-mnist"

[train]
optimizer = "sgd"
lr = 0.05
momentum = 0.0
weight_decay = 0.0
micro_batch = 32

[sync]
method = "fed"

[comm]
timeout_s = 120

[fed]
eval_every = 1
ckpt_every = 0
round_deadline_s = 120
"""

SCHEMES = {"iid": ["--scheme", "iid"], "dir0.5": ["--scheme", "dirichlet", "--alpha", "0.5"]}


def partition(a, split, clients):
    out = os.path.join(a.work, f"{split}-{clients}")
    if not os.path.isdir(out):
        subprocess.run([a.binary, "partition", "--data", "fashion_mnist", "--clients", str(clients),
                        "--seed", "0", "--out", out] + SCHEMES[split], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def noise_for(a, q, rounds, epsilon):
    """The smallest noise multiplier reaching epsilon, from `brigade privacy`."""
    out = subprocess.run([a.binary, "privacy", "--q", repr(q), "--rounds", str(rounds), "--delta",
                          repr(a.delta), "--epsilon", repr(epsilon), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["noise"]


def run(a, name, clients, data, sets):
    """One federation; returns its settings and what its metrics say."""
    folder = os.path.join(a.work, "runs", name)
    shutil.rmtree(folder, ignore_errors=True)
    sets = [f"fed.client_data={data}/client_{{client}}", f"run.out_dir={a.work}/runs",
            f"run.name={name}"] + sets
    cmd = [a.binary, "launch", "--nproc", str(clients + 1), "--", "train", a.base]
    for s in sets:
        cmd += ["--set", s]
    start = time.time()
    with open(os.path.join(a.work, name + ".log"), "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.time() - start
    rs = metrics_records(os.path.join(folder, "metrics.jsonl"))
    rounds = coordinator_rounds(rs)
    summary = ([r for r in rs if r.get("type") == "summary"] or [{}])[-1]
    answered = sum(r.get("answered", 0) for r in rounds)
    selected = [c for r in rounds for c in r.get("selected", [])]
    acc = summary.get("test_accuracy")
    return {
        "name": name, "clients": clients, "sets": sets, "exit_code": rc, "wall_s": wall,
        "rounds_done": len(rounds),
        "test_accuracy": None if acc is None else 100 * acc,
        "best_accuracy": 100 * max((r.get("test_accuracy", 0) for r in rounds), default=0),
        "dp_epsilon": summary.get("dp_epsilon"),
        "answered": answered,
        "clipped": sum(r.get("dp_clipped", 0) for r in rounds),
        "refused": rounds[-1].get("refused", 0) if rounds else 0,  # a running count
        "selected": len(selected),
        "attackers_selected": sum(1 for c in selected if c < a.attackers),
    }


def spread(values):
    """'mean (min-max)' of the accuracies; a failed run (None) is shown as such."""
    if any(v is None for v in values):
        ok = [v for v in values if v is not None]
        return f"failed in {len(values) - len(ok)} of {len(values)}" + (
            f"; others {statistics.mean(ok):.1f}" if ok else "")
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def mean_or_none(values):
    ok = [v for v in values if v is not None]
    return statistics.mean(ok) if len(ok) == len(values) else None


def dp_table(a, seeds, results):
    lines = [f"DP-FedAvg: Fashion-MNIST Dirichlet(0.5), {a.dp_rounds} rounds of {a.local_steps} "
             f"local steps, clip {a.dp_clip:g}, server lr {a.server_lr:g}, delta {a.delta:g}; "
             f"test accuracy %, mean (range) over seeds {','.join(map(str, seeds))}",
             "",
             "| clients | q | setting | noise multiplier z | epsilon reported | test accuracy % "
             "| updates clipped | wall s per run |",
             "|---|---|---|---|---|---|---|---|"]
    for population in a.dp_populations:
        clients, per_round = population
        data = partition(a, "dir0.5", clients)
        q = per_round / clients
        common = [f"fed.rounds={a.dp_rounds}", f"fed.local_steps={a.local_steps}",
                  f"fed.clients_per_round={per_round}", "fed.min_clients=1",
                  f"fed.server_lr={a.server_lr}"]
        # (label, run name, target epsilon, settings)
        rows = [("no DP (FedAvg)", "fedavg", None, [])]
        rows.append(("clip only, z = 0", "clip", float("inf"),
                     [f"fed.dp_clip={a.dp_clip}", "fed.dp_noise=0", f"fed.dp_delta={a.delta}"]))
        for eps in a.epsilons:
            z = noise_for(a, q, a.dp_rounds, eps)
            rows.append((f"epsilon {eps:g}", f"eps{eps:g}", eps, [
                f"fed.dp_clip={a.dp_clip}", f"fed.dp_noise={z}", f"fed.dp_delta={a.delta}"]))
        for label, tag, target, sets in rows:
            runs = []
            for seed in seeds:
                name = f"dp{clients}-{tag}-c{a.dp_clip:g}-lr{a.server_lr:g}-s{seed}"
                r = run(a, name, clients, data, common + sets + [f"run.seed={seed}"])
                r.update({"table": "dp", "setting": label, "q": q, "target_epsilon": target,
                          "seed": seed})
                results.append(r)
                runs.append(r)
                write_json(a, results)
            z = next((s.split("=")[1] for s in sets if s.startswith("fed.dp_noise=")), "-")
            eps = [r["dp_epsilon"] for r in runs]
            if target is None:
                eps_text = "-"
            elif all(e is None for e in eps):
                eps_text = "inf"
            else:
                worst = max(e for e in eps if e is not None)
                eps_text = f"{worst:.4f}" + ("" if worst <= target else " (over the target!)")
            clipped = sum(r["clipped"] for r in runs) / max(1, sum(r["answered"] for r in runs))
            lines.append(f"| {clients} | {q:g} | {label} | {z} | {eps_text} | "
                         f"{spread([r['test_accuracy'] for r in runs])} | "
                         f"{'-' if target is None else f'{100 * clipped:.0f}%'} | "
                         f"{statistics.mean(r['wall_s'] for r in runs):.0f} |")
            print(lines[-1], flush=True)
    return lines


def attack_table(a, split, seeds, results):
    n, f = a.attack_clients, a.attackers
    data = partition(a, split, n)
    columns = ["none"] + a.attacks
    lines = [f"Attacks: Fashion-MNIST {split} over {n} clients, every client every round, "
             f"{a.attack_rounds} rounds of {a.local_steps} local steps, clients 0-{f - 1} "
             f"attacking; test accuracy %, mean (range) over seeds {','.join(map(str, seeds))}",
             "",
             "| rule | " + " | ".join("no attack" if c == "none" else c for c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for rule in a.rules:
        cells = []
        for attack in columns:
            # NaN answers are refused: the round has n - f answers, and Krum's f must fit them.
            refused = attack == "nan"
            min_clients, byz = (n - f, f - 1) if refused else (n, f)
            sets = [f"fed.rounds={a.attack_rounds}", f"fed.local_steps={a.local_steps}",
                    f"fed.min_clients={min_clients}", f'fed.aggregator="{rule}"']
            if rule in ("krum", "multi_krum"):
                sets.append(f"fed.byzantine={byz}")
            if rule == "trimmed_mean":
                sets.append(f"fed.trim_fraction={a.trim_fraction}")
            if attack != "none":
                sets += [f'fed.attack="{attack}"', f"fed.attackers={f}"]
            runs = []
            for seed in seeds:
                r = run(a, f"att-{split}-{rule}-{attack}-s{seed}", n, data,
                        sets + [f"run.seed={seed}"])
                r.update({"table": "attacks", "split": split, "rule": rule, "attack": attack,
                          "seed": seed, "min_clients": min_clients,
                          "byzantine": byz if rule in ("krum", "multi_krum") else None})
                results.append(r)
                runs.append(r)
                write_json(a, results)
            cells.append(spread([r["test_accuracy"] for r in runs]))
        lines.append(f"| {rule} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    return lines


def write_json(a, results):
    save_results(a.out, {"binary": a.binary, "base_toml": BASE_TOML, "args": vars(a),
                         "runs": results})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "brigade"))
    p.add_argument("--work", default="/tmp/brigade-trust")
    p.add_argument("--out", default="", help="JSON of every run")
    p.add_argument("--tables", default="dp,attacks")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--local-steps", type=int, default=20)
    p.add_argument("--dp-populations", default="100:20,200:20",
                   help="clients:expected per round, comma-separated")
    p.add_argument("--dp-rounds", type=int, default=50)
    p.add_argument("--dp-clip", type=float, default=0.1)
    p.add_argument("--server-lr", type=float, default=1.0, help="dp: fed.server_lr of every row")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--epsilons", default="8,4,2,1")
    p.add_argument("--attack-clients", type=int, default=10)
    p.add_argument("--attack-splits", default="dir0.5,iid", help=f"of {sorted(SCHEMES)}")
    p.add_argument("--attack-rounds", type=int, default=30)
    p.add_argument("--attackers", type=int, default=3)
    p.add_argument("--attacks", default="sign_flip,scale,noise,label_flip,nan")
    p.add_argument("--rules", default="mean,median,trimmed_mean,krum,multi_krum")
    p.add_argument("--trim-fraction", type=float, default=0.3)
    a = p.parse_args()
    a.binary = os.path.abspath(a.binary)
    a.epsilons = [float(e) for e in a.epsilons.split(",") if e]
    a.dp_populations = [tuple(int(x) for x in p.split(":")) for p in a.dp_populations.split(",")]
    a.attack_splits = [x for x in a.attack_splits.split(",") if x]
    a.attacks = [x for x in a.attacks.split(",") if x]
    a.rules = [x for x in a.rules.split(",") if x]
    seeds = [int(s) for s in a.seeds.split(",")]
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
    os.makedirs(os.path.join(a.work, "runs"), exist_ok=True)
    a.base = os.path.join(a.work, "base.toml")
    with open(a.base, "w") as f:
        f.write(BASE_TOML)
    results, tables = [], []
    start = time.time()
    tables_wanted = a.tables.split(",")
    if "dp" in tables_wanted:
        tables.append(dp_table(a, seeds, results))
    if "attacks" in tables_wanted:
        for split in a.attack_splits:
            tables.append(attack_table(a, split, seeds, results))
    print()
    for t in tables:
        print("\n".join(t) + "\n")
    print(f"{len(results)} runs in {time.time() - start:.0f} s")
    write_json(a, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
