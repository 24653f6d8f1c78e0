//! The role: which collectors run. One enum for the configuration (`role`, where `"auto"` is
//! `None`: detected, see `crate::role`), the command line (`--role`) and the run.

use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Node,
    Head,
    All,
}
impl Role {
    pub fn runs_head(self) -> bool {
        matches!(self, Role::Head | Role::All)
    }

    pub fn runs_node(self) -> bool {
        matches!(self, Role::Node | Role::All)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Node => "node",
            Role::Head => "head",
            Role::All => "all",
        }
    }
}

/// `role`: `"auto"` (None: detected) or a role.
pub(crate) fn setting<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Role>, D::Error> {
    let text = String::deserialize(d)?;
    match text.as_str() {
        "auto" => Ok(None),
        "node" => Ok(Some(Role::Node)),
        "head" => Ok(Some(Role::Head)),
        "all" => Ok(Some(Role::All)),
        other => Err(serde::de::Error::custom(format!("{other:?} is not a role: auto, node, head or all"))),
    }
}

#[cfg(test)]
mod tests {
    use crate::settings::Settings;

    #[test]
    fn auto_is_none_and_a_wrong_role_names_the_choices() {
        let role =
            |text: &str| Settings::from_toml(&format!("role = {text:?}\n"), "t", Vec::new()).map(|c| c.role);
        assert_eq!(role("auto").unwrap(), None);
        assert_eq!(role("head").unwrap(), Some(super::Role::Head));
        let e = role("boss").unwrap_err().to_string();
        assert!(e.contains("\"boss\" is not a role: auto, node, head or all") && e.contains("line 1"), "{e}");
    }
}
