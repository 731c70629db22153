#!/usr/bin/env python3
"""A federated GPT on text clients against the same GPT trained on the pooled text (issue 15).

The corpus is the Debian fortunes (each fortune one paragraph of corpus.txt). `brigade partition
--data text` keeps 5% of the documents out as validation.txt, the coordinator's test set, and
splits the rest among --clients clients (iid, and quantity skew with beta 0.5). Every run trains
the byte-level GPT of configs/federated-text.toml on the same number of windows:

  central   one process, data.path = every client's train.txt (all the text a federation
            holds), STEPS = rounds x clients x local_steps AdamW steps of 16 windows at the same
            constant lr; evaluated afterwards on validation.txt with `brigade eval --all`.
  sync      the same samples in STEPS / clients steps of clients x 16 windows: what the clients
            would reach synchronising every step (DDP; FedAvg with one local step is its SGD).
  fedavg    the federation, every client every round, --local-steps AdamW steps each (a fresh
            optimizer each round), plain averaging; evaluated by the coordinator on
            validation.txt each round.
  other rows: the same with the --arms strategies/server optimizers (e.g. fedadam).

Reported: held-out loss (nats per byte token) and bits per byte after the last round, wall time,
bytes moved per round.

  OPENBLAS_CORETYPE=Haswell /usr/bin/python3 bench/fed_text_bench.py --out fed_text.json
"""
import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import time

from fed_metrics import coordinator_rounds, metrics_records, save_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "build", "release", "brigade")
CONFIG = os.path.join(ROOT, "configs", "federated-text.toml")
FORTUNES = "/usr/share/games/fortunes"

ARMS = {
    "fedavg": [],
    "fedprox": ["--set", "fed.strategy=fedprox", "--set", "fed.mu=0.01"],
    "fedadam": ["--set", "fed.server_optimizer=adam", "--set", "fed.server_lr=0.01"],
    "fedavgm": ["--set", "fed.server_optimizer=avgm", "--set", "fed.server_lr=1.0",
                "--set", "fed.server_momentum=0.5"],
    # DiLoCo's outer step (Douillard et al. 2023: lr 0.7, momentum 0.9), heavy-ball here.
    "fedavgm9": ["--set", "fed.server_optimizer=avgm", "--set", "fed.server_lr=0.7",
                 "--set", "fed.server_momentum=0.9"],
}


def fortunes_corpus(path):
    """Every fortune of the Debian package as one paragraph."""
    docs = []
    for f in sorted(os.listdir(FORTUNES)):
        full = os.path.join(FORTUNES, f)
        if "." in f or not os.path.isfile(full):
            continue
        text = open(full, encoding="utf-8", errors="replace").read()
        for doc in text.split("\n%\n"):
            lines = [l.rstrip() for l in doc.strip("\n").split("\n") if l.strip()]
            if lines:
                docs.append("\n".join(lines))
    with open(path, "w") as out:
        out.write("\n\n".join(docs) + "\n")
    return len(docs)


def partition(work, corpus, scheme, clients):
    out = os.path.join(work, f"{scheme}{clients}")
    if not os.path.isdir(out):
        extra = ["--beta", "0.5"] if scheme == "quantity" else []
        subprocess.run([BINARY, "partition", "--data", "text", "--path", corpus, "--clients",
                        str(clients), "--scheme", scheme, "--seed", "0", "--out", out] + extra,
                       check=True, stdout=subprocess.DEVNULL)
    return out


