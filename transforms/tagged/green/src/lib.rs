//! A swap test fixture: every change row as JSON, with header `tag = green`.

const TAG: &str = "green";

include!("../../tagged.rs");
