"""What the federated benchmarks read from and write after a run: the coordinator's records in
a run folder's metrics.jsonl (docs/metrics.md), and a results file."""
import json
import os


def metrics_records(path):
    """Every record of a metrics.jsonl, in order; [] when the run wrote none."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def coordinator_rounds(records):
    """The "round" records that stand: a resumed run marks the rounds it redid as superseded."""
    return [r for r in records if r.get("type") == "round" and not r.get("superseded")]


def save_results(path, results):
    """Writes results as JSON to path (after every run, so a stopped sweep keeps its rows); no-op
    without a path."""
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
