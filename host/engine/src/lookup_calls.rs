//! The host side of the contract's `lookup` interface (1.3): keys in the module's
//! scalars or the batch's own columns, rows out in the batch's typed shape. Each call
//! checks the batch deadline, and results are bounded by the module's memory cap like
//! any host call's.

use std::sync::Arc;

use delta_kernel::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, make_array,
};
use delta_kernel::arrow::buffer::NullBuffer;
use delta_kernel::arrow::compute::{CastOptions, cast_with_options};
use delta_kernel::arrow::datatypes::{DataType, Field, Schema};
use sluice_model::helpers::CHANGE_COLUMNS;
use wasmtime::component::Resource;

use crate::budget::{check_count, check_result};
use crate::contract::v1::sluice::transform::lookup as wit;
use crate::contract::v1::sluice::transform::types::Scalar;
use crate::convert;
use crate::lookups::{KeyKind, LookupShape, LookupView, key_kind};
use crate::sizes::slice_bytes;
use crate::state::{BatchState, HostState};

const GET: &str = "lookup.get";
const JOIN: &str = "lookup.join";

/// Most keys one `get` may ask for: a batch's worth of rows many times over.
const MAX_KEYS_PER_CALL: usize = 1 << 20;

impl HostState {
    /// The batch's lookup tables, or why the module may not use them now.
    fn lookup_view(
        &self,
        call: &'static str,
    ) -> wasmtime::Result<Result<Arc<dyn LookupView>, String>> {
        self.deadline.check(call)?;
        if !self.in_batch {
            return Ok(Err(
                "lookups can be used only while a batch is transformed, not during init"
                    .to_string(),
            ));
        }
        Ok(self.lookups.clone().ok_or_else(|| {
            "the module looks up rows, but its pipeline names no lookup tables; add a [[lookup]] section".to_string()
        }))
    }
}

/// The shape of `table`, or a message naming the lookups there are.
fn shape_of(view: &dyn LookupView, table: &str) -> Result<LookupShape, String> {
    view.shape(table).ok_or_else(|| {
        let names = view.names();
        format!(
            "there is no lookup table named `{table}`; the pipeline's [[lookup]] names are: {}",
            names.join(", ")
        )
    })
}

impl wit::Host for HostState {
    fn get(
        &mut self,
        table: String,
        keys: Vec<Vec<Scalar>>,
    ) -> wasmtime::Result<Result<wit::FoundRows, String>> {
        check_count(GET, "keys", keys.len(), MAX_KEYS_PER_CALL, || {
            "ask in parts".to_string()
        })?;
        let view = match self.lookup_view(GET)? {
            Ok(view) => view,
            Err(message) => return Ok(Err(message)),
        };
        let shape = match shape_of(view.as_ref(), &table) {
            Ok(shape) => shape,
            Err(message) => return Ok(Err(message)),
        };
        let arrays = match key_arrays(&shape, keys) {
            Ok(arrays) => arrays,
            Err(message) => return Ok(Err(format!("lookup table `{table}`: {message}"))),
        };
        let found = view.get(&table, &arrays)?;
        let bytes = found.rows.columns().iter().map(|c| slice_bytes(c)).sum();
        check_result(GET, bytes, self.limiter.memory_limit())?;
        self.lookup_access.add(&found.found);
        let columns = convert::columns(&sluice_model::leaf_columns(&found.rows, &[]), &[])
            .map_err(wasmtime::Error::msg)?;
        Ok(Ok(wit::FoundRows {
            found: found.found,
            columns,
        }))
    }

