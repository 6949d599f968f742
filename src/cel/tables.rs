//! The module's generated tables: Kubernetes' apply schema
//! (`apply_schema.bin`, `tools/apply-schema.py`) and the IANA time zones
//! (`libraries/time_zones.bin`, `tools/time-zones.py`), in one region of
//! writable data.
//!
//! Where the tables lie matters: policy-server starts every evaluation in a
//! fresh instance, and each page of the module's data an evaluation first
//! touches costs a page fault (docs/performance.md, "Layout" and "A time zone
//! table beside the schema"). Three rules, each measured:
//! - The tables are atomics, so writable data, after all read-only data:
//!   among the read-only data a table moved hot constants onto other pages.
//! - The region is 26 pages, 16 (one 64 KiB wasm page) more than the schema
//!   alone took, so the data after it, and the heap, keep their place within
//!   the wasm page, and the heap its room before the memory's first growth.
//!   The zeros cost the module nothing: wasm-opt drops them.
//! - The schema, which every CEL mutation reads, ends the region, in the same
//!   64 KiB window as the data that follows it: the kernel maps a read
//!   fault's neighbours in that window, so the first read of that data maps
//!   the schema's first pages too. The zones, read only by a getter that
//!   names one, start it.

use std::sync::atomic::{AtomicU8, Ordering};

const SCHEMA: &[u8] = include_bytes!("patch/apply_schema.bin");
const ZONES: &[u8] = include_bytes!("libraries/time_zones.bin");
const PAGE: usize = 4096;
const LENGTH: usize = 26 * PAGE;
const ZONES_AT: usize = 0;
const SCHEMA_AT: usize = LENGTH - SCHEMA.len();
const _: () = assert!(
    ZONES_AT + ZONES.len() <= SCHEMA_AT,
    "the tables outgrew their region"
);

static REGION: [AtomicU8; LENGTH] = writable();

// Evaluated at compile time: an index out of bounds would not compile.
#[allow(clippy::indexing_slicing)]
const fn writable() -> [AtomicU8; LENGTH] {
    let mut out = [const { AtomicU8::new(0) }; LENGTH];
    let mut i = 0;
    while i < ZONES.len() {
        out[ZONES_AT + i] = AtomicU8::new(ZONES[i]);
        i += 1;
    }
    let mut j = 0;
    while j < SCHEMA.len() {
        out[SCHEMA_AT + j] = AtomicU8::new(SCHEMA[j]);
        j += 1;
    }
    out
}

/// One table's bytes within the region.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    start: usize,
    length: usize,
}

pub const APPLY_SCHEMA: Table = Table {
    start: SCHEMA_AT,
    length: SCHEMA.len(),
};

pub const TIME_ZONES: Table = Table {
    start: ZONES_AT,
    length: ZONES.len(),
};

impl Table {
    /// The byte at `at`, if the table has one there.
    pub fn byte(self, at: usize) -> Option<u8> {
        if at >= self.length {
            return None;
        }
        REGION
            .get(self.start + at)
            .map(|b| b.load(Ordering::Relaxed))
    }

    /// The whole table, copied.
    pub fn to_vec(self) -> Vec<u8> {
        REGION
            .get(self.start..self.start + self.length)
            .unwrap_or_default()
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_holds_both_tables() {
        assert_eq!(APPLY_SCHEMA.to_vec(), SCHEMA);
        assert_eq!(TIME_ZONES.to_vec(), ZONES);
        assert_eq!(TIME_ZONES.byte(ZONES.len()), None);
    }
}
