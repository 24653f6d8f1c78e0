//! Parsers of the small text formats in cgroup files. Each takes the file's text and never
//! fails as a whole: a line it cannot read is skipped.

/// A value of a flat-keyed file (`memory.stat`, `cpu.stat`, `memory.events`): `key value` lines.
pub fn flat_key(text: &str, key: &str) -> Option<u64> {
    let [value] = flat_keys(text, [key]);
    value
}

/// [`flat_key`] of each of `keys` (distinct) in one pass over `text`: the first line naming a
/// key with a number (memory.stat has 30 to 70 lines; a pass a key was most of a job's
/// parsing).
pub fn flat_keys<const N: usize>(text: &str, keys: [&str; N]) -> [Option<u64>; N] {
    let mut out = [None; N];
    let mut left = N;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(k) = f.next() else { continue };
        if let Some(i) = keys.iter().position(|key| *key == k)
            && out[i].is_none()
            && let Some(v) = f.next().and_then(|v| v.parse().ok())
        {
            out[i] = Some(v);
            left -= 1;
            if left == 0 {
                break;
            }
        }
    }
    out
}

/// A file holding one number (`memory.current`, `cpuacct.usage`). `max` (cgroup v2's
/// "unlimited") and values of 2^62 and above (v1's unlimited) give None.
pub fn single(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    let v: u64 = t.parse().ok()?;
    (v < 1 << 62).then_some(v)
}

/// `cpuacct.usage_percpu`: nanoseconds per CPU, space-separated.
pub fn numbers(text: &str) -> Vec<u64> {
    text.split_whitespace().filter_map(|x| x.parse().ok()).collect()
}

/// A CPU list (`0-3,8,10-11`) as CPU numbers; None when a part is not a number.
pub fn cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// Cumulative I/O counters of a job (or a process).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Io {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
}

impl Io {
    pub fn add(&mut self, o: &Io) {
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.read_ops += o.read_ops;
        self.write_ops += o.write_ops;
    }
}

/// cgroup v2 `io.stat`: `MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N` per device,
/// summed over devices. None when the file lists no device.
pub fn io_stat(text: &str) -> Option<Io> {
    let mut io = Io::default();
    let mut any = false;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        if f.next().is_none() {
            continue;
        }
        any = true;
        for kv in f {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            let v: u64 = v.parse().unwrap_or(0);
            match k {
                "rbytes" => io.read_bytes += v,
                "wbytes" => io.write_bytes += v,
                "rios" => io.read_ops += v,
                "wios" => io.write_ops += v,
                _ => {}
            }
        }
    }
    any.then_some(io)
}

/// cgroup v1 `blkio.throttle.io_service_bytes` / `io_serviced`: `MAJ:MIN Read N` lines and a
/// `Total` line; returns (read, write) summed over devices, None when no device is listed.
pub fn blkio(text: &str) -> Option<(u64, u64)> {
    let (mut r, mut w, mut any) = (0, 0, false);
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 3 || !f[0].contains(':') {
            continue;
        }
        let v: u64 = f[2].parse().unwrap_or(0);
        match f[1] {
            "Read" => {
                r += v;
                any = true;
            }
            "Write" => {
                w += v;
                any = true;
            }
            _ => {}
        }
    }
    any.then_some((r, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_keyed_files() {
        let stat = "cache 12288\nrss 0\ntotal_rss 364544\ntotal_rss_huge 0\n";
        assert_eq!(flat_key(stat, "total_rss"), Some(364544));
        assert_eq!(flat_key(stat, "rss"), Some(0));
        assert_eq!(flat_key(stat, "total_swap"), None);
        assert_eq!(flat_key("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"), Some(3));
        assert_eq!(flat_key("garbage\nx y z\n", "x"), None);
    }

    #[test]
    fn flat_keys_in_one_pass() {
        // v1's shape: the cgroup's own counts, then the hierarchy's under `total_`.
        let v1 = "cache 0\nrss 0\nrss_huge 0\nmapped_file 0\nhierarchical_memory_limit 20971520\n\
                  total_cache 45056\ntotal_rss 2568192\ntotal_rss_huge 0\ntotal_mapped_file 0\n\
                  total_inactive_file 40960\ntotal_active_file 4096\ntotal_unevictable 0\n";
        assert_eq!(
            flat_keys(v1, ["total_cache", "total_rss", "rss", "total_swap", "total_unevictable"]),
            [Some(45056), Some(2568192), Some(0), None, Some(0)]
        );
        // The first line with a number: one without is passed over, a later one not read.
        let odd = "a x\na 5\nb 6 7\n  c 8\nd\nb 9\n";
        assert_eq!(flat_keys(odd, ["a", "b", "c", "d", "zz"]), [Some(5), Some(6), Some(8), None, None]);
        assert_eq!(flat_keys("", ["a"]), [None]);
        assert_eq!(flat_keys("garbage\nx y z\n", ["x", "garbage"]), [None, None]);
    }

    #[test]
    fn single_values() {
        assert_eq!(single("314572800\n"), Some(314572800));
        assert_eq!(single("max\n"), None);
        assert_eq!(single("9223372036854771712\n"), None, "v1 unlimited");
        assert_eq!(single(""), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_list("5"), Some(vec![5]));
        assert_eq!(cpu_list(""), Some(vec![]));
        assert_eq!(cpu_list("3-1"), None);
        assert_eq!(cpu_list("a-b"), None);
    }

    #[test]
    fn io_files() {
        let v2 = "8:0 rbytes=1000 wbytes=2000 rios=3 wios=4 dbytes=0 dios=0\n259:0 rbytes=10 wbytes=20 rios=1 wios=1 dbytes=0 dios=0\n";
        assert_eq!(io_stat(v2), Some(Io { read_bytes: 1010, write_bytes: 2020, read_ops: 4, write_ops: 5 }));
        assert_eq!(io_stat(""), None);
        let v1 = "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 12288\n8:0 Total 12288\nTotal 12288\n";
        assert_eq!(blkio(v1), Some((4096, 8192)));
        assert_eq!(blkio("Total 0\n"), None);
    }
}
