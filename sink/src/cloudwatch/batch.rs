//! Cuts datums into PutMetricData requests: at most 1000 datums and well under 1 MB each.

use super::AsDatum;
use crate::datum::{Datum, DatumValue};

/// CloudWatch's limit on datums per request.
pub const MAX_DATUMS: usize = 1000;
/// CloudWatch refuses request bodies over 1 MB; stay under it with room for the envelope.
pub const MAX_REQUEST_BYTES: usize = 1_000_000 - 16 * 1024;

/// An upper bound of the bytes a datum adds to a request body. It follows the JSON form, which is
/// larger than both the CBOR and the query encodings of the same datum.
pub fn estimated_size(d: &Datum) -> usize {
    const FIELD: usize = 24; // a field name, quotes and separators
    let dims: usize = d.dimensions.iter().map(|(n, v)| n.len() + v.len() + 2 * FIELD).sum();
    let numbers = match &d.value {
        DatumValue::Value { .. } => 1,
        DatumValue::Values { values, counts } => values.len() + counts.len(),
        DatumValue::Stats { .. } => 4,
    };
    // MetricName, Unit, Timestamp, StorageResolution and the object itself.
    5 * FIELD + d.metric.len() + d.unit.len() + dims + numbers * (FIELD + 24)
}

/// Splits `datums` into request-sized chunks, in order.
pub fn requests<T: AsDatum>(datums: Vec<T>) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for d in datums {
        let size = estimated_size(d.datum());
        if !current.is_empty() && (current.len() == MAX_DATUMS || bytes + size > MAX_REQUEST_BYTES) {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += size;
        current.push(d);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn datum(dim_value_len: usize) -> Datum {
        Datum {
            metric: "MemoryUsage".into(),
            unit: "Bytes".into(),
            dimensions: vec![("ClusterName".into(), "c".into()), ("JobId".into(), "j".repeat(dim_value_len))],
            timestamp: SystemTime::UNIX_EPOCH,
            value: DatumValue::Value { value: 1.0 },
        }
    }

    #[test]
    fn at_most_1000_datums_a_request() {
        let sizes: Vec<usize> = requests(vec![datum(5); 2500]).iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![1000, 1000, 500]);
        let sizes: Vec<usize> = requests(vec![datum(5); 1000]).iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![1000]);
        let sizes: Vec<usize> = requests(vec![datum(5); 1001]).iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![1000, 1]);
        assert!(requests(Vec::<Datum>::new()).is_empty());
    }

    #[test]
    fn large_datums_are_cut_by_bytes_before_1000() {
        // 1000-character dimension values: about 1.2 kB each, so fewer than 1000 fit in 1 MB.
        let big = datum(1000);
        let per_request = MAX_REQUEST_BYTES / estimated_size(&big);
        assert!(per_request < MAX_DATUMS);
        let reqs = requests(vec![big; 2000]);
        for r in &reqs {
            let bytes: usize = r.iter().map(estimated_size).sum();
            assert!(bytes <= MAX_REQUEST_BYTES, "{bytes}");
            assert!(r.len() <= per_request);
        }
        assert_eq!(reqs.iter().map(Vec::len).sum::<usize>(), 2000, "nothing lost");
        assert_eq!(reqs[0].len(), per_request, "requests are filled up to the limit");
    }

    #[test]
    fn the_estimate_bounds_the_json_form() {
        for d in [datum(1), datum(1000)] {
            assert!(estimated_size(&d) >= d.to_json_line("Slurm").len());
        }
    }
}
