//! A swap test fixture: every change row as JSON, with header `tag = blue`.

const TAG: &str = "blue";

include!("../../tagged.rs");
