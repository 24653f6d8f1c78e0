//! The price lookup's tests, against the documented `GetProducts` response shape.

use super::*;

/// Pages of the documented `GetProducts` shape (not captured: LocalStack has no Price List
/// service): the plain offer on the second page, behind a Capacity Block's product.
#[tokio::test]
async fn the_price_is_looked_for_on_the_next_page_while_a_page_has_none() {
    let product = |market: &str, usd: &str| {
        serde_json::json!({
            "product": {"attributes": {"marketoption": market, "licenseModel": "No License required"}},
            "terms": {"OnDemand": {"a": {"priceDimensions": {"b": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}
        })
        .to_string()
    };
    let first = serde_json::json!({"PriceList": [product("CapacityBlock", "31.464")], "NextToken": "p2"});
    let second = serde_json::json!({"PriceList": [product("OnDemand", "98.32")]});
    let mut asked = Vec::new();
    let got = first_price(|token| {
        asked.push(token.clone());
        let page = if token.is_some() { &second } else { &first };
        let bytes = page.to_string().into_bytes();
        async move { Ok(bytes) }
    })
    .await;
    assert_eq!(got, Ok(98.32));
    assert_eq!(asked, [None, Some("p2".to_owned())]);
    // A page past the last has no price: no price, after at most PRICE_PAGES asks.
    let mut n = 0;
    let endless = serde_json::json!({"PriceList": [], "NextToken": "again"}).to_string();
    let got = first_price(|_| {
        n += 1;
        let bytes = endless.clone().into_bytes();
        async move { Ok(bytes) }
    })
    .await;
    assert!(got.is_err_and(|e| e.contains("names no price")));
    assert_eq!(n, PRICE_PAGES);
}

#[test]
fn form_values_are_encoded() {
    assert_eq!(encode("Linux/UNIX"), "Linux%2FUNIX");
    assert_eq!(encode("2026-11-26T10:00:00.000Z"), "2026-11-26T10%3A00%3A00.000Z");
}

#[test]
fn each_partition_has_its_hosts_and_says_where_no_price_list_answers() {
    // Off the commercial partition a node's credentials cannot reach us-east-1's Price List API
    // (China's lists yuan): a failure that says what to set, asked of no host. The Spot price
    // is asked of the region's own EC2, under its partition's suffix.
    for (region, suffix, reachable) in [
        ("eu-west-1", "amazonaws.com", true),
        ("cn-northwest-1", "amazonaws.com.cn", false),
        ("us-gov-west-1", "amazonaws.com", false),
    ] {
        let (s, prices) = partition(region);
        assert_eq!((s, prices.is_ok()), (suffix, reachable), "{region}");
        if let Err(e) = prices {
            assert!(e.contains("cost.hourly_price"), "{e}");
        }
    }
}
