//! What AWS answers when asked what an instance costs, read without I/O:
//! - `ec2:DescribeSpotPriceHistory` (EC2's query protocol, XML): the newest Spot price of an
//!   instance type in an Availability Zone;
//! - `pricing:GetProducts` (the Price List Query API, JSON): each `PriceList` entry is itself a
//!   JSON document in a string, whose `terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD` is
//!   the On-Demand hourly price (of the plain offer: not a Capacity Block's, not $0).
//!
//! A price must be a finite number of dollars, zero or more; anything else is an error, never a
//! made-up figure.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PriceError {
    #[error("the answer is not the {0} it should be")]
    Unreadable(&'static str),
    #[error("the answer names no price for this instance")]
    NoPrice,
    #[error("the answer's price {0:?} is not a number of dollars")]
    BadPrice(String),
}

/// One Spot price: dollars an hour, and when it took effect (RFC 3339, as EC2 prints it).
#[derive(Debug, Clone, PartialEq)]
pub struct SpotPrice {
    pub hourly: f64,
    pub timestamp: String,
}

/// A price as text -> dollars (finite, not negative).
pub fn dollars(text: &str) -> Result<f64, PriceError> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(PriceError::BadPrice(text.chars().take(40).collect())),
    }
}

/// The text of the first `<tag>...</tag>` in `xml`.
fn element<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&close)? + start;
    Some(&xml[start..end])
}

/// The newest price in a `DescribeSpotPriceHistoryResponse`, of `zone` when given (EC2 may
/// answer for every zone when none was asked).
pub fn spot_price(xml: &str, zone: Option<&str>) -> Result<SpotPrice, PriceError> {
    let set =
        element(xml, "spotPriceHistorySet").ok_or(PriceError::Unreadable("DescribeSpotPriceHistory XML"))?;
    let mut newest: Option<SpotPrice> = None;
    for item in set.split("<item>").skip(1) {
        let item = item.split("</item>").next().unwrap_or("");
        if zone.is_some_and(|z| element(item, "availabilityZone").is_some_and(|a| a.trim() != z)) {
            continue;
        }
        let Some(price) = element(item, "spotPrice") else { continue };
        let timestamp = element(item, "timestamp").unwrap_or("").trim().to_owned();
        let hourly = dollars(price)?;
        // RFC 3339 times in one zone (Z) order as text.
        if newest.as_ref().is_none_or(|n| timestamp > n.timestamp) {
            newest = Some(SpotPrice { hourly, timestamp });
        }
    }
    newest.ok_or(PriceError::NoPrice)
}

/// The On-Demand hourly price in a `GetProducts` answer: the first price per hour (`unit` Hrs)
/// of the first product that has one.
pub fn on_demand_price(json: &[u8]) -> Result<f64, PriceError> {
    let doc: Value = serde_json::from_slice(json).map_err(|_| PriceError::Unreadable("GetProducts JSON"))?;
    let list =
        doc.get("PriceList").and_then(Value::as_array).ok_or(PriceError::Unreadable("GetProducts JSON"))?;
    for entry in list {
        // Each entry is a document in a string (older SDKs), or the document itself.
        let product = match entry {
            Value::String(s) => {
                serde_json::from_str(s).map_err(|_| PriceError::Unreadable("PriceList entry"))?
            }
            other => other.clone(),
        };
        if !plain_on_demand(&product) {
            continue;
        }
        let Some(terms) = product.pointer("/terms/OnDemand").and_then(Value::as_object) else { continue };
        for term in terms.values() {
            let Some(dims) = term.get("priceDimensions").and_then(Value::as_object) else { continue };
            for d in dims.values() {
                let hourly =
                    d.get("unit").and_then(Value::as_str).is_some_and(|u| u.eq_ignore_ascii_case("hrs"));
                if let (true, Some(usd)) = (hourly, d.pointer("/pricePerUnit/USD").and_then(Value::as_str)) {
                    // $0 is no instance's On-Demand price: a placeholder, never a job's cost.
                    let v = dollars(usd)?;
                    if v > 0.0 {
                        return Ok(v);
                    }
                }
            }
        }
    }
    Err(PriceError::NoPrice)
}

/// The `NextToken` of a `GetProducts` answer: more products match than the page held.
pub fn next_token(json: &[u8]) -> Option<String> {
    let doc: Value = serde_json::from_slice(json).ok()?;
    doc.get("NextToken").and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_owned)
}

