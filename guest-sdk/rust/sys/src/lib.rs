//! Raw bindings of the `sluice:transform@1.3.0` contract, generated from `wit/`.
//!
//! Transform authors use the `sluice-transform` crate, which wraps these. The export
//! macro is public so that crate's `export!` can name it.

wit_bindgen::generate!({
    path: "../../../wit/transform.wit",
    world: "transform",
    pub_export_macro: true,
    export_macro_name: "export_transformer",
    default_bindings_module: "::sluice_transform::guest::sys",
});
