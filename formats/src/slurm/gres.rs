//! GPU counts out of Slurm's GRES and TRES strings, which look different in every place they
//! appear: `gpu:a100:8(S:0-1)`, `gpu:2(IDX:0-1)`, `gres:gpu:4`, `gres/gpu=2`, `gres/gpu:a100=2`.

/// Total GPUs in a GRES list such as `gpu:a100:4(S:0),gpu:k80:2(S:1),mps:100` (nodes' Gres and
/// GresUsed, squeue's %b). `(null)`, `N/A` and the empty string mean none.
pub fn gpus_in_gres(s: &str) -> u64 {
    if !s.contains("gpu") {
        return 0;
    }
    split_top_level(s)
        .filter_map(|item| {
            let item = item.trim();
            let item = item.strip_prefix("gres:").or_else(|| item.strip_prefix("gres/")).unwrap_or(item);
            let item = item.split('(').next().unwrap_or("");
            let mut fields = item.split(':');
            if fields.next()? != "gpu" {
                return None;
            }
            // gpu, gpu:N, gpu:type, gpu:type:N
            let rest: Vec<&str> = fields.collect();
            match rest.as_slice() {
                [] => Some(1),
                [only] => Some(only.parse().unwrap_or(1)),
                [.., last] => Some(last.parse().unwrap_or(1)),
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// GPUs in a TRES list such as `cpu=4,mem=8G,node=1,gres/gpu=2,gres/gpu:a100=2` (tres-per-node,
/// tres-per-job, TRES alloc). Typed entries repeat the untyped total, so the untyped one wins.
pub fn gpus_in_tres(s: &str) -> u64 {
    if !s.contains("gpu") {
        return 0;
    }
    let mut untyped: Option<u64> = None;
    let mut typed: u64 = 0;
    for item in s.split(',') {
        let Some((key, value)) = item.trim().split_once('=') else {
            // `gres:gpu:2` style inside a TRES field (older squeue %b).
            typed = typed.saturating_add(gpus_in_gres(item));
            continue;
        };
        let key = key.strip_prefix("gres/").or_else(|| key.strip_prefix("gres:"));
        let Some(key) = key else { continue };
        let n = parse_count(value);
        if key == "gpu" {
            untyped = Some(untyped.unwrap_or(0).saturating_add(n));
        } else if key.starts_with("gpu:") {
            typed = typed.saturating_add(n);
        }
    }
    untyped.unwrap_or(typed)
}

/// Splits at commas that are not inside parentheses (`gpu:2(IDX:0,2)` stays whole).
fn split_top_level(s: &str) -> impl Iterator<Item = &str> {
    super::job::split_outside(s, '(', ')')
        .into_iter()
        .filter(|p| !p.is_empty() && *p != "(null)" && *p != "N/A")
}

fn parse_count(v: &str) -> u64 {
    v.trim().parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_strings() {
        assert_eq!(gpus_in_gres("(null)"), 0);
        assert_eq!(gpus_in_gres(""), 0);
        assert_eq!(gpus_in_gres("N/A"), 0);
        assert_eq!(gpus_in_gres("gpu:8"), 8);
        assert_eq!(gpus_in_gres("gpu:a100:8(S:0-1)"), 8);
        assert_eq!(gpus_in_gres("gpu:a100:2(IDX:0-1)"), 2);
        assert_eq!(gpus_in_gres("gpu:tesla:4(S:0),gpu:k80:2(S:1),mps:100"), 6);
        assert_eq!(gpus_in_gres("gpu:h100:3(IDX:0,2,5)"), 3);
        assert_eq!(gpus_in_gres("gres:gpu:4"), 4);
        assert_eq!(gpus_in_gres("gpu"), 1);
        assert_eq!(gpus_in_gres("mps:400,shard:8"), 0);
    }

    #[test]
    fn tres_strings() {
        assert_eq!(gpus_in_tres("cpu=4,mem=8G,node=1,billing=4"), 0);
        assert_eq!(gpus_in_tres("cpu=4,mem=8G,gres/gpu=2"), 2);
        assert_eq!(gpus_in_tres("cpu=4,gres/gpu=2,gres/gpu:a100=2"), 2);
        assert_eq!(gpus_in_tres("gres/gpu:a100=2"), 2);
        assert_eq!(gpus_in_tres("gres:gpu:3"), 3);
        assert_eq!(gpus_in_tres("N/A"), 0);
        assert_eq!(gpus_in_tres(""), 0);
        assert_eq!(gpus_in_tres("gres/gpu=x"), 0);
    }
}
