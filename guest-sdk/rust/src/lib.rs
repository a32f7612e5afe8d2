//! The Rust SDK for Sluice transforms.
//!
//! A transform reads a batch of Delta change rows and emits Kafka records. Implement
//! [`Transform`] and export it with [`export_transform!`]:
//!
//! ```
//! use sluice_transform::{Batch, ChangeType, Error, Output, Params, Record, Transform};
//!
//! struct Inserts;
//!
//! impl Transform for Inserts {
//!     fn init(_params: &Params) -> Result<Self, String> {
//!         Ok(Inserts)
//!     }
//!
//!     fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
//!         for row in batch.rows().filter(|r| r.change_type() == ChangeType::Insert) {
//!             let id = row.str("id")?.unwrap_or_default();
//!             out.emit(&row, Record::new().key(id).value(row.to_json()));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! sluice_transform::export_transform!(Inserts);
//! ```
//!
//! The crate builds natively too, so transforms unit-test with plain `cargo test`:
//! build a [`Batch`] with [`BatchBuilder`] and call your `transform` directly.

extern crate self as sluice_transform;

mod batch;
mod json;
mod output;
mod params;
mod time;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "transform",
        pub_export_macro: true,
        export_macro_name: "__export_transform_bindings",
        default_bindings_module: "::sluice_transform::bindings",
        runtime_path: "::sluice_transform::__private::wit_bindgen::rt",
    });
}

pub use batch::{Batch, BatchBuilder, ChangeType, ColumnValues, Row, Value};
pub use json::JsonObject;
pub use output::{Error, Output, Record};
pub use params::Params;
pub use time::{format_date, format_timestamp_micros};

/// A transform: made once per instance from the pipeline's parameters, then called
/// once per batch of change rows.
pub trait Transform: Sized + 'static {
    /// Builds the transform from the pipeline's `[transform.params]`. An error stops
    /// the pipeline and is shown to the operator.
    fn init(params: &Params) -> Result<Self, String>;

    /// Turns one batch of change rows into records, emitted in order into `out`.
    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error>;
}

/// Exports a [`Transform`] implementation as the module's transformer.
///
/// The export exists on Wasm targets only: native builds (unit tests) call the
/// transform directly, and native linkers refuse the contract's export names.
#[macro_export]
macro_rules! export_transform {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct SluiceGuest;

            ::std::thread_local! {
                static STATE: ::std::cell::RefCell<::std::option::Option<$ty>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            impl $crate::bindings::exports::sluice::transform::transformer::Guest for SluiceGuest {
                fn init(
                    params: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    let transform = $crate::__private::init::<$ty>(params)?;
                    STATE.with(|state| *state.borrow_mut() = ::std::option::Option::Some(transform));
                    ::std::result::Result::Ok(())
                }

                fn transform(
                    batch: $crate::bindings::sluice::transform::types::ChangeBatch,
                ) -> ::std::result::Result<
                    ::std::vec::Vec<$crate::bindings::sluice::transform::types::OutputRecord>,
                    $crate::bindings::sluice::transform::types::TransformError,
                > {
                    STATE.with(|state| $crate::__private::transform(state.borrow_mut().as_mut(), batch))
                }
            }

            $crate::bindings::__export_transform_bindings!(SluiceGuest with_types_in $crate::bindings);
        };
    };
}

#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;

    use crate::bindings::sluice::transform::types as wit;
    use crate::{Batch, Output, Params, Transform};

    pub fn init<T: Transform>(params: Vec<(String, String)>) -> Result<T, String> {
        T::init(&Params::from_pairs(params))
    }

    pub fn transform<T: Transform>(
        state: Option<&mut T>,
        batch: wit::ChangeBatch,
    ) -> Result<Vec<wit::OutputRecord>, wit::TransformError> {
        let Some(transform) = state else {
            return Err(wit::TransformError::Batch(
                "The host called transform before init.".to_string(),
            ));
        };
        let batch = Batch::from_wit(batch);
        let mut out = Output::default();
        transform
            .transform(&batch, &mut out)
            .map_err(crate::Error::into_wit)?;
        Ok(out.into_wit())
    }
}
