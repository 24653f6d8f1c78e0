#!/usr/bin/env python3
"""The GPU check's Python half (scripts/gpu-check.sh starts it): what NVML itself says, and the
one comparison of it with what the shipper printed.

    gpu_check.py env INDEX        the environment of a job Slurm gave NVML's GPU INDEX
    gpu_check.py count            how many GPUs NVML sees
    gpu_check.py load MIB READY   a CUDA load: MIB allocated, then matrix products until killed
    gpu_check.py sample OUT STOP  NVML's figures ten times a second until STOP exists
    gpu_check.py compare ...      the shipper's records against NVML's figures; exit 1 on a
                                  mismatch (see `compare`)

`compare` and what it calls need neither a GPU nor pynvml: tests/infra/test_gpu_check.py runs
them on hand-built readings. Tolerances: memory exact (NVML's own numbers, read the same way),
energy within 2 %, power within 5 %, GPM SM activity within 2 points of `nvidia-smi dmon`.
"""

import argparse
import calendar
import json
import os
import sys
import time
from dataclasses import dataclass

ENERGY_TOLERANCE = 0.02
POWER_TOLERANCE = 0.05
GPM_POINTS = 2.0
JOULES_PER_KWH = 3.6e6
# A GPU no job uses reads busy below this (NVML's utilisation, percent).
IDLE_PERCENT = 5.0


@dataclass
class Job:
    """One job of the check: its id, the NVML index of the GPU it was given, the load's pid."""

    id: str
    gpu: int
    pid: int | None = None


@dataclass
class Plan:
    a: Job  # the CUDA load
    b: Job  # allocated A's GPU, no process on it
    c: Job | None  # allocated another GPU, idle (hosts with two GPUs or more)
    collect: float
    flush: float


# ---- reading the files ---------------------------------------------------------------------


def epoch(rfc3339: str) -> float:
    """Seconds since the epoch of an RFC 3339 UTC time (`Z`, any fraction of a second)."""
    whole, _, frac = rfc3339.rstrip("Z").partition(".")
    t = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    return t + (float("0." + frac) if frac else 0.0)


def records(lines) -> list[dict]:
    """The job records of the shipper's `--sink stdout` lines (`{"time", "record"}`); datums
    and anything else are skipped."""
    out = []
    for line in lines:
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict) and isinstance(v.get("record"), dict):
            out.append(v["record"])
    return out


def dmon_sm(lines) -> list[float]:
    """SM activity from `nvidia-smi dmon --gpm-metrics 2` (its last column); `-` and error
    lines are skipped."""
    out = []
    for line in lines:
        cols = line.split()
        if not cols or line.lstrip().startswith("#"):
            continue
        try:
            out.append(float(cols[-1]))
        except ValueError:
            continue
    return out


# ---- the comparison ------------------------------------------------------------------------


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def in_window(nvml: dict, gpu: int, start: float, end: float) -> list[dict]:
    """NVML's readings of `gpu` taken in [start, end]."""
    key = str(gpu)
    return [s["gpus"][key] for s in nvml["samples"] if start <= s["t"] <= end and key in s["gpus"]]


def counter_at(nvml: dict, gpu: int, t: float) -> float | None:
    """NVML's energy counter of `gpu` (mJ) at `t`, between the two readings around it."""
    key = str(gpu)
    pts = [(s["t"], s["gpus"][key]["energy_mj"]) for s in nvml["samples"] if key in s["gpus"]]
    pts = [p for p in pts if p[1] is not None]
    for (t0, e0), (t1, e1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return e0 if t1 == t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)
    return None


