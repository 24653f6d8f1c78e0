//! Parsing cost of the head collector's inputs at scale: `squeue` output of 100,000 jobs and
//! `sinfo` output of 10,000 nodes, generated in the formats the collector asks for.
//!
//! `cargo bench -p slurm-cw-shipper --bench head_parse`
//!
//! Prints time (median of several runs) and peak heap during one parse, and a baseline measured
//! in the same run: reading the same text line by line and splitting the fields, which any
//! parser must do (the floor). Targets for 100,000 jobs: under 200 ms and under 64 MB.

use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::sources::head::{sinfo, squeue};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Counts live and peak heap bytes.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Median time of `runs` runs, and the peak heap above the starting level during one run.
fn measure<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, usize) {
    let mut times = Vec::with_capacity(runs);
    let mut peak = 0;
    for _ in 0..runs {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t = Instant::now();
        let out = f();
        times.push(t.elapsed());
        peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
        drop(out);
    }
    times.sort();
    (times[runs / 2], peak)
}

fn squeue_output(jobs: usize) -> String {
    let states = ["RUNNING", "PENDING", "PENDING", "COMPLETED", "PENDING", "RUNNING", "FAILED", "CANCELLED"];
    let reasons = [
        "Resources",
        "Priority",
        "Dependency",
        "QOSMaxJobsPerUserLimit",
        "ReqNodeNotAvail, UnavailableNodes:q[1-40]",
    ];
    let mut s = String::with_capacity(jobs * 80);
    for i in 0..jobs {
        let state = states[i % states.len()];
        let reason = if state == "PENDING" { reasons[i % reasons.len()] } else { "None" };
        let part = ["compute", "gpu", "highmem", "compute,highmem"][i % 4];
        let gres = if part == "gpu" { "gres/gpu:4" } else { "N/A" };
        s.push_str(&format!(
            "{part}|{state}|{reason}|{}|{}|{}|N/A|{gres}|N/A|\n",
            1 + i % 64,
            1 + i % 4,
            1 + i % 64
        ));
    }
    s
}

fn sinfo_output(nodes: usize) -> String {
    let states = [
        "allocated",
        "mixed",
        "idle",
        "idle+cloud+powered_down",
        "idle+drain",
        "down+not_responding",
        "mixed+drain",
    ];
    let mut s = String::with_capacity(nodes * 90);
    for i in 0..nodes {
        let part = ["compute", "gpu", "highmem"][i % 3];
        let (gres, used) =
            if part == "gpu" { ("gpu:h100:8(S:0-1)", "gpu:h100:4(IDX:0-3)") } else { ("(null)", "gpu:0") };
        s.push_str(&format!(
            "q-{i}|{part}|{}|32/32/0/64|512000|256000|{gres}|{used}|\n",
            states[i % states.len()]
        ));
        if i % 10 == 0 {
            s.push_str(&format!(
                "q-{i}|debug|{}|32/32/0/64|512000|256000|{gres}|{used}|\n",
                states[i % states.len()]
            ));
        }
    }
    s
}

/// The floor: every line split into its fields, nothing else.
fn split_only(text: &str) -> usize {
    text.lines().map(|l| l.split('|').filter(|f| !f.is_empty()).count()).sum()
}

fn report(what: &str, input: &str, parse: (Duration, usize), floor: (Duration, usize)) {
    println!(
        "{what:<24} input {:>6.1} MB | parse+emit {:>8.2} ms, peak heap {:>6.2} MB | floor {:>7.2} ms | ratio {:>5.2}x",
        input.len() as f64 / 1e6,
        parse.0.as_secs_f64() * 1e3,
        parse.1 as f64 / 1e6,
        floor.0.as_secs_f64() * 1e3,
        parse.0.as_secs_f64() / floor.0.as_secs_f64(),
    );
}

fn main() {
    let runs = 9;
    for jobs in [10_000, 100_000] {
        let text = squeue_output(jobs);
        let parse = measure(runs, || {
            let (q, bad) = squeue::parse_text(&text);
            assert!(bad.is_empty());
            let mut b = Batch::new(SystemTime::now());
            squeue::emit(&q, true, 10, &mut b);
            b
        });
        let floor = measure(runs, || split_only(&text));
        report(&format!("squeue {jobs} jobs"), &text, parse, floor);
    }
    for nodes in [1_000, 10_000] {
        let text = sinfo_output(nodes);
        let parse = measure(runs, || {
            let (rows, bad) = sinfo::parse_text(&text);
            assert!(bad.is_empty());
            let mut b = Batch::new(SystemTime::now());
            sinfo::emit(&rows, true, &mut b);
            b
        });
        let floor = measure(runs, || split_only(&text));
        report(&format!("sinfo {nodes} nodes"), &text, parse, floor);
    }
}
