//! RAPL energy counters in the powercap class (`/sys/class/powercap/intel-rapl:N[:M]/`, kernel
//! Documentation/power/powercap/powercap.rst): `name` (`package-0`, `dram`, `core`...),
//! `energy_uj` (micro-joules, counting up and wrapping at `max_energy_range_uj`) and
//! `max_energy_range_uj`. AMD processors show theirs in the same `intel-rapl` zones.

/// A RAPL zone directory name: `intel-rapl:<package>` (a package zone) or
/// `intel-rapl:<package>:<subzone>`. None for anything else (the `intel-rapl` control type
/// itself, `intel-rapl-mmio:*`, other control types).
pub fn zone(dir: &str) -> Option<(u32, Option<u32>)> {
    let rest = dir.strip_prefix("intel-rapl:")?;
    let mut parts = rest.split(':');
    let package = parts.next()?.parse().ok()?;
    let sub = match parts.next() {
        Some(s) => Some(s.parse().ok()?),
        None => None,
    };
    if parts.next().is_some() {
        return None;
    }
    Some((package, sub))
}

/// `energy_uj` or `max_energy_range_uj`: one number of micro-joules.
pub fn micro_joules(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A zone's `name`, trimmed; None when empty or not printable.
pub fn name(text: &str) -> Option<&str> {
    let t = text.trim();
    (!t.is_empty() && t.chars().all(|c| c.is_ascii_graphic())).then_some(t)
}

/// Energy used between two readings of `energy_uj`. The counter wraps to zero after `range`
/// (`max_energy_range_uj`), so a reading below the one before is a wrap: (range - before) +
/// now. Without a range, or with a reading past it, a counter that went back gives None
/// (no figure) rather than a guess.
pub fn energy_since(before: u64, now: u64, range: Option<u64>) -> Option<u64> {
    if now >= before {
        return Some(now - before);
    }
    let range = range?;
    (before <= range).then(|| (range - before).saturating_add(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_names() {
        assert_eq!(zone("intel-rapl:0"), Some((0, None)));
        assert_eq!(zone("intel-rapl:1:0"), Some((1, Some(0))));
        assert_eq!(zone("intel-rapl"), None);
        assert_eq!(zone("intel-rapl-mmio:0"), None);
        assert_eq!(zone("intel-rapl:0:1:2"), None);
        assert_eq!(zone("intel-rapl:x"), None);
        assert_eq!(name("package-0\n"), Some("package-0"));
        assert_eq!(name(" \n"), None);
    }

    #[test]
    fn energy_wraps_at_the_range() {
        assert_eq!(energy_since(100, 250, Some(1000)), Some(150));
        // 900 -> wrap at 1000 -> 50: 100 + 50.
        assert_eq!(energy_since(900, 50, Some(1000)), Some(150));
        assert_eq!(energy_since(900, 50, None), None);
        assert_eq!(energy_since(2000, 50, Some(1000)), None, "a reading past the range is not a wrap");
        assert_eq!(micro_joules("262143328850\n"), Some(262_143_328_850));
    }
}