/// Whether a product is the plain On-Demand offer: the same filters can also match a Capacity
/// Block's product (`marketoption` `CapacityBlock`, GPU instances, priced apart) or a
/// bring-your-own-licence one, and the answer's order is not the price's. A product that does
/// not name the attribute is taken as plain.
fn plain_on_demand(product: &Value) -> bool {
    let attribute =
        |name: &str| product.pointer(&format!("/product/attributes/{name}")).and_then(Value::as_str);
    attribute("marketoption").is_none_or(|m| m == "OnDemand")
        && attribute("licenseModel").is_none_or(|l| l == "No License required")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/aws/");
        std::fs::read_to_string(format!("{path}{name}")).unwrap()
    }

    #[test]
    fn the_newest_spot_price_of_the_zone() {
        let xml = fixture("describe-spot-price-history.xml");
        let p = spot_price(&xml, Some("us-east-1a")).unwrap();
        assert_eq!(p, SpotPrice { hourly: 0.0712, timestamp: "2026-11-26T10:15:00.000Z".into() });
        assert_eq!(spot_price(&xml, Some("us-east-1b")).unwrap().hourly, 0.0694);
        assert_eq!(spot_price(&xml, Some("eu-west-1a")), Err(PriceError::NoPrice));
        assert_eq!(spot_price("<html>", None), Err(PriceError::Unreadable("DescribeSpotPriceHistory XML")));
        let bad = xml.replace("0.0712", "-1");
        assert!(matches!(spot_price(&bad, Some("us-east-1a")), Err(PriceError::BadPrice(_))));
    }

    #[test]
    fn the_on_demand_price_of_a_price_list() {
        assert_eq!(on_demand_price(fixture("pricing-get-products-c5.xlarge.json").as_bytes()), Ok(0.17));
        assert_eq!(on_demand_price(br#"{"PriceList": []}"#), Err(PriceError::NoPrice));
        assert!(matches!(on_demand_price(b"{}"), Err(PriceError::Unreadable(_))));
        assert!(matches!(on_demand_price(br#"{"PriceList": ["{"]}"#), Err(PriceError::Unreadable(_))));
        let nan = br#"{"PriceList": [{"terms": {"OnDemand": {"a": {"priceDimensions": {"b": {"unit": "Hrs", "pricePerUnit": {"USD": "NaN"}}}}}}}]}"#;
        assert!(matches!(on_demand_price(nan), Err(PriceError::BadPrice(_))));
    }

    /// Built from the documented `GetProducts` shape, with the attributes a p5.48xlarge's
    /// products carry: a Capacity Block product first, a bring-your-own-licence one, a $0
    /// placeholder, then the plain On-Demand offer (prices plausible, not captured).
    #[test]
    fn the_plain_on_demand_offer_not_a_capacity_block_or_a_placeholder() {
        let product = |market: &str, licence: &str, usd: &str| {
            serde_json::json!({
                "product": {"attributes": {"instanceType": "p5.48xlarge", "marketoption": market, "licenseModel": licence}},
                "terms": {"OnDemand": {"a": {"priceDimensions": {"b": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}
            })
            .to_string()
        };
        let answer = |entries: Vec<String>| serde_json::json!({ "PriceList": entries }).to_string();
        let all = answer(vec![
            product("CapacityBlock", "No License required", "31.4640000000"),
            product("OnDemand", "Bring your own license", "90.0000000000"),
            product("OnDemand", "No License required", "0.0000000000"),
            product("OnDemand", "No License required", "98.3200000000"),
        ]);
        assert_eq!(on_demand_price(all.as_bytes()), Ok(98.32));
        let only_block = answer(vec![product("CapacityBlock", "No License required", "31.464")]);
        assert_eq!(
            on_demand_price(only_block.as_bytes()),
            Err(PriceError::NoPrice),
            "never the block's price"
        );
        let only_zero = answer(vec![product("OnDemand", "No License required", "0.0000000000")]);
        assert_eq!(on_demand_price(only_zero.as_bytes()), Err(PriceError::NoPrice), "never $0");
    }

    #[test]
    fn a_page_says_whether_more_products_follow() {
        assert_eq!(next_token(br#"{"PriceList": [], "NextToken": "abc=="}"#).as_deref(), Some("abc=="));
        assert_eq!(next_token(fixture("pricing-get-products-c5.xlarge.json").as_bytes()), None);
        assert_eq!(next_token(br#"{"PriceList": [], "NextToken": ""}"#), None);
        assert_eq!(next_token(b"not json"), None);
    }

    #[test]
    fn prices_are_finite_dollars() {
        assert_eq!(dollars(" 1.5 "), Ok(1.5));
        for bad in ["-0.1", "NaN", "inf", "a word", ""] {
            assert!(dollars(bad).is_err(), "{bad}");
        }
    }
}
