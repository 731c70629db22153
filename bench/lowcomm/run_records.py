"""What the lowcomm benchmark scripts share: running one arm with its log, and reading back the
step records and the final summary that rank 0 wrote to metrics.jsonl."""
import json
import subprocess
import sys


def run_arm_logged(cmd, log_path, name):
    """Runs cmd with stdout and stderr in log_path; exits naming the arm and log on failure."""
    with open(log_path, "w") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        sys.exit(f"arm {name} failed (exit {rc}); see {log_path}")


def read_metrics(path):
    """(step records, final summary) of a metrics.jsonl."""
    steps, summary = [], {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "tokens_per_s" in rec:
                steps.append(rec)
            elif rec.get("final"):
                summary = rec
    return steps, summary
