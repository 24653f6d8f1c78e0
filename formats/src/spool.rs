//! The spool file format: one batch of datums (or job records) on disk, so that nothing is lost
//! while CloudWatch cannot be reached or the shipper restarts.
//!
//! ```text
//! slurm-cw-spool 1 <items> <body bytes> <crc32 of body, hex>\n
//! <body: gzip of the items' JSON lines, the first line the label (namespace, or log group)>
//! ```
//!
//! A file that fails any check (header, length, checksum, gzip, a line) is corrupt as a whole:
//! a torn write from a power loss, never half-trusted.

use crate::datum::Datum;
use crate::gzip::Gzip;
use crate::record::Record;
use flate2::Compression;
use flate2::read::GzDecoder;
use std::io::Read;

const MAGIC: &str = "slurm-cw-spool";
const VERSION: u32 = 1;
/// A body larger than this is not ours (and would cost memory to read).
pub const MAX_BODY: usize = 64 << 20;
/// Decompressed, likewise.
pub const MAX_TEXT: usize = 512 << 20;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpoolError {
    #[error("no spool header")]
    NoHeader,
    #[error("bad spool header: {0}")]
    BadHeader(String),
    #[error("spool body is {got} bytes, the header says {want}")]
    Length { got: usize, want: usize },
    #[error("spool checksum mismatch")]
    Checksum,
    #[error("spool body does not decompress: {0}")]
    Gzip(String),
    #[error("spool line {line}: {error}")]
    Line { line: usize, error: String },
    #[error("spool holds {got} datums, the header says {want}")]
    Count { got: usize, want: usize },
}

/// What a spool file can hold: items with a one-line text form.
pub trait Item: Sized {
    fn to_line(&self, label: &str) -> String;
    /// `Ok(None)`: a well-formed line this version has no use for (a metric it no longer
    /// has): skipped and counted, the rest of its file kept.
    fn from_line(line: &str) -> Result<Option<Self>, String>;
}

impl Item for Datum {
    fn to_line(&self, namespace: &str) -> String {
        self.to_json_line(namespace)
    }

    fn from_line(line: &str) -> Result<Option<Self>, String> {
        Datum::from_json_line(line).map(|(_, d)| Some(d)).map_err(|e| e.to_string())
    }
}

impl Item for Record {
    fn to_line(&self, _group: &str) -> String {
        self.to_json_line()
    }

    fn from_line(line: &str) -> Result<Option<Self>, String> {
        Record::from_json_line(line).map(Some).map_err(|e| e.to_string())
    }
}

/// A decoded spool file.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch<T> {
    /// Where the items go: the namespace of datums, the log group of records.
    pub label: String,
    pub items: Vec<T>,
    /// Lines skipped ([`Item::from_line`]'s `Ok(None)`).
    pub skipped: usize,
}

/// The file's bytes.
pub fn encode<T: Item>(label: &str, items: &[T]) -> Vec<u8> {
    Encoder::default().encode(label, items)
}

/// Encodes spool files one after another, keeping its compressor (see [`Gzip`]) and text
/// buffer.
pub struct Encoder {
    gzip: Gzip,
    text: String,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder { gzip: Gzip::new(Compression::fast()), text: String::new() }
    }
}

impl Encoder {
    /// The file's bytes, as [`encode`] makes them.
    pub fn encode<T: Item>(&mut self, label: &str, items: &[T]) -> Vec<u8> {
        self.text.clear();
        self.text.push_str(&serde_json::to_string(label).unwrap_or_default());
        self.text.push('\n');
        for d in items {
            self.text.push_str(&d.to_line(label));
            self.text.push('\n');
        }
        let body = self.gzip.member(self.text.as_bytes());
        let mut out =
            format!("{MAGIC} {VERSION} {} {} {:08x}\n", items.len(), body.len(), crc32fast::hash(&body))
                .into_bytes();
        out.extend_from_slice(&body);
        out
    }
}

/// The number of items a file says it holds, from its header alone (to count what a full
/// spool drops without reading everything).
pub fn header_count(bytes: &[u8]) -> Option<usize> {
    header(bytes).ok().map(|h| h.0)
}

/// (datums, body length, crc, header length)
fn header(bytes: &[u8]) -> Result<(usize, usize, u32, usize), SpoolError> {
    let end = bytes.iter().take(128).position(|b| *b == b'\n').ok_or(SpoolError::NoHeader)?;
    let line = std::str::from_utf8(&bytes[..end]).map_err(|_| SpoolError::BadHeader("not UTF-8".into()))?;
    let f: Vec<&str> = line.split(' ').collect();
    let bad = || SpoolError::BadHeader(line.chars().take(80).collect());
    if f.len() != 5 || f[0] != MAGIC || f[1] != VERSION.to_string() {
        return Err(bad());
    }
    let count = f[2].parse().map_err(|_| bad())?;
    let len: usize = f[3].parse().map_err(|_| bad())?;
    let crc = u32::from_str_radix(f[4], 16).map_err(|_| bad())?;
    if len > MAX_BODY {
        return Err(bad());
    }
    Ok((count, len, crc, end + 1))
}