class Report:
    def __init__(self):
        self.lines: list[str] = []
        self.failures: list[str] = []

    def check(self, ok: bool, what: str):
        self.lines.append(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            self.failures.append(what)


def windows(samples: list[dict], plan: Plan):
    """Each job_sample with the span its collections cover: since the job's previous sample,
    the first since a flush and a collection before it."""
    prev = None
    for s in sorted(samples, key=lambda s: epoch(s["Time"])):
        end = epoch(s["Time"])
        start = prev if prev is not None else end - plan.flush - plan.collect
        prev = end
        yield s, start, end


def of(recs: list[dict], job: Job, kind: str) -> list[dict]:
    return [r for r in recs if r.get("JobId") == job.id and r.get("Type") == kind]


def near(got, want, tolerance) -> bool:
    return got is not None and want is not None and abs(got - want) <= tolerance * abs(want)


def check_energy(rep: Report, name: str, job: Job, summary: dict, nvml: dict):
    """The summary's GpuEnergyKwh against NVML's counter over [FirstSeen, LastSeen]: the
    shipper counts from its first reading of the GPU to the last with the job on it."""
    first, last = epoch(summary["FirstSeen"]), epoch(summary["LastSeen"])
    e0, e1 = counter_at(nvml, job.gpu, first), counter_at(nvml, job.gpu, last)
    want = None if e0 is None or e1 is None else (e1 - e0) / 1000.0
    got = summary.get("GpuEnergyKwh")
    got_j = None if got is None else got * JOULES_PER_KWH
    rep.check(
        near(got_j, want, ENERGY_TOLERANCE),
        f"{name}: energy {fmt(got_j)} J, NVML's counter {fmt(want)} J from FirstSeen to LastSeen (2 %)",
    )


def fmt(v) -> str:
    return "absent" if v is None else f"{v:.6g}"


def whole(v) -> str:
    """Bytes, every digit: memory is compared exactly."""
    return "absent" if v is None else f"{v:.0f}"


def check_power(rep: Report, what: str, sample: dict, seen: list[dict]):
    """A sample's power against NVML's mean over the readings of its window."""
    power = mean(g["power_w"] for g in seen)
    rep.check(
        near(sample.get("GpuPower"), power, POWER_TOLERANCE),
        f"{what}: power {fmt(sample.get('GpuPower'))} W, NVML's {fmt(power)} W (5 %)",
    )


def compare(recs: list[dict], nvml: dict, dmon: list[float], plan: Plan) -> Report:
    """Every check of the GPU check, on the shipper's records, NVML's readings (what `sample`
    writes) and dmon's SM activity of A's GPU."""
    rep = Report()
    gpus = nvml.get("gpus", {})

    # A: the load alone on its GPU's processes.
    a = plan.a
    samples = [s for s in of(recs, a, "job_sample") if "GpuCount" in s]
    rep.check(len(samples) >= 2, f"A: {len(samples)} job_sample records with GPU figures (2 or more)")
    for s, start, end in windows(samples, plan):
        at = s["Time"]
        seen = in_window(nvml, a.gpu, start, end)
        rep.check(s.get("GpuCount") == 1 and s.get("GpuIdleCount") == 0, f"A {at}: 1 GPU, 0 without its process")
        used = {g["processes"].get(str(a.pid)) for g in seen} - {None}
        rep.check(
            s.get("GpuMemoryUsed") in used,
            f"A {at}: GPU memory {whole(s.get('GpuMemoryUsed'))}, the process's usedGpuMemory {sorted(used)}",
        )
        check_power(rep, f"A {at}", s, seen)
        util = s.get("GpuUtilization")
        if any(a.pid in g.get("mps_clients", []) for g in seen):
            # Through MPS NVML gives the server every client's SM samples; B shares the GPU.
            rep.check(util is None, f"A {at}: utilisation {fmt(util)} (absent: an MPS client's own is unknown)")
        else:
            rep.check((util or 0) > 0, f"A {at}: utilisation {fmt(util)} > 0")
    gpm = gpus.get(str(a.gpu), {}).get("gpm")
    sm = [s["GpuSmActivity"] for s in samples if "GpuSmActivity" in s]
    if gpm is False or (gpm is None and not dmon):
        rep.check(not sm, f"A: no GPM on GPU {a.gpu}, and no SM activity in its records (absent, not 0)")
    else:
        got, want = mean(sm), mean(dmon)
        ok = got is not None and want is not None and abs(got - want) <= GPM_POINTS
        rep.check(ok, f"A: SM activity {fmt(got)} %, dmon's {fmt(want)} % (2 points)")
    summary = of(recs, a, "job_summary")
    rep.check(len(summary) == 1, f"A: {len(summary)} job_summary")
    if summary:
        check_energy(rep, "A", a, summary[-1], nvml)

    # B: allocated A's GPU, no process on it: none of A's figures are B's.
    b = plan.b
    samples = [s for s in of(recs, b, "job_sample") if "GpuCount" in s]
    rep.check(len(samples) >= 1, f"B: {len(samples)} job_sample records with GPU figures (1 or more)")
    per_process = gpus.get(str(b.gpu), {}).get("process_utilization", True)
    for s in samples:
        at = s["Time"]
        rep.check(s.get("GpuCount") == 1 and s.get("GpuIdleCount") == 1, f"B {at}: 1 GPU, 1 without its process")
        rep.check(s.get("GpuMemoryUsed") == 0, f"B {at}: GPU memory {whole(s.get('GpuMemoryUsed'))} (0)")
        rep.check(s.get("GpuPower") == 0, f"B {at}: power {fmt(s.get('GpuPower'))} W (0)")
        util = s.get("GpuUtilization")
        ok = util == 0 or (util is None and not per_process)
        rep.check(ok, f"B {at}: utilisation {fmt(util)} (0; absent only without NVML's per-process figures)")
    summary = of(recs, b, "job_summary")
    rep.check(len(summary) == 1, f"B: {len(summary)} job_summary")
    if summary:
        e = summary[-1].get("GpuEnergyKwh")
        rep.check(e in (None, 0), f"B: energy {fmt(e)} kWh (0)")

    # C: a GPU of its own, idle: the whole GPU's figures are C's.
    c = plan.c
    if c is None:
        rep.lines.append("skip  C: one GPU here")
        return rep
    samples = [s for s in of(recs, c, "job_sample") if "GpuCount" in s]
    rep.check(len(samples) >= 1, f"C: {len(samples)} job_sample records with GPU figures (1 or more)")
    for s, start, end in windows(samples, plan):
        at = s["Time"]
        seen = in_window(nvml, c.gpu, start, end)
        rep.check(s.get("GpuCount") == 1 and s.get("GpuIdleCount") == 1, f"C {at}: 1 GPU, 1 without its process")
        util = s.get("GpuUtilization")
        rep.check(util is not None and util < IDLE_PERCENT, f"C {at}: utilisation {fmt(util)} (idle)")
        used = {g["memory_used"] for g in seen}
        rep.check(
            s.get("GpuMemoryUsed") in used,
            f"C {at}: GPU memory {whole(s.get('GpuMemoryUsed'))}, NVML's used {sorted(used)}",
        )
        check_power(rep, f"C {at}", s, seen)
    summary = of(recs, c, "job_summary")
    rep.check(len(summary) == 1, f"C: {len(summary)} job_summary")
    if summary:
        check_energy(rep, "C", c, summary[-1], nvml)
    return rep


# ---- what needs NVML or CUDA ---------------------------------------------------------------


def nvml():
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def cmd_count(_args) -> int:
    print(nvml().nvmlDeviceGetCount())
    return 0


def cmd_env(args) -> int:
    """SLURM_JOB_ID, CUDA_VISIBLE_DEVICES by UUID (which the shipper and CUDA both read the
    same whatever gres.conf says) and SLURM_JOB_GPUS where Slurm's number is unambiguous (the
    GPU's minor number is its NVML index)."""
    n = nvml()
    h = n.nvmlDeviceGetHandleByIndex(args.index)
    try:
        if n.nvmlDeviceGetMigMode(h)[0] == n.NVML_DEVICE_MIG_ENABLE:
            print(f"GPU {args.index} is in MIG mode: this check needs whole GPUs", file=sys.stderr)
            return 1
    except n.NVMLError:
        pass
    uuid = n.nvmlDeviceGetUUID(h)
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    words = [f"SLURM_JOB_ID={args.job}", f"CUDA_VISIBLE_DEVICES={uuid}"]
    try:
        if n.nvmlDeviceGetMinorNumber(h) == args.index:
            words.append(f"SLURM_JOB_GPUS={args.index}")
    except n.NVMLError:
        pass
    print(" ".join(words))
    return 0


def cmd_load(args) -> int:
    """MIB of GPU memory held, then fp16 matrix products into one output until killed (or
    `--seconds`): no allocation after READY, so the process's memory stays what it is."""
    import torch

    held = torch.ones(args.mib << 20, dtype=torch.uint8, device="cuda")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    c = torch.empty(8192, 8192, device="cuda", dtype=torch.float16)
    warm = time.time() + 3
    while time.time() < warm:
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    with open(args.ready, "w") as f:
        f.write(f"{os.getpid()} {int(held.sum().item())}\n")
    end = time.time() + args.seconds
    while time.time() < end:
        for _ in range(8):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    return 0


def cmd_sample(args) -> int:
    """Each GPU's power, energy counter, utilisation, memory used (v2 where pynvml has it, as
    the shipper reads it) and processes' usedGpuMemory, ten times a second, to OUT (JSON)."""
    n = nvml()
    handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
    gpus = {}
    for i, h in enumerate(handles):
        info = {"gpm": None, "process_utilization": True}
        try:
            info["gpm"] = bool(n.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)
        except (AttributeError, n.NVMLError):
            pass
        try:
            n.nvmlDeviceGetProcessUtilization(h, 0)
        except n.NVMLError_NotSupported:
            info["process_utilization"] = False
        except n.NVMLError:
            pass
        gpus[str(i)] = info

    def memory_used(h):
        try:
            return n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2).used
        except (AttributeError, TypeError, n.NVMLError):
            return n.nvmlDeviceGetMemoryInfo(h).used

    def mps_clients(h):
        try:
            return sorted(p.pid for p in n.nvmlDeviceGetMPSComputeRunningProcesses(h))
        except (AttributeError, n.NVMLError):
            return []

    samples = []
    end = time.time() + args.max_seconds
    while not os.path.exists(args.stop) and time.time() < end:
        s = {"t": time.time(), "gpus": {}}
        for i, h in enumerate(handles):
            try:
                procs = n.nvmlDeviceGetComputeRunningProcesses(h)
                s["gpus"][str(i)] = {
                    "power_w": n.nvmlDeviceGetPowerUsage(h) / 1000.0,
                    "energy_mj": n.nvmlDeviceGetTotalEnergyConsumption(h),
                    "util": n.nvmlDeviceGetUtilizationRates(h).gpu,
                    "memory_used": memory_used(h),
                    "processes": {str(p.pid): p.usedGpuMemory for p in procs},
                    "mps_clients": mps_clients(h),
                }
            except n.NVMLError as e:
                print(f"GPU {i}: {e}", file=sys.stderr)
        samples.append(s)
        if len(samples) == 1 and args.started:
            open(args.started, "w").close()
        time.sleep(0.1)
    with open(args.out, "w") as f:
        json.dump({"gpus": gpus, "samples": samples}, f)
    return 0


