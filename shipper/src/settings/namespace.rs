//! The namespace a cluster's figures go to: one per cluster unless configured, because IAM
//! confines PutMetricData by namespace (`cloudwatch:namespace`), never by `ClusterName`.

use super::{ConfigError, Settings};

impl Settings {
    /// The namespace metrics go to: `namespace`, or `Slurm/<cluster>` when it is not set. An
    /// invalid one is an error naming the key it comes from.
    pub fn namespace_for(&self, cluster: &str) -> Result<String, ConfigError> {
        use crate::sinks::validate::check_namespace;
        match &self.namespace {
            Some(ns) => match check_namespace(ns) {
                Ok(()) => Ok(ns.clone()),
                Err(why) => Err(ConfigError::invalid("namespace", why)),
            },
            None => {
                let ns = slurm_cw_catalog::default_namespace(cluster);
                match check_namespace(&ns) {
                    Ok(()) => Ok(ns),
                    Err(why) => Err(ConfigError::invalid(
                        "cluster_name",
                        format!(
                            "{cluster:?} makes the default namespace invalid ({why}); set \
                             namespace, or a cluster_name of letters, digits and - _ ."
                        ),
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_namespace_is_the_clusters_own_unless_set() {
        let c = Settings::from_toml("cluster_name = \"prod-a\"\n", "t", env(&[])).unwrap();
        assert_eq!(c.namespace_for("prod-a").unwrap(), "Slurm/prod-a");
        let c = Settings::from_toml(
            "cluster_name = \"prod-a\"\nnamespace = \"Slurm\"\n",
            "t",
            env(&[("SLURM_CW_NAMESPACE", "Hpc/Shared")]),
        )
        .unwrap();
        assert_eq!(c.namespace_for("prod-a").unwrap(), "Hpc/Shared", "an explicit namespace wins");
        let c = Settings::from_toml("namespace = \"Slurm\"\n", "t", env(&[])).unwrap();
        assert_eq!(c.namespace_for("prod-a").unwrap(), "Slurm", "the old shared one, kept on purpose");
    }

    #[test]
    fn a_bad_namespace_or_a_cluster_name_that_makes_one_names_its_key() {
        let long = "c".repeat(250);
        let cases = [
            ("namespace = \"AWS/EC2\"\n".to_owned(), "namespace"),
            ("namespace = \":Slurm\"\n".to_owned(), "namespace"),
            ("namespace = \"Slurm/é\"\n".to_owned(), "namespace"),
            ("namespace = \"Slurm/${aws:username}\"\n".to_owned(), "namespace"),
            ("namespace = \"\"\n".to_owned(), "namespace"),
            // "Slurm/" + 250 characters is 256, one past CloudWatch's limit.
            (format!("cluster_name = \"{long}\"\n"), "cluster_name"),
            ("cluster_name = \"hpc*\"\n".to_owned(), "cluster_name"),
            ("cluster_name = \"prod@eu\"\n".to_owned(), "cluster_name"),
        ];
        for (text, key) in &cases {
            let e = Settings::from_toml(text, "t", env(&[])).unwrap_err();
            assert_eq!(e.key(), Some(*key), "{text:?} -> {e}");
        }
        // The same cluster names are fine with a namespace of their own.
        let c =
            Settings::from_toml(&format!("cluster_name = \"{long}\"\nnamespace = \"Hpc\"\n"), "t", env(&[]))
                .unwrap();
        assert_eq!(c.namespace_for(&long).unwrap(), "Hpc");
        // A cluster name read from slurm.conf is checked when the namespace is made from it.
        let c = Settings::from_toml("", "t", env(&[])).unwrap();
        assert!(c.namespace_for("hpc*").unwrap_err().to_string().starts_with("cluster_name: "));
        assert_eq!(c.namespace_for("from-conf").unwrap(), "Slurm/from-conf");
    }
}
