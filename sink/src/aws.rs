//! The AWS SDK configuration shared by the sink and `--check`.

use aws_config::{BehaviorVersion, Region};

/// The default chain: environment, profile, then the EC2 instance profile through IMDSv2;
/// `region` (from the configuration) wins over AWS_REGION and the instance's own region.
pub async fn sdk_config(region: Option<&str>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(r) = region {
        loader = loader.region(Region::new(r.to_owned()));
    }
    loader.load().await
}
