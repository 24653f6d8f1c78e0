//! Finds the node's price and the nodes' sizes, off the collection thread: the configured price,
//! else the instance's own from IMDSv2 (instance type, Availability Zone, region, life cycle;
//! root only, as `install` restricts it) and AWS: the Spot price (`ec2:DescribeSpotPriceHistory`,
//! refreshed about hourly, with jitter) or the On-Demand price (`pricing:GetProducts`, kept on
//! disk for a day). Node sizes come from `scontrol show node -o <name>`.
//!
//! AWS is called by signed HTTPS requests (SigV4, [`crate::http_client::sign`]) rather than two
//! more SDK crates: one request each, an hour apart at most. Endpoints follow the SDK's
//! variables: `AWS_ENDPOINT_URL_EC2`, `AWS_ENDPOINT_URL_PRICING`, `AWS_ENDPOINT_URL`, and IMDS's
//! `AWS_EC2_METADATA_SERVICE_ENDPOINT` and `AWS_EC2_METADATA_DISABLED`.

use super::config::CostConfig;
use super::{Basis, Price, Prices};
use crate::http_client::{Http, sign};
use crate::sources::head::command::SlurmCommands;
use bytes::Bytes;
use http_body_util::Full;
use slurm_cw_formats::price::{PriceError, next_token, on_demand_price, spot_price};
use slurm_cw_formats::slurm::node;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const IMDS: &str = "http://169.254.169.254";
const TIMEOUT: Duration = Duration::from_secs(5);
/// IMDS answers at once on an instance; off one, a connection must not hold up `--once`.
const IMDS_TIMEOUT: Duration = Duration::from_secs(1);
/// The Spot price is asked again after about this long (plus up to a quarter of it at random).
const SPOT_EVERY: Duration = Duration::from_secs(3600);
/// The On-Demand price is kept this long, on disk too.
const ON_DEMAND_EVERY: Duration = Duration::from_secs(86_400);
/// After a failed look-up, the next one waits this long.
const RETRY: Duration = Duration::from_secs(300);
/// The Price List API answers in a few regions only; nodes of the commercial partition ask it
/// in this one.
const PRICING_REGION: &str = "us-east-1";

/// The DNS suffix of `region`'s partition (China's own), and whether the Price List API in US
/// dollars can be reached from it: not with GovCloud's or the ISO partitions' credentials, and
/// China's lists its prices in yuan.
fn partition(region: &str) -> (&'static str, Result<(), String>) {
    let out_of_reach = |which: &str| {
        Err(format!(
            "no Price List API in US dollars for {which} ({region}): set cost.hourly_price or cost.prices"
        ))
    };
    if region.starts_with("cn-") {
        ("amazonaws.com.cn", out_of_reach("AWS China"))
    } else if region.starts_with("us-gov-") {
        ("amazonaws.com", out_of_reach("AWS GovCloud (US)"))
    } else if region.starts_with("us-iso") {
        ("amazonaws.com", out_of_reach("an AWS ISO partition"))
    } else {
        ("amazonaws.com", Ok(()))
    }
}

/// What IMDS says of this instance.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Instance {
    pub instance_type: String,
    pub zone: String,
    pub region: String,
    pub spot: bool,
}

pub struct Lookup {
    config: CostConfig,
    prices: Prices,
    cmds: SlurmCommands,
    instance: Option<Instance>,
    /// When the price is to be looked up next.
    next: Option<Instant>,
    /// What answered last, for `--check`.
    pub source: String,
    /// Whether to log what the look-ups find (`--check` says it in its table instead).
    log: bool,
}

/// The endpoint of `service` (the SDK's variables, else AWS's own host in `region`'s
/// partition).
fn endpoint(service: &str, env_name: &str, region: &str) -> String {
    std::env::var(format!("AWS_ENDPOINT_URL_{env_name}"))
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|_| format!("https://{service}.{region}.{}", partition(region).0))
}

fn client(url: &str, timeout: Duration) -> Result<Http, String> {
    Http::new(url.starts_with("https:"), timeout).map_err(|e| e.to_string())
}

