#!/usr/bin/env python3
"""Where the CPU goes while a brigade job runs: per worker process, the share of wall time
each of its threads ran (user + system, from /proc/<pid>/task/<tid>/stat), and the machine's
split from /proc/stat (user, system, softirq, idle, steal), over one window.

Workers are the processes whose main thread is named brigade-train (`brigade train`, also
under `brigade launch`). Threads are named by brigade (brigade-comm: the communicator's
queue, running the collectives; brigade-beat: the heartbeat); a thread that inherited the
main thread's name is Gloo's transport loop.

The window opens --delay seconds after the workers appear (past start-up) and closes at the
last sample (every 0.5 s) before the first worker exits, or after --window seconds.

  bench/cpu_split.py [--wait S] [--delay S] [--window S]    (started beside the job)
"""
import argparse
import os
import time

TICK = os.sysconf("SC_CLK_TCK")


def workers():
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == "brigade-train":
                        out.append(int(pid))
            except OSError:
                pass
    return sorted(out)


def thread_ticks(pid):
    ticks = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:  # exited
        return ticks
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks[int(tid)] = (name, int(fields[11]) + int(fields[12]))
        except OSError:
            pass
    return ticks


def machine():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return dict(zip(["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"], v))


def label(pid, tid, name):
    if tid == pid:
        return "main (compute)"
    if name == "brigade-train":
        return "gloo transport"
    return name


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--wait", type=float, default=10.0, help="seconds to wait for the workers")
    p.add_argument("--delay", type=float, default=5.0)
    p.add_argument("--window", type=float, default=600.0)
    args = p.parse_args()
    deadline = time.time() + args.wait
    pids = workers()
    while not pids and time.time() < deadline:
        time.sleep(0.2)
        pids = workers()
    if not pids:
        raise SystemExit("no brigade-train process found")
    time.sleep(args.delay)
    t0, m0 = time.time(), machine()
    a = {pid: thread_ticks(pid) for pid in pids}
    t1, m1, b = t0, m0, a
    while time.time() - t0 < args.window:
        time.sleep(0.5)
        t, m = time.time(), machine()
        snap = {pid: thread_ticks(pid) for pid in pids}
        if not all(snap[pid] for pid in pids):
            break
        t1, m1, b = t, m, snap
    if t1 == t0:
        raise SystemExit("the workers exited before the window opened")
    wall = t1 - t0
    for pid in pids:
        parts = []
        total = 0.0
        for tid, (name, ticks) in sorted(b[pid].items()):
            before = a[pid].get(tid, (name, ticks))[1]
            share = (ticks - before) / TICK / wall
            total += share
            if share >= 0.001:
                parts.append(f"{label(pid, tid, name)} {100 * share:.1f}%")
        print(f"worker pid {pid}: {100 * total:.1f}% of a core: " + ", ".join(parts))
    d = {k: m1[k] - m0[k] for k in m0}
    s = sum(d.values())
    print(f"machine ({wall:.1f} s window): " + ", ".join(f"{k} {100 * v / s:.1f}%" for k, v in d.items() if v))


if __name__ == "__main__":
    main()
