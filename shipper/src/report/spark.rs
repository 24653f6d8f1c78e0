//! Sparklines: a series over the job's span in `width` cells, one Unicode block each (the
//! mean of the samples that fall in its slice of time; a blank where none does), scaled from
//! zero to the series' peak.

const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// `points` (seconds, value) between `from` and `to` in `width` cells.
pub fn line(points: &[(f64, f64)], from: f64, to: f64, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    let span = (to - from).max(f64::MIN_POSITIVE);
    let mut cells = vec![(0.0, 0u32); width];
    for (t, v) in points.iter().filter(|(_, v)| v.is_finite()) {
        let i = (((t - from) / span) * width as f64).floor().clamp(0.0, (width - 1) as f64) as usize;
        cells[i].0 += v;
        cells[i].1 += 1;
    }
    let peak = points.iter().map(|p| p.1).filter(|v| v.is_finite()).fold(0.0, f64::max);
    cells
        .into_iter()
        .map(|(sum, n)| {
            if n == 0 {
                return ' ';
            }
            let v = sum / f64::from(n);
            if peak <= 0.0 {
                return BLOCKS[0];
            }
            let level =
                ((v / peak) * (BLOCKS.len() - 1) as f64).round().clamp(0.0, (BLOCKS.len() - 1) as f64);
            BLOCKS[level as usize]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cell_is_its_slice_of_time_scaled_to_the_peak() {
        let pts: Vec<(f64, f64)> = (0..8).map(|i| (f64::from(i), f64::from(i))).collect();
        assert_eq!(line(&pts, 0.0, 8.0, 8), "▁▂▃▄▅▆▇█");
        assert_eq!(line(&pts, 0.0, 8.0, 4), "▂▄▆█", "means of two");
        assert_eq!(line(&[(0.0, 5.0), (10.0, 5.0)], 0.0, 10.0, 5), "█   █", "gaps stay blank");
        assert_eq!(line(&[(0.0, 0.0)], 0.0, 0.0, 3), "▁  ", "all zero, and a span of nothing");
        assert_eq!(line(&pts, 0.0, 8.0, 0), "");
    }
}
