"""scripts/gpu_check.py's comparison of the shipper's records with NVML's own figures, on the
hand-built run in fixtures/gpu-check/ (see its README): the run as it should be passes, and
each way the shipper could be wrong fails on exactly its check."""

import copy
import importlib.util
import json

from conftest import REPO

FIXTURES = REPO / "tests" / "infra" / "fixtures" / "gpu-check"

_spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)


def load(d, load_pid, idle_gpu):
    """A run's records, NVML readings, dmon figures and plan in folder `d`: job A's load as
    `load_pid`, job C on GPU `idle_gpu` (None: one GPU, no C)."""
    with open(d / "shipper.jsonl") as f:
        recs = gpu_check.records(f)
    with open(d / "nvml.json") as f:
        nvml = json.load(f)
    with open(d / "dmon.txt") as f:
        dmon = gpu_check.dmon_sm(f)
    plan = gpu_check.Plan(
        a=gpu_check.Job(id="4242421", gpu=0, pid=load_pid),
        b=gpu_check.Job(id="4242422", gpu=0),
        c=None if idle_gpu is None else gpu_check.Job(id="4242423", gpu=idle_gpu),
        collect=2.0,
        flush=4.0,
    )
    return recs, nvml, dmon, plan


def run():
    """The hand-built run."""
    return load(FIXTURES, 5000, 1)


def record(recs, job, kind, time=None):
    return next(r for r in recs if r["JobId"] == job and r["Type"] == kind and time in (None, r["Time"]))


def failures(recs, nvml, dmon, plan):
    return gpu_check.compare(recs, nvml, dmon, plan).failures


def test_the_files_are_read_as_the_shipper_and_dmon_write_them():
    recs, _, dmon, _ = run()
    assert len(recs) == 9, "the datum line is not a record"
    assert dmon == [95, 96, 97, 96, 96, 96, 97, 95, 96, 96]
    assert gpu_check.epoch("2026-11-27T10:00:04.250000000Z") - gpu_check.epoch("2026-11-27T10:00:04Z") == 0.25


def test_energy_is_nvmls_counter_between_first_and_last_seen():
    _, nvml, _, _ = run()
    t0 = gpu_check.epoch("2026-11-27T10:00:00Z")
    assert gpu_check.counter_at(nvml, 0, t0 + 10) - gpu_check.counter_at(nvml, 0, t0) == 7_000_000
    assert gpu_check.counter_at(nvml, 1, t0 + 2.5) == 2_000_000_000 + 175_000, "between two readings"
    assert gpu_check.counter_at(nvml, 0, t0 + 60) is None, "outside the readings"


def test_the_run_as_it_should_be_passes():
    rep = gpu_check.compare(*run())
    assert rep.failures == [], "\n".join(rep.lines)
    assert sum(line.startswith("ok") for line in rep.lines) == 34


def test_energy_off_by_more_than_two_percent_fails():
    recs, nvml, dmon, plan = run()
    # 7,000 J: 2.5 % more is 7,175 J; 1.5 % more (7,105 J) passes.
    record(recs, "4242421", "job_summary")["GpuEnergyKwh"] = 7105 / 3.6e6
    assert failures(recs, nvml, dmon, plan) == []
    record(recs, "4242421", "job_summary")["GpuEnergyKwh"] = 7175 / 3.6e6
    (f,) = failures(recs, nvml, dmon, plan)
    assert f.startswith("A: energy 7175 J, NVML's counter 7000 J"), f


def test_memory_must_be_the_processs_to_the_byte():
    recs, nvml, dmon, plan = run()
    record(recs, "4242421", "job_sample", "2026-11-27T10:00:08Z")["GpuMemoryUsed"] = 5479858176 + 4096
    (f,) = failures(recs, nvml, dmon, plan)
    assert f == "A 2026-11-27T10:00:08Z: GPU memory 5479862272, the process's usedGpuMemory [5479858176]"


def test_power_within_five_percent():
    recs, nvml, dmon, plan = run()
    record(recs, "4242421", "job_sample", "2026-11-27T10:00:04Z")["GpuPower"] = 733.0  # 4.7 %
    assert failures(recs, nvml, dmon, plan) == []
    record(recs, "4242421", "job_sample", "2026-11-27T10:00:04Z")["GpuPower"] = 740.0  # 5.7 %
    (f,) = failures(recs, nvml, dmon, plan)
    assert f == "A 2026-11-27T10:00:04Z: power 740 W, NVML's 700 W (5 %)"


def test_sm_activity_within_two_points_of_dmon():
    recs, nvml, dmon, plan = run()
    for t in ("2026-11-27T10:00:04Z", "2026-11-27T10:00:08Z"):
        record(recs, "4242421", "job_sample", t)["GpuSmActivity"] = 98.5
    (f,) = failures(recs, nvml, dmon, plan)
    assert f == "A: SM activity 98.5 %, dmon's 96 % (2 points)"