/// GET or PUT on IMDS with its token header.
async fn imds_call(
    http: &Http,
    base: &str,
    method: &str,
    path: &str,
    header: (&str, &str),
) -> Result<String, String> {
    let request = ::http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header(header.0, header.1)
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let answer =
        http.send(request, IMDS_TIMEOUT).await.map_err(|e| format!("instance metadata {path}: {e}"))?;
    if answer.status != 200 {
        return Err(format!("instance metadata {path}: HTTP {}", answer.status));
    }
    String::from_utf8(answer.body)
        .map(|s| s.trim().to_owned())
        .map_err(|_| format!("instance metadata {path}: not text"))
}

/// This instance's type, zone, region and life cycle, from IMDSv2.
pub async fn instance() -> Result<Instance, String> {
    if std::env::var("AWS_EC2_METADATA_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true")) {
        return Err("instance metadata disabled (AWS_EC2_METADATA_DISABLED)".into());
    }
    let base = std::env::var("AWS_EC2_METADATA_SERVICE_ENDPOINT").unwrap_or_else(|_| IMDS.to_owned());
    let base = base.trim_end_matches('/');
    let http = client(base, IMDS_TIMEOUT)?;
    let token =
        imds_call(&http, base, "PUT", "/latest/api/token", ("x-aws-ec2-metadata-token-ttl-seconds", "300"))
            .await?;
    let get = |path: &'static str| {
        let (http, token) = (&http, &token);
        async move { imds_call(http, base, "GET", path, ("x-aws-ec2-metadata-token", token)).await }
    };
    let instance_type = get("/latest/meta-data/instance-type").await?;
    let zone = get("/latest/meta-data/placement/availability-zone").await?;
    let region = match get("/latest/meta-data/placement/region").await {
        Ok(r) => r,
        // Older IMDS: the zone less its letter.
        Err(_) => zone.trim_end_matches(|c: char| c.is_ascii_lowercase()).to_owned(),
    };
    let spot = get("/latest/meta-data/instance-life-cycle").await.is_ok_and(|l| l == "spot");
    Ok(Instance { instance_type, zone, region, spot })
}

