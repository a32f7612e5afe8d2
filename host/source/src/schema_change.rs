//! Which schema changes a reader can follow, checked wherever the reader is when the
//! table's schema changes: inside one read, between two reads of a following pipeline,
//! and at the start of a read that resumes after earlier rows.

use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};

use delta_kernel::schema::{DataType, SchemaRef, StructType};
use sluice_model::helpers::CHANGE_COLUMNS;

use crate::error::SourceError;

/// What came before a read of the change feed, which a schema change at the read's
/// first version is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preceded {
    /// Nothing: the read is where a pipeline starts (a configured start, or a position
    /// reset by hand), so the schema of its first version is simply the first one.
    Nothing,
    /// Rows of the versions before the read's start, delivered in the schema those
    /// versions had: a change at the start must be one the consumers can follow.
    ByEarlierRows,
}

/// The schema of a run of versions, as the last read found it.
#[derive(Clone, Debug)]
struct KnownSchema {
    versions: RangeInclusive<u64>,
    schema: SchemaRef,
}

/// The schema the feed's reads last met, so a following pipeline checks a new version
/// against the one before without reading the table's log again.
#[derive(Debug, Default)]
pub(crate) struct SchemaMemory {
    known: Mutex<Option<KnownSchema>>,
}

impl SchemaMemory {
    /// Remembers that every version in `versions` has `schema`.
    pub(crate) fn remember(&self, versions: RangeInclusive<u64>, schema: SchemaRef) {
        *self.known.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(KnownSchema { versions, schema });
    }

    /// The schema of `version`, when the last read covered it.
    pub(crate) fn of(&self, version: u64) -> Option<SchemaRef> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known
            .as_ref()
            .filter(|known| known.versions.contains(&version))
            .map(|known| known.schema.clone())
    }
}

/// The table's own columns of a change feed's schema, comparable with a snapshot's.
pub(crate) fn table_columns(changes: &StructType) -> StructType {
    let own = changes
        .fields()
        .filter(|field| !CHANGE_COLUMNS.contains(&field.name().as_str()))
        .cloned();
    // Fields of a valid schema stay valid without some of them.
    StructType::try_new(own).unwrap_or_else(|_| changes.clone())
}

/// Shared by the feed and the reads it starts, which outlive the call that made them.
pub(crate) type SharedSchemaMemory = Arc<SchemaMemory>;

/// Accepts a schema change that only adds nullable columns (nested ones included);
/// anything else (a dropped, renamed or retyped column, or one added as NOT NULL)
/// stops the read at `version` with an error that names the change.
pub(crate) fn check_schema_change(
    table: &str,
    version: u64,
    before: &StructType,
    after: &StructType,
) -> Result<(), SourceError> {
    match breaking_change("", before, after) {
        None => Ok(()),
        Some(detail) => Err(SourceError::SchemaChanged {
            table: table.to_string(),
            version,
            detail,
        }),
    }
}

/// The first change from `before` to `after` a reader cannot follow, in words; `path`
/// is where the structs sit (empty at the top, `a.b.` inside).
fn breaking_change(path: &str, before: &StructType, after: &StructType) -> Option<String> {
    for old in before.fields() {
        let Some(new) = after.field(old.name()) else {
            // Under column mapping a renamed column keeps its id.
            let renamed = old.column_mapping_id().and_then(|id| {
                after
                    .fields()
                    .find(|new| new.column_mapping_id() == Some(id))
            });
            return Some(match renamed {
                Some(new) => format!(
                    "column `{path}{}` was renamed to `{path}{}`",
                    old.name(),
                    new.name()
                ),
                None => format!("column `{path}{}` was dropped or renamed", old.name()),
            });
        };
        match (old.data_type(), new.data_type()) {
            (DataType::Struct(old_struct), DataType::Struct(new_struct)) => {
                let inner = format!("{path}{}.", old.name());
                if let Some(change) = breaking_change(&inner, old_struct, new_struct) {
                    return Some(change);
                }
            }
            (old_type, new_type) if old_type != new_type => {
                return Some(format!(
                    "column `{path}{}` changed type from {old_type} to {new_type}",
                    old.name()
                ));
            }
            _ => {}
        }
    }
    after
        .fields()
        .find(|new| before.field(new.name()).is_none() && !new.is_nullable())
        .map(|new| format!("column `{path}{}` was added as NOT NULL", new.name()))
}