def job(text: str, with_pid: bool) -> Job:
    parts = text.split(":")
    if with_pid:
        return Job(id=parts[0], pid=int(parts[1]), gpu=int(parts[2]))
    return Job(id=parts[0], gpu=int(parts[1]))


def cmd_compare(args) -> int:
    plan = Plan(
        a=job(args.a, True),
        b=job(args.b, False),
        c=job(args.c, False) if args.c else None,
        collect=args.collect,
        flush=args.flush,
    )
    with open(args.shipper) as f:
        recs = records(f)
    with open(args.nvml) as f:
        readings = json.load(f)
    dmon = []
    if args.dmon and os.path.exists(args.dmon):
        with open(args.dmon) as f:
            dmon = dmon_sm(f)
    rep = compare(recs, readings, dmon, plan)
    print("\n".join(rep.lines))
    if rep.failures:
        print(f"gpu-check: {len(rep.failures)} mismatch(es)", file=sys.stderr)
        return 1
    print("gpu-check: the shipper agrees with NVML")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("count").set_defaults(fn=cmd_count)
    e = sub.add_parser("env")
    e.add_argument("index", type=int)
    e.add_argument("job")
    e.set_defaults(fn=cmd_env)
    ld = sub.add_parser("load")
    ld.add_argument("mib", type=int)
    ld.add_argument("ready")
    ld.add_argument("--seconds", type=float, default=100.0)
    ld.set_defaults(fn=cmd_load)
    s = sub.add_parser("sample")
    s.add_argument("out")
    s.add_argument("stop")
    s.add_argument("--max-seconds", type=float, default=100.0)
    s.add_argument("--started", help="made once the first readings are taken")
    s.set_defaults(fn=cmd_sample)
    c = sub.add_parser("compare")
    c.add_argument("--shipper", required=True)
    c.add_argument("--nvml", required=True)
    c.add_argument("--dmon")
    c.add_argument("--a", required=True, help="JOBID:PID:GPU of the load")
    c.add_argument("--b", required=True, help="JOBID:GPU of the job sharing its GPU")
    c.add_argument("--c", help="JOBID:GPU of the idle job on another GPU")
    c.add_argument("--collect", type=float, required=True)
    c.add_argument("--flush", type=float, required=True)
    c.set_defaults(fn=cmd_compare)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