pub fn decode<T: Item>(bytes: &[u8]) -> Result<Batch<T>, SpoolError> {
    let (count, len, crc, at) = header(bytes)?;
    let body = &bytes[at..];
    if body.len() != len {
        return Err(SpoolError::Length { got: body.len(), want: len });
    }
    if crc32fast::hash(body) != crc {
        return Err(SpoolError::Checksum);
    }
    let mut text = String::new();
    GzDecoder::new(body)
        .take(MAX_TEXT as u64)
        .read_to_string(&mut text)
        .map_err(|e| SpoolError::Gzip(e.to_string()))?;
    let mut lines = text.lines();
    let first = lines.next().ok_or(SpoolError::Line { line: 1, error: "no namespace".into() })?;
    let label: String =
        serde_json::from_str(first).map_err(|e| SpoolError::Line { line: 1, error: e.to_string() })?;
    let mut items = Vec::with_capacity(count.min(100_000));
    let mut skipped = 0;
    for (i, line) in lines.enumerate() {
        match T::from_line(line).map_err(|error| SpoolError::Line { line: i + 2, error })? {
            Some(item) => items.push(item),
            None => skipped += 1,
        }
    }
    if items.len() + skipped != count {
        return Err(SpoolError::Count { got: items.len() + skipped, want: count });
    }
    Ok(Batch { label, items, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datum::DatumValue;
    use std::time::{Duration, SystemTime};

    fn datums(n: usize) -> Vec<Datum> {
        (0..n)
            .map(|i| Datum {
                metric: "TestMetric".into(),
                unit: "Count".into(),
                dimensions: vec![("ClusterName".into(), "c".into()), ("JobId".into(), i.to_string())],
                timestamp: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + i as u64),
                value: DatumValue::Value { value: i as f64 },
            })
            .collect()
    }

    #[test]
    fn round_trip() {
        let d = datums(100);
        let bytes = encode("Slurm", &d);
        assert_eq!(header_count(&bytes), Some(100));
        assert_eq!(decode(&bytes).unwrap(), Batch { label: "Slurm".into(), items: d, skipped: 0 });
        assert_eq!(decode::<Datum>(&encode::<Datum>("X", &[])).unwrap().items.len(), 0);
        let records = vec![Record { time: SystemTime::UNIX_EPOCH, message: r#"{"JobId":"1"}"#.into() }];
        let back = decode::<Record>(&encode("/slurm-cw/c/jobs", &records)).unwrap();
        assert_eq!(back, Batch { label: "/slurm-cw/c/jobs".into(), items: records, skipped: 0 });
    }

    #[test]
    fn torn_and_damaged_files_are_corrupt() {
        let bytes = encode("Slurm", &datums(50));
        let decode = decode::<Datum>;
        assert_eq!(decode(&[]), Err(SpoolError::NoHeader));
        for cut in [10, 30, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 5;
        flipped[last] ^= 0x40;
        assert_eq!(decode(&flipped), Err(SpoolError::Checksum));
        let mut wrong_count = bytes.clone();
        let text = String::from_utf8_lossy(&wrong_count[..20]).replace(" 50 ", " 51 ");
        wrong_count[..20].copy_from_slice(text.as_bytes());
        assert!(matches!(decode(&wrong_count), Err(SpoolError::Count { .. })));
        assert!(matches!(decode(b"slurm-cw-spool 2 1 1 00000000\nx"), Err(SpoolError::BadHeader(_))));
        assert!(matches!(
            decode(b"slurm-cw-spool 1 1 999999999999 00000000\n"),
            Err(SpoolError::BadHeader(_))
        ));
    }

    #[test]
    fn an_encoder_kept_between_files_writes_what_a_new_one_writes() {
        let mut kept = Encoder::default();
        for n in [100, 0, 3000, 7] {
            let bytes = kept.encode("Slurm", &datums(n));
            assert_eq!(bytes, encode("Slurm", &datums(n)), "{n} datums");
            assert_eq!(decode::<Datum>(&bytes).unwrap().items, datums(n));
        }
        // Any gzip reader takes the body.
        let bytes = encode("Slurm", &datums(5));
        let body = &bytes[bytes.iter().position(|b| *b == b'\n').unwrap() + 1..];
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(body).read_to_string(&mut text).unwrap();
        assert_eq!(text.lines().count(), 6);
    }

    #[test]
    fn compressed_well() {
        let bytes = encode("Slurm", &datums(1000));
        let plain: usize = datums(1000).iter().map(|d| d.to_json_line("Slurm").len() + 1).sum();
        assert!(bytes.len() * 4 < plain, "{} vs {plain}", bytes.len());
    }
}
