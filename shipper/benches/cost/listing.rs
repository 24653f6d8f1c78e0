//! What CloudWatch lists of a namespace after a run, by what each metric scales with.

use super::*;

/// The distinct metrics of a namespace (ListMetrics, every page), by what they scale with.
#[derive(Debug, Default)]
pub struct Listing {
    pub total: usize,
    pub pages: u32,
    /// cluster, partition, account, user, node, job
    pub by_scope: BTreeMap<&'static str, usize>,
    /// Of those with neither JobId nor NodeName, who sends them: head, node (the population
    /// figures), shipper (about itself), lambda.
    pub by_role: BTreeMap<&'static str, usize>,
    pub partitions: BTreeSet<String>,
    pub accounts: BTreeSet<String>,
    pub jobs: BTreeSet<String>,
    pub by_name: BTreeMap<String, usize>,
}

pub async fn list_metrics(cw: &aws_sdk_cloudwatch::Client, namespace: &str) -> Listing {
    use slurm_cw_catalog::Role;
    let mut l = Listing::default();
    let mut token = None;
    loop {
        let resp =
            cw.list_metrics().namespace(namespace).set_next_token(token).send().await.expect("ListMetrics");
        l.pages += 1;
        for m in resp.metrics() {
            l.total += 1;
            *l.by_name.entry(m.metric_name().unwrap_or_default().to_owned()).or_default() += 1;
            let dims: BTreeMap<&str, &str> =
                m.dimensions().iter().filter_map(|d| Some((d.name()?, d.value()?))).collect();
            let scope = if let Some(j) = dims.get(JOB_ID) {
                l.jobs.insert((*j).to_owned());
                "job"
            } else if dims.contains_key(NODE_NAME) {
                "node"
            } else if let Some(p) = dims.get("Partition") {
                l.partitions.insert((*p).to_owned());
                "partition"
            } else if let Some(a) = dims.get(ACCOUNT) {
                l.accounts.insert((*a).to_owned());
                "account"
            } else if dims.contains_key(USER) {
                "user"
            } else {
                "cluster"
            };
            *l.by_scope.entry(scope).or_default() += 1;
            if scope != "job" && scope != "node" {
                let name = m.metric_name().unwrap_or_default();
                let roles =
                    slurm_cw_catalog::ALL.iter().find(|c| c.name == name).map_or(&[][..], |c| c.roles);
                let role = if roles.contains(&Role::Lambda) {
                    "lambda"
                } else if roles.contains(&Role::Shipper) || name == COLLECTOR_ERRORS.name {
                    "shipper"
                } else if roles.contains(&Role::Head) {
                    "head"
                } else {
                    "node"
                };
                *l.by_role.entry(role).or_default() += 1;
            }
        }
        token = resp.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    l
}
