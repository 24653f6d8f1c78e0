//! ExportMetricsServiceRequest (opentelemetry-proto, metrics v1) in protobuf, written by hand:
//! the few messages a gauge needs, no generated code. Field numbers are the .proto files'.
//!
//! Every datum is one gauge point whose value is the datum's mean (see the module doc of
//! [`super`]); the points of one metric share one `Metric` message, named, described and
//! unit-tagged from the catalog.

use crate::aggregate::{Aggregate, Summary};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::series;
use std::collections::HashMap;
use std::time::SystemTime;

// Wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

/// The instrumentation scope every point is sent under.
pub const SCOPE: &str = "slurm-cw-shipper";

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn tag(buf: &mut Vec<u8>, field: u32, wire: u8) {
    varint(buf, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(buf, field, LEN);
    varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

fn string(buf: &mut Vec<u8>, field: u32, s: &str) {
    bytes(buf, field, s.as_bytes());
}

fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
    tag(buf, field, FIXED64);
    buf.extend_from_slice(&v.to_le_bytes());
}

/// A nested message: written into its own buffer, then length-prefixed.
fn message(buf: &mut Vec<u8>, field: u32, write: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    write(&mut inner);
    bytes(buf, field, &inner);
}

/// KeyValue{key = 1, value = 2: AnyValue{string_value = 1}}.
fn key_value(buf: &mut Vec<u8>, field: u32, key: &str, value: &str) {
    message(buf, field, |kv| {
        string(kv, 1, key);
        message(kv, 2, |any| string(any, 1, value));
    });
}

/// The value a gauge point carries: the summary's mean ([`Summary::mean`]; 0 for one that
/// counted nothing, which the shipper's rules drop before it gets here).
pub fn mean(value: &Summary) -> f64 {
    value.mean().unwrap_or(0.0)
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// NumberDataPoint{attributes = 7, time_unix_nano = 3, as_double = 4}, the labels in the
/// aggregate's (sorted) order.
fn point(buf: &mut Vec<u8>, a: &Aggregate) {
    for (name, value) in a.dims.iter() {
        key_value(buf, 7, &series::label(name), value);
    }
    fixed64(buf, 3, unix_nanos(a.time));
    fixed64(buf, 4, mean(&a.value).to_bits());
}

/// The bytes an aggregate's point adds to a request body (before gzip), its envelope
/// included: what the batching and the byte counts use.
pub fn point_size(d: &Aggregate) -> usize {
    let mut buf = Vec::with_capacity(128);
    point(&mut buf, d);
    // Tag and length of the NumberDataPoint in its gauge.
    buf.len() + 1 + varint_len(buf.len() as u64)
}

fn varint_len(v: u64) -> usize {
    let bits = 64 - v.max(1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// The unit as sent. OpenTelemetry's "1" (counts, unit-less figures) goes as an annotation,
/// `{count}`: Prometheus' OTLP translation turns a gauge in "1" into `..._ratio`, and drops
/// annotations, so the name it stores stays [`series::name`].
pub fn unit(metric: &Metric) -> &'static str {
    match series::otel_unit(metric.unit) {
        "1" => "{count}",
        u => u,
    }
}

/// The request body for `items` with `resource`'s attributes. The aggregates of one metric
/// become points of one `Metric`, in the order the metrics first appear.
pub fn request(resource: &[(String, String)], items: &[Aggregate]) -> Vec<u8> {
    let mut order: Vec<&'static Metric> = Vec::new();
    let mut points: HashMap<&str, Vec<&Aggregate>> = HashMap::new();
    for a in items {
        let entry = points.entry(a.metric.name).or_default();
        if entry.is_empty() {
            order.push(a.metric);
        }
        entry.push(a);
    }
    let mut body = Vec::new();
    // ExportMetricsServiceRequest{resource_metrics = 1}
    message(&mut body, 1, |rm| {
        // ResourceMetrics{resource = 1: Resource{attributes = 1}, scope_metrics = 2}
        message(rm, 1, |res| {
            for (k, v) in resource {
                key_value(res, 1, k, v);
            }
        });
        message(rm, 2, |sm| {
            // ScopeMetrics{scope = 1: InstrumentationScope{name = 1, version = 2}, metrics = 2}
            message(sm, 1, |scope| {
                string(scope, 1, SCOPE);
                string(scope, 2, env!("CARGO_PKG_VERSION"));
            });
            for m in &order {
                // Metric{name = 1, description = 2, unit = 3, gauge = 5: Gauge{data_points = 1}}
                message(sm, 2, |metric| {
                    string(metric, 1, &series::name(m));
                    string(metric, 2, m.help);
                    string(metric, 3, unit(m));
                    message(metric, 5, |gauge| {
                        for d in points.get(m.name).into_iter().flatten() {
                            message(gauge, 1, |p| point(p, d));
                        }
                    });
                });
            }
        });
    });
    body
}

/// A gzip compressor for request bodies, kept by the sink (see [`slurm_cw_formats::gzip`]).
pub fn gzip() -> slurm_cw_formats::gzip::Gzip {
    slurm_cw_formats::gzip::Gzip::new(flate2::Compression::default())
}

/// What the receiver said in a 2xx answer: ExportMetricsServiceResponse{partial_success = 1:
/// {rejected_data_points = 1, error_message = 2}}. None when it rejected nothing (or the answer
/// is not protobuf).
pub fn partial_success(body: &[u8]) -> Option<(i64, String)> {
    let inner = fields(body).find(|(f, _)| *f == 1).and_then(|(_, v)| v.bytes())?;
    let mut rejected = 0;
    let mut message = String::new();
    for (field, value) in fields(inner) {
        match (field, value) {
            (1, Field::Varint(n)) => rejected = n as i64,
            (2, Field::Bytes(b)) => message = String::from_utf8_lossy(b).into_owned(),
            _ => {}
        }
    }
    (rejected > 0 || !message.is_empty()).then_some((rejected, message))
}

#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

impl<'a> Field<'a> {
    fn bytes(self) -> Option<&'a [u8]> {
        match self {
            Field::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

fn read_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The top-level fields of a message; stops at the first malformed one.
fn fields(b: &[u8]) -> impl Iterator<Item = (u32, Field<'_>)> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let key = read_varint(b, &mut pos)?;
        let field = u32::try_from(key >> 3).ok()?;
        let value = match (key & 7) as u8 {
            VARINT => Field::Varint(read_varint(b, &mut pos)?),
            FIXED64 => {
                pos = pos.checked_add(8).filter(|p| *p <= b.len())?;
                Field::Fixed
            }
            LEN => {
                let len = usize::try_from(read_varint(b, &mut pos)?).ok()?;
                let end = pos.checked_add(len).filter(|e| *e <= b.len())?;
                let v = &b[pos..end];
                pos = end;
                Field::Bytes(v)
            }
            5 => {
                pos = pos.checked_add(4).filter(|p| *p <= b.len())?;
                Field::Fixed
            }
            _ => return None,
        };
        Some((field, value))
    })
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