/// A signed POST to an AWS endpoint; the answer's body on 200.
async fn aws_post(
    service: &str,
    region: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Result<Vec<u8>, String> {
    let sdk = slurm_cw_sink::aws::sdk_config(Some(region)).await.map_err(|e| e.to_string())?;
    let provider = sdk.credentials_provider().ok_or("no AWS credentials")?;
    let mut signer = sign::Signer::new(provider, region.to_owned());
    let credentials = signer.credentials().await?;
    let uri: ::http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let host = uri.authority().map(|a| a.as_str().to_owned()).ok_or_else(|| format!("{url}: no host"))?;
    let mut signed: Vec<(&str, &str)> = vec![("host", host.as_str())];
    signed.extend_from_slice(headers);
    let auth =
        sign::signature(&credentials, service, region, SystemTime::now(), "POST", url, &signed, &body)?;
    let mut request = ::http::Request::post(uri);
    for (k, v) in &signed {
        request = request.header(*k, *v);
    }
    for (k, v) in auth {
        request = request.header(k, v);
    }
    let request = request.body(Full::new(Bytes::from(body))).map_err(|e| e.to_string())?;
    let answer = client(url, TIMEOUT)?.send(request, TIMEOUT).await.map_err(|e| format!("{service}: {e}"))?;
    if answer.status != 200 {
        let text = String::from_utf8_lossy(&answer.body);
        return Err(format!(
            "{service} answered HTTP {}: {}",
            answer.status,
            text.chars().take(300).collect::<String>()
        ));
    }
    Ok(answer.body)
}

/// The newest Spot price of the instance's type in its zone.
pub async fn spot(i: &Instance) -> Result<f64, String> {
    let url = endpoint("ec2", "EC2", &i.region);
    let now = slurm_cw_formats::datum::format_timestamp(SystemTime::now());
    let form = [
        ("Action", "DescribeSpotPriceHistory"),
        ("Version", "2016-11-15"),
        ("InstanceType.1", i.instance_type.as_str()),
        ("ProductDescription.1", "Linux/UNIX"),
        ("AvailabilityZone", i.zone.as_str()),
        ("StartTime", now.as_str()),
    ];
    let body = form.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect::<Vec<_>>().join("&");
    let ctype = ("content-type", "application/x-www-form-urlencoded; charset=utf-8");
    let xml = aws_post("ec2", &i.region, &url, &[ctype], body.into_bytes()).await?;
    let p = spot_price(&String::from_utf8_lossy(&xml), Some(&i.zone))
        .map_err(|e| format!("DescribeSpotPriceHistory: {e}"))?;
    Ok(p.hourly)
}

/// Form encoding of a value (RFC 3986 unreserved characters kept).
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Pages of `GetProducts` read at most: the filters match a handful of products (the plain
/// offer, a Capacity Block's, licence variants), a hundred to a page.
const PRICE_PAGES: usize = 3;

/// The On-Demand Linux price of the instance's type in its region.
pub async fn on_demand(i: &Instance) -> Result<f64, String> {
    partition(&i.region).1?;
    let url = endpoint("api.pricing", "PRICING", PRICING_REGION);
    let filter =
        |field: &str, value: &str| serde_json::json!({"Type": "TERM_MATCH", "Field": field, "Value": value});
    let mut body = serde_json::json!({
        "ServiceCode": "AmazonEC2",
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
        "Filters": [
            filter("instanceType", &i.instance_type),
            filter("regionCode", &i.region),
            filter("operatingSystem", "Linux"),
            filter("tenancy", "Shared"),
            filter("preInstalledSw", "NA"),
            filter("capacitystatus", "Used"),
        ],
    });
    let headers =
        [("content-type", "application/x-amz-json-1.1"), ("x-amz-target", "AWSPriceListService.GetProducts")];
    first_price(|token| {
        if let Some(t) = token {
            body["NextToken"] = serde_json::json!(t);
        }
        let (url, bytes) = (url.clone(), body.to_string().into_bytes());
        async move { aws_post("pricing", PRICING_REGION, &url, &headers, bytes).await }
    })
    .await
}

/// The plain On-Demand price of the first page that has it, asking for the next page (by its
/// token) while a page has none; `page` fetches one.
async fn first_price<F, Fut>(mut page: F) -> Result<f64, String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<u8>, String>>,
{
    let mut token = None;
    for _ in 0..PRICE_PAGES {
        let answer = page(token.take()).await?;
        match on_demand_price(&answer) {
            Err(PriceError::NoPrice) => {}
            found => return found.map_err(|e| format!("GetProducts: {e}")),
        }
        match next_token(&answer) {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    Err(format!("GetProducts: {}", PriceError::NoPrice))
}

/// The On-Demand price kept on disk.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Cached {
    instance_type: String,
    region: String,
    hourly: f64,
    /// Seconds since the epoch.
    at: u64,
}

impl Lookup {
    pub fn new(config: &CostConfig, cmds: SlurmCommands, prices: Prices) -> Self {
        Lookup {
            config: config.clone(),
            prices,
            cmds,
            instance: None,
            next: None,
            source: "not looked up yet".into(),
            log: true,
        }
    }

    pub fn prices(&self) -> &Prices {
        &self.prices
    }

    /// The price when it is due, and the sizes of the nodes wanted.
    pub async fn refresh(&mut self) {
        if self.next.is_none_or(|t| t <= Instant::now()) {
            let (price, again) = self.find_price().await;
            match &price {
                Ok(p) => {
                    self.source = format!("{} ${:.4}/h", p.basis.as_str(), p.hourly);
                    if self.log {
                        tracing::info!(basis = p.basis.as_str(), hourly = p.hourly, "node price");
                    }
                }
                Err(why) => {
                    if self.log && self.prices.missing().as_deref() != Some(why.as_str()) {
                        tracing::warn!(reason = %why, "no price for this node: jobs ship without cost figures");
                    }
                    self.source = format!("none: {why}");
                }
            }
            self.prices.set_price(price);
            self.next = again.map(|d| Instant::now() + d);
        }
        self.refresh_sizes().await;
    }

    /// Sizes of the nodes the jobs ran on that are not known yet.
    pub async fn refresh_sizes(&mut self) {
        for name in self.prices.wanted() {
            match self.cmds.run("scontrol", &["show", "node", "-o", &name]).await {
                Ok(out) => match node::parse(&out.stdout, &name) {
                    Ok(size) => self.prices.set_size(&name, size),
                    Err(e) => {
                        tracing::warn!(node = name, error = %e, "no node size: its jobs ship without cost figures")
                    }
                },
                Err(e) => {
                    tracing::debug!(node = name, error = %e, "scontrol show node failed; asking again later")
                }
            }
        }
    }

    /// The price, and when to look again (None: never, a configured price).
    async fn find_price(&mut self) -> (Result<Price, String>, Option<Duration>) {
        let configured = |hourly| (Ok(Price { hourly, basis: Basis::Configured }), None);
        if let Some(p) = self.config.hourly_price {
            return configured(p);
        }
        if self.instance.is_none() {
            match instance().await {
                Ok(i) => self.instance = Some(i),
                Err(e) if self.config.prices.is_empty() && !self.config.lookup => {
                    return (Err(format!("no cost.hourly_price ({e})")), None);
                }
                Err(e) => return (Err(format!("no instance type to price: {e}")), Some(RETRY)),
            }
        }
        let Some(i) = self.instance.clone() else { return (Err("no instance".into()), Some(RETRY)) };
        if let Some(p) = self.config.prices.get(&i.instance_type) {
            return configured(*p);
        }
        if !self.config.lookup {
            return (
                Err(format!("no price configured for {} and cost.lookup is off", i.instance_type)),
                None,
            );
        }
        if i.spot {
            match spot(&i).await {
                Ok(hourly) => {
                    let jitter = SPOT_EVERY.mul_f64(rand::random::<f64>() / 4.0);
                    return (Ok(Price { hourly, basis: Basis::Spot }), Some(SPOT_EVERY + jitter));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no Spot price; the On-Demand price stands in (an upper bound)")
                }
            }
        }
        match self.on_demand_cached(&i).await {
            Ok(hourly) => (
                Ok(Price { hourly, basis: Basis::OnDemand }),
                Some(if i.spot { RETRY } else { ON_DEMAND_EVERY }),
            ),
            Err(e) => (Err(e), Some(RETRY)),
        }
    }

    async fn on_demand_cached(&self, i: &Instance) -> Result<f64, String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let path = &self.config.cache_file;
        let cached = std::fs::read(path).ok().and_then(|b| serde_json::from_slice::<Cached>(&b).ok());
        if let Some(c) = cached.filter(|c| {
            c.instance_type == i.instance_type
                && c.region == i.region
                && now.saturating_sub(c.at) < ON_DEMAND_EVERY.as_secs()
                && c.hourly.is_finite()
                && c.hourly >= 0.0
        }) {
            return Ok(c.hourly);
        }
        let hourly = on_demand(i).await?;
        let c = Cached { instance_type: i.instance_type.clone(), region: i.region.clone(), hourly, at: now };
        if let Ok(text) = serde_json::to_vec(&c)
            && let Err(e) = crate::cost::lookup::write_private(path, &text)
        {
            tracing::debug!(path = %path.display(), error = %e, "cannot keep the On-Demand price on disk");
        }
        Ok(hourly)
    }
}

/// `--check`'s line: which source gave the price (or why none did), and this node's size as
/// Slurm defines it.
pub async fn describe(cost: &CostConfig, cmds: SlurmCommands, node: &str) -> Result<String, String> {
    let mut lookup = Lookup::new(cost, cmds, Prices::default());
    lookup.log = false;
    lookup.prices.size(node);
    lookup.refresh().await;
    let size = match lookup.prices.size(node) {
        Some(s) => format!(
            "; node {node}: {} CPUs, {:.0} MB, {} GPUs (scontrol show node)",
            s.cpus,
            s.memory_bytes / 1048576.0,
            s.gpus
        ),
        None => format!("; node {node}: no size from scontrol show node, so no job share"),
    };
    let text = format!("{}{size}", lookup.source);
    if lookup.prices.price().is_some() && !size.contains("no size") {
        Ok(text)
    } else {
        Err(format!("{text}: jobs ship without cost figures"))
    }
}

/// Writes `bytes` to `path` through a temporary file beside it (root's directory: no user can
/// swap it).
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
#[path = "lookup_tests.rs"]
mod tests;