    fn join(
        &mut self,
        handle: Resource<BatchState>,
        spec: wit::JoinSpec,
    ) -> wasmtime::Result<Result<u32, String>> {
        let view = match self.lookup_view(JOIN)? {
            Ok(view) => view,
            Err(message) => return Ok(Err(message)),
        };
        let shape = match shape_of(view.as_ref(), &spec.table) {
            Ok(shape) => shape,
            Err(message) => return Ok(Err(message)),
        };
        let cap = self.limiter.memory_limit();
        let state = self.table.get_mut(&handle)?;
        let planned = match plan_join(&state.batch, &shape, &spec) {
            Ok(planned) => planned,
            Err(message) => {
                return Ok(Err(format!(
                    "joining lookup table `{}`: {message}",
                    spec.table
                )));
            }
        };
        let found = view.get(&spec.table, &planned.keys)?;
        let added: Vec<ArrayRef> = planned
            .columns
            .iter()
            .map(|&index| found.rows.column(index).clone())
            .collect();
        check_result(JOIN, added.iter().map(|c| slice_bytes(c)).sum(), cap)?;
        let rows_found = found.found.iter().filter(|&&f| f).count() as u32;
        let widened =
            widened(&state.batch, &planned.fields, added).map_err(wasmtime::Error::msg)?;
        state.batch = widened;
        self.lookup_access.add(&found.found);
        Ok(Ok(rows_found))
    }
}

/// A join worked out against the batch: the key arrays and the columns to add.
struct PlannedJoin {
    keys: Vec<ArrayRef>,
    /// Indexes of the added columns among the lookup's kept columns.
    columns: Vec<usize>,
    /// The added columns' fields, under their names in the batch.
    fields: Vec<Field>,
}

fn plan_join(
    batch: &RecordBatch,
    shape: &LookupShape,
    spec: &wit::JoinSpec,
) -> Result<PlannedJoin, String> {
    if spec.key.len() != shape.key.fields().len() {
        return Err(format!(
            "the key names {} batch columns, but the lookup's key has {} ({})",
            spec.key.len(),
            shape.key.fields().len(),
            field_names(&shape.key)
        ));
    }
    let leaves = convert::data_columns(batch);
    let mut keys = Vec::with_capacity(spec.key.len());
    for (name, field) in spec.key.iter().zip(shape.key.fields()) {
        let leaf = leaves
            .iter()
            .find(|leaf| &leaf.name == name)
            .ok_or_else(|| format!("the batch has no column named `{name}`"))?;
        let array = with_nulls(&leaf.array, leaf.nulls.as_ref());
        keys.push(cast_key(&array, field).map_err(|e| {
            format!(
                "batch column `{name}` cannot be the key column `{}`: {e}",
                field.name()
            )
        })?);
    }
    let columns: Vec<usize> = if spec.columns.is_empty() {
        (0..shape.columns.fields().len()).collect()
    } else {
        spec.columns
            .iter()
            .map(|name| {
                shape.columns.index_of(name).map_err(|_| {
                    format!(
                        "the lookup keeps no column named `{name}`; it keeps {}",
                        field_names(&shape.columns)
                    )
                })
            })
            .collect::<Result<_, _>>()?
    };
    let prefix = spec.prefix.as_deref().unwrap_or_default();
    let mut fields = Vec::with_capacity(columns.len());
    for &index in &columns {
        let field = shape.columns.field(index);
        let name = format!("{prefix}{}", field.name());
        if batch.schema().field_with_name(&name).is_ok()
            || leaves.iter().any(|leaf| leaf.name == name)
            || fields.iter().any(|f: &Field| f.name() == &name)
        {
            return Err(format!(
                "the batch already has a column named `{name}`; give the join a prefix"
            ));
        }
        fields.push(Field::new(name, field.data_type().clone(), true));
    }
    Ok(PlannedJoin {
        keys,
        columns,
        fields,
    })
}

/// The batch with `added` columns after its data columns, before the change columns.
fn widened(
    batch: &RecordBatch,
    added_fields: &[Field],
    added: Vec<ArrayRef>,
) -> Result<RecordBatch, String> {
    let schema = batch.schema();
    let split = schema
        .fields()
        .iter()
        .position(|f| CHANGE_COLUMNS.contains(&f.name().as_str()))
        .unwrap_or(schema.fields().len());
    let mut fields: Vec<Arc<Field>> = schema.fields()[..split].to_vec();
    fields.extend(added_fields.iter().cloned().map(Arc::new));
    fields.extend(schema.fields()[split..].iter().cloned());
    let mut columns: Vec<ArrayRef> = batch.columns()[..split].to_vec();
    columns.extend(added);
    columns.extend(batch.columns()[split..].iter().cloned());
    let schema = Schema::new(fields).with_metadata(schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns).map_err(|e| e.to_string())
}

