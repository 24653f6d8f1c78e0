#!/usr/bin/env python3
"""Known workloads for test jobs: each does exactly what it says, so a test can compare what the
shipper reports with the truth.

  workload.py memory MB SECONDS        touch MB of anonymous memory, hold it
  workload.py burn CORES SECONDS       keep CORES processes busy
  workload.py threads N SECONDS        start N sleeping threads
  workload.py files N SECONDS          hold N open files
  workload.py write BYTES PATH DELAY SPREAD HOLD
                                       wait DELAY seconds, write BYTES to PATH evenly over
                                       SPREAD seconds (fsync'd), then hold HOLD seconds
  workload.py sleep SECONDS
"""
import os
import sys
import threading
import time


def memory(mb, seconds):
    block = bytearray(mb * 1024 * 1024)
    for i in range(0, len(block), 4096):  # touch every page so it is really charged
        block[i] = 1
    time.sleep(seconds)


def burn(cores, seconds):
    end = time.time() + seconds
    pids = []
    for _ in range(cores):
        pid = os.fork()
        if pid == 0:
            while time.time() < end:
                pass
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)


def threads(n, seconds):
    stop = threading.Event()
    ts = [threading.Thread(target=stop.wait, args=(seconds,)) for _ in range(n)]
    for t in ts:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()


def files(n, seconds):
    held = [open(os.devnull, "rb") for _ in range(n)]
    time.sleep(seconds)
    for f in held:
        f.close()


def write(nbytes, path, delay, spread, hold):
    time.sleep(delay)
    chunk = b"w" * (1024 * 1024)
    chunks = max(1, (nbytes + len(chunk) - 1) // len(chunk))
    start = time.time()
    left = nbytes
    with open(path, "wb") as f:
        for i in range(chunks):
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
            f.flush()
            os.fsync(f.fileno())
            # Keep to the schedule: chunk i ends at start + spread * (i + 1) / chunks.
            delay = start + spread * (i + 1) / chunks - time.time()
            if delay > 0:
                time.sleep(delay)
    time.sleep(hold)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    kind, args = argv[1], argv[2:]
    if kind == "memory":
        memory(int(args[0]), float(args[1]))
    elif kind == "burn":
        burn(int(args[0]), float(args[1]))
    elif kind == "threads":
        threads(int(args[0]), float(args[1]))
    elif kind == "files":
        files(int(args[0]), float(args[1]))
    elif kind == "write":
        write(int(args[0]), args[1], float(args[2]), float(args[3]), float(args[4]))
    elif kind == "sleep":
        time.sleep(float(args[0]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
