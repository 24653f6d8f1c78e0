//! sdiag's text and JSON forms of one Slurm, compared as the fixture tests compare them.

use slurm_cw_shipper::sources::head::sdiag::Sdiag;

/// Every value both forms carry is equal, and they share at least 25.
pub fn assert_values_agree(v: &str, text: &Sdiag, json: &Sdiag) {
    let mut compared = 0;
    for (m, tv) in &text.values {
        if let Some(jv) = json.get(m) {
            assert_eq!(*tv, jv, "{v}: {} text {tv} json {jv}", m.name);
            compared += 1;
        }
    }
    assert!(compared >= 25, "{v}: only {compared} values in both forms");
}
