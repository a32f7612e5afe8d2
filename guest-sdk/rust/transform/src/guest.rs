//! Glue between the generated bindings and the SDK: what `export!` expands to calls
//! these. Not part of the public API.

pub use sluice_transform_sys as sys;

use crate::abi::{Handle, Input};
use crate::batch::Batch;
use crate::error::Error;
use crate::output::Output;
use crate::{Params, Transform};
use sys::sluice::transform::host;
use sys::sluice::transform::types as wit;

/// The reserved parameter that picks how batches are read.
pub const INPUT_PARAM: &str = "sluice.input";

/// A module's transform and how it reads its batches, kept between calls.
pub struct Instance<T> {
    transform: T,
    input: Input,
}

/// Builds the transform from the host's parameters, less the reserved one that picks
/// the input path.
pub fn init<T: Transform>(params: Vec<(String, String)>) -> Result<Instance<T>, String> {
    let mut input = Input::Arrow;
    let mut rest = Vec::with_capacity(params.len());
    for (name, value) in params {
        if name != INPUT_PARAM {
            rest.push((name, value));
            continue;
        }
        input = match value.as_str() {
            "arrow" => Input::Arrow,
            "typed" => Input::Typed,
            other => {
                return Err(format!(
                    "Parameter {INPUT_PARAM} is `{other}`; use `arrow` (the default) or `typed`."
                ));
            }
        };
    }
    Ok(Instance {
        transform: T::init(&Params::from_pairs(rest))?,
        input,
    })
}

/// Runs one batch through the transform and hands its output to the host.
pub fn transform<T: Transform>(
    state: Option<&mut Instance<T>>,
    batch: &host::Batch,
) -> Result<(), wit::TransformError> {
    let Some(Instance { transform, input }) = state else {
        return Err(wit::TransformError::Batch(
            "The host called transform before init.".to_string(),
        ));
    };
    // SAFETY: the handle lives in `batch`, dropped before this call returns.
    let batch = Batch::from_guest(unsafe { Handle::borrow(batch, *input) });
    let mut out = Output::for_guest();
    let result = transform.transform(&batch, &mut out);
    let handle = batch.guest().expect("a guest batch has a handle");
    let (runs, rejected) = out.into_parts();
    for (packed, framing) in runs {
        handle.emit_run(packed, framing);
    }
    for (row, message) in &rejected {
        handle.reject(*row, message);
    }
    result.map_err(|e| match e {
        Error::Row { row, message } => wit::TransformError::Row(wit::RowError { row, message }),
        Error::Batch(message) => wit::TransformError::Batch(message),
    })
}
