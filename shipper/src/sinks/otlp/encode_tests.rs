use super::*;
use crate::datum::{Datum, DatumValue, Stats};
use std::time::Duration;

fn datum(metric: &str, job: &str, value: DatumValue) -> Aggregate {
    let d = Datum {
        metric: metric.into(),
        unit: String::new(),
        dimensions: vec![("ClusterName".into(), "c1".into()), ("JobId".into(), job.into())],
        timestamp: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        value,
    };
    Aggregate::from_datum(d).expect("a catalog metric")
}

fn field<'a>(b: &'a [u8], n: u32) -> Vec<Field<'a>> {
    fields(b).filter(|(f, _)| *f == n).map(|(_, v)| v).collect()
}

fn one(b: &[u8], n: u32) -> &[u8] {
    let all = field(b, n);
    assert_eq!(all.len(), 1, "field {n}");
    all[0].bytes().unwrap()
}

fn text(b: &[u8], n: u32) -> String {
    String::from_utf8(one(b, n).to_vec()).unwrap()
}

/// KeyValue messages as (key, string value).
fn attributes(b: &[u8], n: u32) -> Vec<(String, String)> {
    field(b, n)
        .into_iter()
        .map(|kv| {
            let kv = kv.bytes().unwrap();
            (text(kv, 1), text(one(kv, 2), 1))
        })
        .collect()
}

/// A fixed64 field's 8 bytes, read from the raw message (the reader skips their value).
fn fixed(b: &[u8], n: u32) -> u64 {
    let key = (u64::from(n) << 3) | 1;
    let mut pos = 0;
    while pos < b.len() {
        let k = read_varint(b, &mut pos).unwrap();
        match k & 7 {
            1 if k == key => return u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap()),
            1 => pos += 8,
            0 => {
                read_varint(b, &mut pos).unwrap();
            }
            2 => {
                let l = read_varint(b, &mut pos).unwrap() as usize;
                pos += l;
            }
            _ => panic!("unexpected wire type"),
        }
    }
    panic!("no field {n}")
}

#[test]
fn a_request_holds_the_resource_one_metric_per_name_and_its_points() {
    let rss = slurm_cw_catalog::by_name("MemoryRss").unwrap();
    let a = datum("MemoryRss", "7", DatumValue::Value { value: 314572800.0 });
    let b = datum("OomKills", "7", DatumValue::Value { value: 1.0 });
    let c = datum(
        "MemoryRss",
        "8",
        DatumValue::Stats { stats: Stats { min: 1.0, max: 5.0, sum: 6.0, count: 2.0 } },
    );
    let body = request(&[("service.name".into(), "slurm-cw-shipper".into())], &[a, b, c]);

    let rm = one(&body, 1);
    assert_eq!(attributes(one(rm, 1), 1), vec![("service.name".to_owned(), "slurm-cw-shipper".to_owned())]);
    let sm = one(rm, 2);
    assert_eq!(text(one(sm, 1), 1), SCOPE);
    let metrics = field(sm, 2);
    assert_eq!(metrics.len(), 2, "one Metric per name");
    let m = metrics[0].bytes().unwrap();
    assert_eq!(text(m, 1), "slurm_memory_rss_bytes");
    assert_eq!(text(m, 2), rss.help);
    assert_eq!(text(m, 3), "By");
    let points = field(one(m, 5), 1);
    assert_eq!(points.len(), 2);
    let p = points[0].bytes().unwrap();
    assert_eq!(attributes(p, 7), vec![("cluster_name".into(), "c1".into()), ("job_id".into(), "7".into())]);
    assert_eq!(fixed(p, 3), 1_700_000_000_123_000_000);
    assert_eq!(f64::from_bits(fixed(p, 4)), 314572800.0);
    assert_eq!(f64::from_bits(fixed(points[1].bytes().unwrap(), 4)), 3.0, "a statistic set's mean");
    let m = metrics[1].bytes().unwrap();
    assert_eq!((text(m, 1).as_str(), text(m, 3).as_str()), ("slurm_oom_kills", "{count}"));
}

#[test]
fn point_size_is_what_a_point_adds() {
    let a = datum("MemoryRss", "7", DatumValue::Value { value: 1.0 });
    let b = datum("MemoryRss", "123456", DatumValue::Value { value: 2.0 });
    let one_point = request(&[], std::slice::from_ref(&a)).len();
    let two_points = request(&[], &[a, b.clone()]).len();
    // Each enclosing length may grow by a byte when a point is added.
    let added = two_points - one_point;
    assert!((point_size(&b)..=point_size(&b) + 4).contains(&added), "{added} vs {}", point_size(&b));
}

#[test]
fn means_of_each_value_form() {
    assert_eq!(mean(&DatumValue::Value { value: 2.5 }), 2.5);
    assert_eq!(mean(&DatumValue::Stats { stats: Stats { min: 1.0, max: 3.0, sum: 8.0, count: 4.0 } }), 2.0);
    assert_eq!(mean(&DatumValue::Values { values: vec![1.0, 4.0], counts: vec![3.0, 1.0] }), 1.75);
    assert_eq!(
        mean(&DatumValue::Values { values: vec![1.0, 4.0], counts: vec![] }),
        2.5,
        "counts default to 1"
    );
    assert_eq!(mean(&DatumValue::Values { values: vec![], counts: vec![] }), 0.0);
}

#[test]
fn gzip_round_trips_and_partial_success_is_read() {
    use std::io::Read;
    let body = b"hello hello hello".repeat(100);
    let mut back = Vec::new();
    flate2::read::GzDecoder::new(&gzip().member(&body)[..]).read_to_end(&mut back).unwrap();
    assert_eq!(back, body);

    assert_eq!(partial_success(b""), None);
    let mut inner = Vec::new();
    tag(&mut inner, 1, VARINT);
    varint(&mut inner, 3);
    string(&mut inner, 2, "too old");
    let mut answer = Vec::new();
    bytes(&mut answer, 1, &inner);
    assert_eq!(partial_success(&answer), Some((3, "too old".into())));
    assert_eq!(partial_success(&[0xff, 0xff]), None, "garbage is not a partial success");
}
