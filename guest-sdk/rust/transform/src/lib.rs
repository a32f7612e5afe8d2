//! The Rust SDK for Sluice transforms.
//!
//! A transform reads a batch of Delta change rows and emits Kafka records. Implement
//! [`Transform`] and export it with [`export!`]:
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
//!         for row in batch.rows()?.filter(|r| r.change_type() == ChangeType::Insert) {
//!             let id = row.str("id")?.unwrap_or_default();
//!             out.emit(&row, Record::new().key(id).value(row.to_json()));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! sluice_transform::export!(Inserts);
//! ```
//!
//! Three ways to read a batch, all behind [`Batch`]:
//! - rows and columns decoded from Arrow IPC (the default, fastest for Rust);
//! - the same from the contract's typed columns, the path languages without Arrow
//!   use (set the pipeline parameter `sluice.input = "typed"`; the SDK takes it out of
//!   the parameters your `init` sees);
//! - host helpers ([`Batch::select_change_types`], [`Output::encode`]): the host does
//!   the work natively and nothing is decoded in the guest.
//!
//! Records are bytes the module makes ([`Output::emit`]), bytes it encodes with its own
//! Avro, JSON Schema or Protobuf schema for the host to register and frame
//! ([`Output::emit_framed`]), or records the host encodes ([`Output::encode`]).
//!
//! A transform keeps values across batches in the pipeline's keyed [`state`], which the
//! host commits exactly once with the batch's records.
//!
//! The crate builds natively too, so transforms unit-test with plain `cargo test`:
//! build a [`Batch`] with [`BatchBuilder`], call your `transform`, read
//! [`Output::records`]. Natively the helpers run the host's own implementation and
//! [`log`] writes to stderr.

mod abi;
mod batch;
mod decode;
mod error;
mod framing;
#[doc(hidden)]
pub mod guest;
pub mod log;
pub mod lookup;
mod output;
mod params;
pub mod state;

pub use arrow_array;
pub use batch::{Batch, BatchBuilder, Row};
pub use error::Error;
pub use framing::{Framing, OwnSchema, SchemaKind};
pub use output::Output;
pub use params::Params;
pub use sluice_model::helpers::{
    Comparison, EncodeSpec, FieldValue, Predicate, Scalar, ValueEncoding,
};
pub use sluice_model::{
    ChangeType, Column, JsonKey, JsonObject, Record, Value, format_date, format_timestamp_micros,
    spark_substring,
};

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
/// Batches are decoded from Arrow IPC, or from the contract's typed columns when the
/// pipeline sets the parameter `sluice.input = "typed"`; both give `T` the same
/// [`Batch`]. The export exists on Wasm targets only: native builds (unit tests) call
/// the transform directly.
#[macro_export]
macro_rules! export {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct SluiceGuest;

            ::std::thread_local! {
                static STATE: ::std::cell::RefCell<::std::option::Option<$crate::guest::Instance<$ty>>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            impl $crate::guest::sys::exports::sluice::transform::transformer::Guest for SluiceGuest {
                fn init(
                    params: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    let transform = $crate::guest::init::<$ty>(params)?;
                    STATE.with(|state| *state.borrow_mut() = ::std::option::Option::Some(transform));
                    ::std::result::Result::Ok(())
                }

                fn transform(
                    batch: &$crate::guest::sys::sluice::transform::host::Batch,
                ) -> ::std::result::Result<(), $crate::guest::sys::sluice::transform::types::TransformError> {
                    STATE.with(|state| $crate::guest::transform(state.borrow_mut().as_mut(), batch))
                }
            }

            $crate::guest::sys::export_transformer!(SluiceGuest with_types_in $crate::guest::sys);
        };
    };
}
