//! The README's configuration table, made from the code: every key of [`Config`] with its
//! default (taken from `Config::default()`, so it cannot drift) and what it means. A test fails
//! when a key has no line here or the README's table is stale.
