//! gres.conf, as far as it says in which order slurmd numbers a node's GPUs: the GPU indices
//! Slurm hands out (`scontrol show job -d`'s `IDX:`, and SLURM_JOB_GPUS since 21.08) are
//! places in that order, not device numbers.
//!
//! From Slurm's src/plugins/gres/gpu/gres_gpu.c: with autodetection (`AutoDetect=nvml`,
//! `nvidia`, `rsmi`, `oneapi`) slurmd sorts its GPUs by NVML's enumeration, which is PCI bus
//! order; without it they stay in the order gres.conf's `File=` lines name them. Lines may be
//! for some nodes only (`NodeName=<hostlist>`), and a node's own `AutoDetect=` overrides the
//! global one.

use super::job::{hostlist_contains, split_outside_brackets};

/// How slurmd orders one node's GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuOrder {
    /// Autodetected: NVML's enumeration (PCI bus) order.
    Detected,
    /// The device files gres.conf names, by their number (`/dev/nvidia3` is 3, the device's
    /// minor number), in the order named; None for a GPU given as several files
    /// (`MultipleFiles=`, a MIG instance), which holds its place but names no one device.
    Files(Vec<Option<u32>>),
    /// gres.conf names no GPU files for the node and detects nothing.
    Unknown,
}

/// One meaningful line: the nodes it is for, and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    nodes: Option<String>,
    autodetect: Option<bool>,
    /// `Name=gpu` lines' device numbers (see [`GpuOrder::Files`]).
    gpu_files: Vec<Option<u32>>,
}

/// The GPU lines of a gres.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GresConf {
    lines: Vec<Line>,
}

impl GresConf {
    /// Reads gres.conf text; what it does not understand (other GRES, `Include`) is skipped.
    pub fn parse(text: &str) -> GresConf {
        let mut lines = Vec::new();
        for raw in text.lines() {
            let words = raw.split('#').next().unwrap_or("");
            let mut line = Line { nodes: None, autodetect: None, gpu_files: Vec::new() };
            let (mut name, mut files, mut multiple) = (None, None, false);
            for word in words.split_whitespace() {
                let Some((k, v)) = word.split_once('=') else { continue };
                match k.to_ascii_lowercase().as_str() {
                    "nodename" => line.nodes = Some(v.to_owned()),
                    "autodetect" => {
                        line.autodetect = Some(!matches!(v.to_ascii_lowercase().as_str(), "off" | "none"))
                    }
                    "name" => name = Some(v.to_ascii_lowercase()),
                    "file" => files = Some(v.to_owned()),
                    "multiplefiles" => multiple = true,
                    _ => {}
                }
            }
            if name.as_deref() == Some("gpu") {
                if multiple {
                    line.gpu_files.push(None);
                } else if let Some(f) = files {
                    line.gpu_files = device_numbers(&f).into_iter().map(Some).collect();
                }
            }
            if line.autodetect.is_some() || !line.gpu_files.is_empty() {
                lines.push(line);
            }
        }
        GresConf { lines }
    }

    /// How slurmd on node `node` orders its GPUs.
    pub fn gpu_order(&self, node: &str) -> GpuOrder {
        let mine = |l: &&Line| l.nodes.as_deref().is_none_or(|n| hostlist_contains(n, node));
        let global = self.lines.iter().filter(|l| l.nodes.is_none()).find_map(|l| l.autodetect);
        let own = self.lines.iter().filter(|l| l.nodes.is_some()).filter(mine).find_map(|l| l.autodetect);
        if own.or(global) == Some(true) {
            return GpuOrder::Detected;
        }
        let files: Vec<Option<u32>> =
            self.lines.iter().filter(mine).flat_map(|l| l.gpu_files.iter().copied()).collect();
        if files.is_empty() { GpuOrder::Unknown } else { GpuOrder::Files(files) }
    }
}

/// The numbers of the device files in a `File=` value: `/dev/nvidia0`, `/dev/nvidia[0-3]`,
/// `/dev/nvidia[0,2-3]`, `/dev/nvidia0,/dev/nvidia1`; trailing digits, as slurmd reads them.
fn device_numbers(value: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for item in split_outside_brackets(value) {
        match item.split_once('[') {
            Some((_, ranges)) => {
                for r in ranges.trim_end_matches(']').split(',') {
                    match r.split_once('-') {
                        Some((a, b)) => {
                            if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>())
                                && b >= a
                                && b - a < 1024
                            {
                                out.extend(a..=b);
                            }
                        }
                        None => out.extend(r.parse::<u32>().ok()),
                    }
                }
            }
            None => {
                let digits = item.len() - item.trim_end_matches(|c: char| c.is_ascii_digit()).len();
                out.extend(item[item.len() - digits..].parse::<u32>().ok());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(numbers: &[u32]) -> GpuOrder {
        GpuOrder::Files(numbers.iter().copied().map(Some).collect())
    }

    #[test]
    fn files_in_the_order_named() {
        let c = GresConf::parse(
            "# Configure four GPUs\nName=gpu Type=a100 File=/dev/nvidia[2-3]\nName=gpu Type=a100 File=/dev/nvidia0\n\
             Name=gpu File=/dev/nvidia1 # last\nName=bandwidth Type=lustre Count=4G\n",
        );
        assert_eq!(c.gpu_order("n1"), files(&[2, 3, 0, 1]));
        assert_eq!(device_numbers("/dev/nvidia[0,2-3],/dev/nvidia7"), vec![0, 2, 3, 7]);
        assert_eq!(device_numbers("/dev/nvidia[9-1]"), Vec::<u32>::new());
    }

    #[test]
    fn per_node_lines_and_autodetection() {
        let text = "AutoDetect=off\n\
                    NodeName=gpu-[01-02] Name=gpu Type=h100 File=/dev/nvidia[0-7]\n\
                    NodeName=big1 AutoDetect=nvml\n\
                    NodeName=big1 Name=gpu File=/dev/nvidia[0-3]\n";
        let c = GresConf::parse(text);
        assert_eq!(c.gpu_order("gpu-02"), files(&[0, 1, 2, 3, 4, 5, 6, 7]));
        assert_eq!(c.gpu_order("big1"), GpuOrder::Detected, "its own line overrides the global one");
        assert_eq!(c.gpu_order("cpu1"), GpuOrder::Unknown);
        let c =
            GresConf::parse("AutoDetect=nvml\nNodeName=old AutoDetect=off Name=gpu File=/dev/nvidia[1,0]\n");
        assert_eq!(c.gpu_order("n7"), GpuOrder::Detected);
        assert_eq!(c.gpu_order("old"), files(&[1, 0]));
        // A MIG instance given by hand holds its place in the list.
        let c = GresConf::parse(
            "Name=gpu File=/dev/nvidia0\nName=gpu Type=1g.10gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap21\n\
             Name=gpu File=/dev/nvidia2\n",
        );
        assert_eq!(c.gpu_order("n1"), GpuOrder::Files(vec![Some(0), None, Some(2)]));
        assert_eq!(GresConf::parse("").gpu_order("n1"), GpuOrder::Unknown);
        assert_eq!(GresConf::parse("autodetect=NVIDIA\n").gpu_order("n1"), GpuOrder::Detected);
    }
}
