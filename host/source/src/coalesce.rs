//! Joins the kernel's small batches (often a thousand rows) into batches of up to
//! `batch_rows`, so the transform is called with as many rows as allowed.

use delta_kernel::arrow::compute::concat_batches;

use crate::batch::ChangeBatch;
use crate::error::SourceError;

/// Batches of `inner` joined while they belong to one version (and one snapshot or
/// change phase), share a schema and fit in `batch_rows` rows. An error ends the
/// stream after the rows read before it.
pub(crate) fn coalesce(
    inner: impl Iterator<Item = Result<ChangeBatch, SourceError>>,
    batch_rows: usize,
) -> impl Iterator<Item = Result<ChangeBatch, SourceError>> {
    let mut inner = inner.fuse();
    let mut held: Vec<ChangeBatch> = Vec::new();
    let mut failure: Option<SourceError> = None;
    std::iter::from_fn(move || {
        loop {
            if let Some(error) = failure.take() {
                return Some(Err(error));
            }
            let next = match inner.next() {
                Some(Ok(next)) => next,
                Some(Err(error)) if held.is_empty() => return Some(Err(error)),
                Some(Err(error)) => {
                    failure = Some(error);
                    return Some(Ok(join(std::mem::take(&mut held))));
                }
                None if held.is_empty() => return None,
                None => return Some(Ok(join(std::mem::take(&mut held)))),
            };
            let rows: usize = held.iter().map(|h| h.batch.num_rows()).sum();
            let joins = held.last().is_none_or(|last| {
                last.end.version == next.end.version
                    && last.end.snapshot == next.end.snapshot
                    && last.batch.schema() == next.batch.schema()
                    && rows + next.batch.num_rows() <= batch_rows
            });
            if joins {
                held.push(next);
                if rows + held.last().map_or(0, |h| h.batch.num_rows()) >= batch_rows {
                    return Some(Ok(join(std::mem::take(&mut held))));
                }
                continue;
            }
            let out = join(std::mem::replace(&mut held, vec![next]));
            return Some(Ok(out));
        }
    })
}

fn join(mut held: Vec<ChangeBatch>) -> ChangeBatch {
    if held.len() == 1 {
        return held.remove(0);
    }
    let end = held.last().expect("join is called with batches").end;
    let schema = held[0].batch.schema();
    let batch = concat_batches(&schema, held.iter().map(|h| &h.batch))
        .expect("joined batches share their schema");
    ChangeBatch { batch, end }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use delta_kernel::arrow::array::{Int64Array, RecordBatch};
    use delta_kernel::arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use sluice_position::Position;

    fn piece(version: u64, rows: i64, end_offset: u64) -> Result<ChangeBatch, SourceError> {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from_iter_values(0..rows))],
        )
        .unwrap();
        Ok(ChangeBatch {
            batch,
            end: Position {
                row_offset: end_offset,
                ..Position::at_version(version)
            },
        })
    }

    #[test]
    fn small_batches_join_up_to_the_cap_within_a_version() {
        let pieces = vec![
            piece(1, 3, 3),
            piece(1, 3, 6),
            piece(1, 3, 9),
            piece(2, 2, 2),
            piece(2, 1, 3),
        ];
        let out: Vec<(usize, u64, u64)> = coalesce(pieces.into_iter(), 7)
            .map(|b| b.unwrap())
            .map(|b| (b.batch.num_rows(), b.end.version, b.end.row_offset))
            .collect();
        assert_eq!(out, [(6, 1, 6), (3, 1, 9), (3, 2, 3)]);
    }

    #[test]
    fn rows_before_an_error_come_out_first() {
        let failing = Err(SourceError::TableNotFound { table: "t".into() });
        let out: Vec<_> = coalesce(vec![piece(1, 2, 2), failing].into_iter(), 10).collect();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].as_ref().unwrap().end.row_offset, 2);
        assert!(out[1].is_err());
    }
}
