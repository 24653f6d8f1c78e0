#!/usr/bin/env python3
"""Watches one process for a while and says whether its memory and CPU stayed flat.

    watch.py PID SECONDS CSV

Samples VmRSS and CPU time (utime + stime) every 5 s into CSV, then prints one row per minute
(peak RSS, CPU as a share of one core) and compares the second minute (after warm-up) with the
last. Exit 1 when RSS grew by more than 10 % + 2 MiB (a leak), or when the process died.
"""
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
STEP = 5


def sample(pid):
    with open(f"/proc/{pid}/status") as f:
        rss_kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return rss_kb / 1024, cpu


def main():
    pid, seconds, csv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    start = time.monotonic()
    rows = []
    with open(csv, "w") as out:
        out.write("elapsed_s,rss_mib,cpu_s\n")
        while time.monotonic() - start < seconds:
            try:
                rss, cpu = sample(pid)
            except (FileNotFoundError, ProcessLookupError, StopIteration):
                print(f"process {pid} is gone after {time.monotonic() - start:.0f} s", file=sys.stderr)
                return 1
            t = time.monotonic() - start
            rows.append((t, rss, cpu))
            out.write(f"{t:.1f},{rss:.2f},{cpu:.2f}\n")
            out.flush()
            done = int(t) // 60
            if rows and len(rows) % (60 // STEP) == 0:
                print(f"  {done:2d} min: RSS {rss:6.1f} MiB, CPU time {cpu:7.2f} s", flush=True)
            time.sleep(STEP)

    minutes = {}
    for t, rss, cpu in rows:
        m = int(t // 60)
        lo = minutes.setdefault(m, [rss, cpu, cpu, t, t])
        lo[0] = max(lo[0], rss)
        lo[2], lo[4] = cpu, t
    print("minute  peak RSS MiB  CPU % of a core")
    table = []
    for m in sorted(minutes):
        peak, c0, c1, t0, t1 = minutes[m]
        share = 100 * (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0
        table.append((m, peak, share))
        print(f"{m:6d}  {peak:12.1f}  {share:15.3f}")
    if len(table) < 3:
        print("too short to judge", file=sys.stderr)
        return 1
    (_, rss_early, cpu_early), (_, rss_late, cpu_late) = table[1], table[-1]
    total_cpu = rows[-1][2] - rows[0][2]
    span = rows[-1][0] - rows[0][0]
    print(
        f"RSS minute 1 -> last: {rss_early:.1f} -> {rss_late:.1f} MiB; "
        f"CPU minute 1 -> last: {cpu_early:.3f} % -> {cpu_late:.3f} %; "
        f"mean CPU {100 * total_cpu / span:.3f} % of a core over {span:.0f} s"
    )
    if rss_late > rss_early * 1.10 + 2:
        print("RSS grew: a leak?", file=sys.stderr)
        return 1
    print("flat")
    return 0


if __name__ == "__main__":
    sys.exit(main())
