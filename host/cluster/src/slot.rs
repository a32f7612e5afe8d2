//! Which slot a pipeline lives in.

use sha2::{Digest as _, Sha256};

/// The slot of pipeline `name` of `tenant` among `slots`: a stable hash, the same on
/// every node and in every version, so a pipeline stays in its slot.
pub fn slot_of(tenant: &str, name: &str, slots: u32) -> u32 {
    let digest = Sha256::new()
        .chain_update(tenant.as_bytes())
        .chain_update([0])
        .chain_update(name.as_bytes())
        .finalize();
    let head = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    head % slots.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipeline_keeps_its_slot_and_pipelines_spread() {
        assert_eq!(slot_of("acme", "deals", 64), slot_of("acme", "deals", 64));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(
            slot_of("ab", "c", 1 << 20),
            slot_of("a", "bc", 1 << 20),
            "names that join alike hash apart"
        );
        let mut used = [0usize; 8];
        for i in 0..800 {
            used[slot_of("tenant", &format!("pipeline-{i}"), 8) as usize] += 1;
        }
        assert!(used.iter().all(|&n| (60..=140).contains(&n)), "{used:?}");
        assert_eq!(slot_of("t", "p", 0), 0);
    }
}
