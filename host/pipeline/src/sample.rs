//! A module tried on a sample of its pipeline's table before a deploy switches to it.

use std::sync::Arc;

use sluice_engine::{TransformError, TransformModule};
use sluice_source::{ChangeFeed, Position, Preceded, SourceOptions};

use crate::config::PipelineConfig;
use crate::keyed::ScratchState;

/// Why a module was refused on a sample of the table.
#[derive(Debug, thiserror::Error)]
#[error("on a sample of the table: {0}")]
pub struct SampleRefusal(String);

/// Runs a module on up to `rows` change rows: the next ones from the pipeline's
/// position, or the table's most recent ones when it has caught up. A batch error or a
/// trap refuses the module (rejected rows do not).
pub fn try_on_sample(
    config: &PipelineConfig,
    module: &TransformModule,
    at: Position,
    rows: usize,
) -> Result<(), SampleRefusal> {
    let options = SourceOptions {
        batch_rows: rows.max(1),
        ..config.source_options()
    };
    let refuse = SampleRefusal;
    let feed =
        ChangeFeed::open(&config.source.table, options).map_err(|e| refuse(e.to_string()))?;
    let latest = feed.latest_version().map_err(|e| refuse(e.to_string()))?;
    let rows_from = |from: u64| -> Result<usize, SampleRefusal> {
        let mut seen = 0;
        for batch in feed
            .read(Position::at_version(from), latest, Preceded::Nothing)
            .map_err(|e| refuse(e.to_string()))?
        {
            seen += batch.map_err(|e| refuse(e.to_string()))?.batch.num_rows();
            if seen >= rows {
                break;
            }
        }
        Ok(seen)
    };
    // Inside a snapshot the next rows are the snapshot's, not the version's changes.
    let from = if at.version <= latest {
        at
    } else {
        let mut version = latest;
        while version > 0 && rows_from(version)? < rows {
            version -= 1;
        }
        Position::at_version(version)
    };
    let mut instance = module
        .instantiate(&config.transform_params(), Arc::new(config.format()))
        .map_err(|e| refuse(e.to_string()))?;
    let mut left = rows;
    let batches: Box<dyn Iterator<Item = _>> = if from.snapshot {
        Box::new(
            feed.read_snapshot(from)
                .map_err(|e| refuse(e.to_string()))?,
        )
    } else {
        Box::new(
            feed.read(from, latest, Preceded::Nothing)
                .map_err(|e| refuse(e.to_string()))?,
        )
    };
    let state = ScratchState::new();
    for batch in batches {
        let batch = batch.map_err(|e| refuse(e.to_string()))?.batch;
        let batch = batch.slice(0, batch.num_rows().min(left));
        match state.transform(&mut instance, &batch) {
            Ok(_) | Err(TransformError::Row { .. }) => {}
            Err(e) => return Err(refuse(e.to_string())),
        }
        left -= batch.num_rows();
        if left == 0 {
            break;
        }
    }
    Ok(())
}
