#!/usr/bin/env python3
"""Secure aggregation's cost per round against plain FedAvg (issue 16).

Fashion-MNIST split IID over N clients (10 and 50 by default), the CNN of
configs/federated.toml (44,426 parameters), every client in every round, one local step of 16
examples so that the round is almost all protocol; plain and secure runs alternate, so both see
the same machine. Reads the coordinator's round records: the median round time (excluding the
first, which waits for clients to connect) and the bytes per client per round, both ways.

  OPENBLAS_CORETYPE=Haswell python3 bench/secagg_bench.py --clients 10,50 --rounds 6
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "federated.toml")


def run(binary, work, clients, rounds, secure, repeat):
    name = f"n{clients}-{'secure' if secure else 'plain'}-{repeat}"
    cmd = [binary, "launch", "--nproc", str(clients + 1), "--", "train", CONFIG,
           "--set", f"fed.client_data={work}/part{clients}/client_{{client}}",
           "--set", f"fed.rounds={rounds}", "--set", "fed.local_steps=1",
           "--set", "train.micro_batch=16", "--set", "fed.eval_every=0",
           "--set", f"fed.min_clients={clients}", "--set", "fed.clients_per_round=0",
           "--set", f"fed.secure_aggregation={'true' if secure else 'false'}",
           "--set", f"run.out_dir={work}/runs", "--set", f"run.name={name}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = [json.loads(l) for l in open(f"{work}/runs/{name}/metrics.jsonl")]
    return [r for r in records if r.get("type") == "round"][1:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--clients", default="10,50")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "brigade"))
    p.add_argument("--out", default="")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="secagg-bench-")
    rows = []
    for n in [int(x) for x in a.clients.split(",")]:
        subprocess.run([a.binary, "partition", "--data", "fashion_mnist", "--clients", str(n),
                        "--scheme", "iid", "--seed", "0", "--out", f"{work}/part{n}"],
                       check=True, stdout=subprocess.DEVNULL)
        got = {False: [], True: []}
        for repeat in range(a.repeats):
            for secure in (False, True):
                got[secure] += run(a.binary, work, n, a.rounds, secure, repeat)
        row = {"clients": n}
        for secure, records in got.items():
            key = "secure" if secure else "plain"
            row[key + "_round_s"] = statistics.median(r["round_s"] for r in records)
            row[key + "_bytes_up"] = statistics.median(r["bytes_up"] / r["answered"] for r in records)
            row[key + "_bytes_down"] = statistics.median(r["bytes_down"] / r["asked"] for r in records)
        rows.append(row)
    print("| clients | plain s/round | secure s/round | time x | plain MB up/client | "
          "secure MB up/client | plain MB down/client | secure MB down/client | bytes x |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        plain_b = r["plain_bytes_up"] + r["plain_bytes_down"]
        secure_b = r["secure_bytes_up"] + r["secure_bytes_down"]
        print(f"| {r['clients']} | {r['plain_round_s']:.3f} | {r['secure_round_s']:.3f} | "
              f"{r['secure_round_s'] / r['plain_round_s']:.2f} | {r['plain_bytes_up'] / 1e6:.3f} | "
              f"{r['secure_bytes_up'] / 1e6:.3f} | {r['plain_bytes_down'] / 1e6:.3f} | "
              f"{r['secure_bytes_down'] / 1e6:.3f} | {secure_b / plain_b:.2f} |")
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