#[cfg(test)]
mod tests {
    use delta_kernel::schema::{MetadataValue, StructField};

    use super::*;

    fn schema(fields: Vec<StructField>) -> StructType {
        StructType::try_new(fields).unwrap()
    }

    fn detail(before: &StructType, after: &StructType) -> Option<String> {
        match check_schema_change("t", 4, before, after) {
            Ok(()) => None,
            Err(SourceError::SchemaChanged {
                version, detail, ..
            }) => {
                assert_eq!(version, 4);
                Some(detail)
            }
            Err(e) => panic!("{e}"),
        }
    }

    fn base() -> Vec<StructField> {
        vec![
            StructField::nullable("id", DataType::LONG),
            StructField::nullable("region", DataType::STRING),
        ]
    }

    #[test]
    fn added_nullable_columns_are_followed() {
        let mut wider = base();
        wider.push(StructField::nullable("tier", DataType::STRING));
        assert_eq!(detail(&schema(base()), &schema(wider)), None);
        assert_eq!(detail(&schema(base()), &schema(base())), None);
    }

    #[test]
    fn dropped_retyped_and_not_null_columns_are_named() {
        let dropped = schema(vec![StructField::nullable("id", DataType::LONG)]);
        assert_eq!(
            detail(&schema(base()), &dropped).unwrap(),
            "column `region` was dropped or renamed"
        );
        let retyped = schema(vec![
            StructField::nullable("id", DataType::STRING),
            StructField::nullable("region", DataType::STRING),
        ]);
        assert_eq!(
            detail(&schema(base()), &retyped).unwrap(),
            "column `id` changed type from long to string"
        );
        let mut required = base();
        required.push(StructField::not_null("tier", DataType::STRING));
        assert_eq!(
            detail(&schema(base()), &schema(required)).unwrap(),
            "column `tier` was added as NOT NULL"
        );
    }

    #[test]
    fn nested_changes_name_their_path() {
        let nested = |fields: Vec<StructField>| {
            schema(vec![StructField::nullable(
                "doc",
                DataType::Struct(Box::new(schema(fields))),
            )])
        };
        let before = nested(base());
        let mut added = base();
        added.push(StructField::nullable("tier", DataType::STRING));
        assert_eq!(detail(&before, &nested(added)), None);
        let dropped = nested(vec![StructField::nullable("id", DataType::LONG)]);
        assert_eq!(
            detail(&before, &dropped).unwrap(),
            "column `doc.region` was dropped or renamed"
        );
    }

    #[test]
    fn a_rename_under_column_mapping_names_both_columns() {
        let with_id = |name: &str, id: i64| {
            StructField::nullable(name, DataType::STRING).with_metadata([(
                "delta.columnMapping.id".to_string(),
                MetadataValue::Number(id),
            )])
        };
        let before = schema(vec![with_id("region", 2)]);
        let after = schema(vec![with_id("area", 2)]);
        assert_eq!(
            detail(&before, &after).unwrap(),
            "column `region` was renamed to `area`"
        );
    }

    #[test]
    fn memory_answers_only_for_versions_it_covers() {
        let memory = SchemaMemory::default();
        assert!(memory.of(3).is_none());
        memory.remember(2..=5, Arc::new(schema(base())));
        assert!(memory.of(1).is_none());
        assert!(memory.of(2).is_some() && memory.of(5).is_some());
        assert!(memory.of(6).is_none());
    }
}