/// `array` with the nulls of the structs around it too.
fn with_nulls(array: &ArrayRef, nulls: Option<&NullBuffer>) -> ArrayRef {
    match nulls {
        Some(nulls) if Some(nulls) != array.nulls() => {
            let merged = NullBuffer::union(array.nulls(), Some(nulls));
            let data = array.to_data().into_builder().nulls(merged).build();
            // The null buffer has the array's length, so the data stays valid.
            data.map(make_array).unwrap_or_else(|_| array.clone())
        }
        _ => array.clone(),
    }
}

/// `array` in the key column's type; a value the type cannot hold is an error, not a
/// null that would quietly find nothing.
fn cast_key(array: &ArrayRef, field: &Field) -> Result<ArrayRef, String> {
    if array.data_type() == field.data_type() {
        return Ok(array.clone());
    }
    let kind = key_kind(field.data_type());
    if kind.is_none() || key_kind(array.data_type()) != kind {
        return Err(format!(
            "it is {}, the key column is {}",
            array.data_type(),
            field.data_type()
        ));
    }
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    cast_with_options(array, field.data_type(), &options).map_err(|e| e.to_string())
}

/// The module's keys as one array per key column, in the columns' types.
fn key_arrays(shape: &LookupShape, keys: Vec<Vec<Scalar>>) -> Result<Vec<ArrayRef>, String> {
    let width = shape.key.fields().len();
    if let Some((index, key)) = keys.iter().enumerate().find(|(_, key)| key.len() != width) {
        return Err(format!(
            "key {index} has {} values, but the lookup's key has {width} ({})",
            key.len(),
            field_names(&shape.key)
        ));
    }
    let mut parts: Vec<Vec<Scalar>> = (0..width).map(|_| Vec::with_capacity(keys.len())).collect();
    for key in keys {
        for (part, value) in parts.iter_mut().zip(key) {
            part.push(value);
        }
    }
    parts
        .into_iter()
        .zip(shape.key.fields())
        .map(|(values, field)| {
            let array = scalar_array(field, values)?;
            cast_key(&array, field).map_err(|e| format!("key column `{}`: {e}", field.name()))
        })
        .collect()
}

/// Scalars as the array of the kind the key column takes: integers, text or booleans.
fn scalar_array(field: &Field, values: Vec<Scalar>) -> Result<ArrayRef, String> {
    let wrong = |value: &Scalar| {
        Err(format!(
            "key column `{}` is {} and takes {}, not {value:?}",
            field.name(),
            field.data_type(),
            expected(field.data_type())
        ))
    };
    let ty = field.data_type();
    if ty.is_integer() {
        let mut out = Vec::with_capacity(values.len());
        for value in &values {
            out.push(match value {
                Scalar::Integer(i) => Some(*i),
                Scalar::Null => None,
                other => return wrong(other),
            });
        }
        return Ok(Arc::new(Int64Array::from(out)));
    }
    match ty {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let mut out = Vec::with_capacity(values.len());
            for value in values {
                out.push(match value {
                    Scalar::Text(text) => Some(text),
                    Scalar::Null => None,
                    other => return wrong(&other),
                });
            }
            Ok(Arc::new(StringArray::from(out)))
        }
        DataType::Boolean => {
            let mut out = Vec::with_capacity(values.len());
            for value in &values {
                out.push(match value {
                    Scalar::Boolean(b) => Some(*b),
                    Scalar::Null => None,
                    other => return wrong(other),
                });
            }
            Ok(Arc::new(BooleanArray::from(out)))
        }
        _ => Err(format!(
            "key column `{}` is {ty}, which a module cannot name in a key",
            field.name()
        )),
    }
}

fn expected(ty: &DataType) -> &'static str {
    match key_kind(ty) {
        Some(KeyKind::Integer) => "integers",
        Some(KeyKind::Text) => "text",
        Some(KeyKind::Boolean) => "booleans",
        None => "nothing a module can name",
    }
}

fn field_names(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("`{}`", f.name()))
        .collect::<Vec<_>>()
        .join(", ")
}