def test_without_gpm_sm_activity_must_be_absent_not_zero():
    recs, nvml, _, plan = run()
    nvml["gpus"]["0"]["gpm"] = False
    (f,) = failures(recs, nvml, [], plan)
    assert f.startswith("A: no GPM on GPU 0"), f
    for r in recs:
        r.pop("GpuSmActivity", None)
    assert failures(recs, nvml, [], plan) == []


def test_the_job_sharing_the_gpu_gets_none_of_the_loads_figures():
    recs, nvml, dmon, plan = run()
    b = record(recs, "4242422", "job_sample", "2026-11-27T10:00:04Z")
    b.update(GpuMemoryUsed=5479858176.0, GpuPower=700.0, GpuUtilization=82.0, GpuIdleCount=0.0)
    assert failures(recs, nvml, dmon, plan) == [
        "B 2026-11-27T10:00:04Z: 1 GPU, 1 without its process",
        "B 2026-11-27T10:00:04Z: GPU memory 5479858176 (0)",
        "B 2026-11-27T10:00:04Z: power 700 W (0)",
        "B 2026-11-27T10:00:04Z: utilisation 82 (0; absent only without NVML's per-process figures)",
    ]
    # Without NVML's per-process utilisation the shipper cannot split it: absent is right.
    recs, nvml, dmon, plan = run()
    del record(recs, "4242422", "job_sample", "2026-11-27T10:00:04Z")["GpuUtilization"]
    assert len(failures(copy.deepcopy(recs), nvml, dmon, plan)) == 1
    nvml["gpus"]["0"]["process_utilization"] = False
    assert failures(recs, nvml, dmon, plan) == []


def test_the_idle_job_reads_its_whole_idle_gpu():
    recs, nvml, dmon, plan = run()
    c = record(recs, "4242423", "job_sample", "2026-11-27T10:00:08Z")
    c.update(GpuMemoryUsed=0.0, GpuUtilization=40.0)
    assert failures(recs, nvml, dmon, plan) == [
        "C 2026-11-27T10:00:08Z: utilisation 40 (idle)",
        "C 2026-11-27T10:00:08Z: GPU memory 0, NVML's used [566231040]",
    ]


def test_a_missing_summary_or_sample_fails_and_one_gpu_skips_c():
    recs, nvml, dmon, plan = run()
    recs = [r for r in recs if not (r["JobId"] == "4242421" and r["Type"] == "job_summary")]
    assert failures(recs, nvml, dmon, plan) == ["A: 0 job_summary"]
    recs, nvml, dmon, plan = run()
    plan.c = None
    recs = [r for r in recs if r["JobId"] != "4242423"]
    rep = gpu_check.compare(recs, nvml, dmon, plan)
    assert rep.failures == [] and rep.lines[-1] == "skip  C: one GPU here"


# ---- runs captured on an H200 (fixtures/gpu-check-h200/README.md) --------------------------

H200 = REPO / "tests" / "infra" / "fixtures" / "gpu-check-h200"


def h200(run_dir, load_pid):
    """A captured run, as the script compared it."""
    return load(H200 / run_dir, load_pid, None)


def test_the_h200_run_agrees_line_for_line_with_what_it_printed():
    rep = gpu_check.compare(*h200("agrees", 613))
    assert rep.failures == [], "\n".join(rep.lines)
    printed = (H200 / "agrees" / "report.txt").read_text().splitlines()
    assert rep.lines + ["gpu-check: the shipper agrees with NVML"] == printed


def test_the_h200_run_through_mps_agrees_line_for_line_with_what_it_printed():
    rep = gpu_check.compare(*h200("mps", 1012))
    assert rep.failures == [], "\n".join(rep.lines)
    assert sum("utilisation absent (absent: an MPS client's own is unknown)" in line for line in rep.lines) == 3
    printed = (H200 / "mps" / "report.txt").read_text().splitlines()
    assert rep.lines + ["gpu-check: the shipper agrees with NVML"] == printed


def test_the_h200_run_before_the_fix_fails_on_the_stranger_alone():
    rep = gpu_check.compare(*h200("stranger", 612))
    at = "B 2026-11-28T19:07:57.542059449Z"
    assert rep.failures == [
        f"{at}: GPU memory 19905544192 (0)",
        f"{at}: power 345.724 W (0)",
        f"{at}: utilisation 50 (0; absent only without NVML's per-process figures)",
        "B: energy 0.000384645 kWh (0)",
    ]
    assert rep.lines == (H200 / "stranger" / "report.txt").read_text().splitlines()


def test_through_mps_the_loads_utilisation_must_be_absent():
    recs, nvml, dmon, plan = run()
    for s in nvml["samples"]:
        s["gpus"]["0"]["mps_clients"] = [5000]
    # The hand-built run's A has a utilisation: through MPS the shipper cannot know it.
    got = failures(copy.deepcopy(recs), nvml, dmon, plan)
    assert got == [
        "A 2026-11-27T10:00:04Z: utilisation 82 (absent: an MPS client's own is unknown)",
        "A 2026-11-27T10:00:08Z: utilisation 82 (absent: an MPS client's own is unknown)",
    ], got
    for r in recs:
        if r["JobId"] == "4242421":
            r.pop("GpuUtilization", None)
    assert failures(recs, nvml, dmon, plan) == []
