//! `scontrol show node -o <name>`: a node's size as Slurm defines it (`CPUTot`, `RealMemory`
//! in MB, the GPUs in `Gres`), what a job's share of the node is measured against. The node's
//! fields are the admin's and Slurm's to write, not a job user's; the first of each key counts
//! (a `Reason=` later on the line cannot restate them).

use super::gres::gpus_in_gres;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeSize {
    pub cpus: f64,
    /// RealMemory in bytes (Slurm says MB: 2^20 bytes).
    pub memory_bytes: f64,
    pub gpus: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NodeError {
    #[error("scontrol's answer names no node {0}")]
    NotThisNode(String),
    #[error("scontrol's answer for node {0} has no CPUTot")]
    NoCpus(String),
}

/// The line of node `name` in scontrol's one-line answer (one line per node).
pub fn parse(text: &str, name: &str) -> Result<NodeSize, NodeError> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&format!("NodeName={name}")))
        .ok_or_else(|| NodeError::NotThisNode(name.to_owned()))?;
    let value = |key: &str| {
        line.split_whitespace().find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
    };
    let number =
        |key: &str| value(key).and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0);
    let cpus = number("CPUTot").filter(|c| *c > 0.0).ok_or_else(|| NodeError::NoCpus(name.to_owned()))?;
    Ok(NodeSize {
        cpus,
        memory_bytes: number("RealMemory").unwrap_or(0.0) * 1024.0 * 1024.0,
        gpus: value("Gres").map_or(0, gpus_in_gres) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_size() {
        let gpu = "NodeName=gpu-1 Arch=x86_64 CoresPerSocket=48 CPUAlloc=0 CPUEfctv=192 CPUTot=192 \
                   CPULoad=0.01 AvailableFeatures=(null) ActiveFeatures=(null) \
                   Gres=gpu:h100:8(S:0-1),shard:h100:64 NodeAddr=gpu-1 RealMemory=2000000 \
                   Reason=CPUTot=1 [root@2026-11-26T10:00:00]";
        let s = parse(gpu, "gpu-1").unwrap();
        assert_eq!(s, NodeSize { cpus: 192.0, memory_bytes: 2_000_000.0 * 1048576.0, gpus: 8.0 });
        let plain = "NodeName=c1 Arch=x86_64 CPUTot=4 Gres=(null) RealMemory=1000\nNodeName=c10 CPUTot=8";
        assert_eq!(parse(plain, "c1").unwrap().gpus, 0.0);
        assert_eq!(parse(plain, "c10").unwrap().cpus, 8.0);
        assert_eq!(parse(plain, "c2"), Err(NodeError::NotThisNode("c2".into())));
        assert_eq!(parse("NodeName=c1 CPUTot=lots", "c1"), Err(NodeError::NoCpus("c1".into())));
    }
}