def run_central(work, data, steps, name, batch_multiple=1):
    run_dir = os.path.join(work, "runs")
    clients = sorted(glob.glob(os.path.join(data, "client_*", "train.txt")))
    cmd = [BINARY, "train", CONFIG, "--set", "sync.method=ddp", "--set", "data.source=text",
           "--set", f"data.path={os.path.join(data, 'client_*', 'train.txt')}",
           "--set", "data.val_fraction=0.01", "--set", f"train.steps={steps}",
           "--set", f"train.micro_batch={16 * batch_multiple}",
           # Federated clients do not clip (train.grad_clip applies to centralised runs).
           "--set", "train.grad_clip=0",
           "--set", "train.eval_every=0", "--set", f"train.ckpt_every={steps}",
           "--set", f"run.out_dir={run_dir}", "--set", f"run.name={name}",
           "--set", "run.resume=never"]
    start = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.time() - start
    js = os.path.join(work, name + ".eval.json")
    subprocess.run([BINARY, "eval", "--ckpt", os.path.join(run_dir, name), "--data",
                    os.path.join(data, "validation.txt"), "--all", "--batches", "0",
                    "--json", js], check=True, stdout=subprocess.DEVNULL)
    ev = json.load(open(js))
    return {"arm": name.split("-")[1], "clients_files": len(clients), "test_loss": ev["loss"],
            "wall_s": wall, "bytes_per_round": 0}


def run_fed(work, data, clients, rounds, local_steps, arm, name):
    run_dir = os.path.join(work, "runs")
    cmd = [BINARY, "launch", "--nproc", str(clients + 1), "--", "train", CONFIG,
           "--set", f"fed.client_data={data}/client_{{client}}",
           "--set", f"fed.test_data={data}/validation.txt",
           "--set", f"fed.rounds={rounds}", "--set", f"fed.local_steps={local_steps}",
           "--set", f"run.out_dir={run_dir}", "--set", f"run.name={name}",
           "--set", "run.resume=never"] + ARMS[arm]
    start = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.time() - start
    rounds_done = coordinator_rounds(metrics_records(os.path.join(run_dir, name, "metrics.jsonl")))
    last = rounds_done[-1]
    return {"arm": arm, "test_loss": last["test_loss"], "wall_s": wall,
            "bytes_per_round": last["bytes_down"] + last["bytes_up"],
            "loss_by_round": [r["test_loss"] for r in rounds_done]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--local-steps", type=int, default=25)
    p.add_argument("--schemes", default="iid,quantity")
    p.add_argument("--arms", default="central,fedavg")
    p.add_argument("--work", default="/tmp/brigade-fedtext")
    p.add_argument("--out", default="")
    a = p.parse_args()
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
    os.makedirs(a.work, exist_ok=True)
    corpus = os.path.join(a.work, "corpus.txt")
    if not os.path.exists(corpus):
        print(f"corpus: {fortunes_corpus(corpus)} fortunes", flush=True)
    steps = a.rounds * a.clients * a.local_steps
    results = []
    print(f"{'split':9} {'arm':8} {'test loss':>9} {'bits/byte':>9} {'wall s':>7} {'MB/round':>9}",
          flush=True)
    for scheme in a.schemes.split(","):
        data = partition(a.work, corpus, scheme, a.clients)
        for arm in a.arms.split(","):
            name = f"{scheme}{a.clients}-{arm}-r{a.rounds}-k{a.local_steps}"
            shutil.rmtree(os.path.join(a.work, "runs", name), ignore_errors=True)
            if arm == "central":
                r = run_central(a.work, data, steps, name)
            elif arm == "sync":
                # What the clients' examples give when they synchronise every step (DDP of
                # `clients` ranks): the same samples in steps / clients steps of clients x 16.
                r = run_central(a.work, data, steps // a.clients, name, a.clients)
            else:
                r = run_fed(a.work, data, a.clients, a.rounds, a.local_steps, arm, name)
            r.update({"split": scheme, "clients": a.clients, "rounds": a.rounds,
                      "local_steps": a.local_steps, "samples_steps": steps})
            results.append(r)
            print(f"{scheme:9} {arm:8} {r['test_loss']:9.4f} {r['test_loss'] / math.log(2):9.3f} "
                  f"{r['wall_s']:7.0f} {r['bytes_per_round'] / 1e6:9.2f}", flush=True)
            save_results(a.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
