//! Where a shard's records lie: each record's dtype, shape and byte range checked against the
//! shard's size, and the ranges checked not to share a byte, all before the shard is read.
//!
//! TVM's writer (`tvm.contrib.tvmjs.dump_tensor_cache`) lays a shard's records end to end, and
//! TVM's loader copies each record out on its own; metadata whose records overlap would make
//! each of them a full copy of the same bytes (a hundred records covering one 64 MiB shard:
//! 6.4 GiB from an 11 KB file). Refusing overlaps keeps what a shard decodes to within twice
//! its size (the `f32-to-bf16` widening).

use super::record::ParamRecord;
use relaxvm::{DataType, Error, Result, Shape};
use std::ops::Range;

/// A record checked to fit its shard: what to decode, and from which bytes.
pub(crate) struct Plan<'a> {
    /// The record.
    pub(crate) rec: &'a ParamRecord,
    /// Its dtype.
    pub(crate) dtype: DataType,
    /// Its shape.
    pub(crate) shape: Shape,
    /// Whether it is float32 stored as bfloat16 bits (two bytes an element).
    pub(crate) bf16: bool,
    /// Its bytes in the shard.
    pub(crate) range: Range<usize>,
}

/// Checks every record of a shard of `shard_len` bytes, in order, and that no two share a byte.
pub(crate) fn plan(records: &[ParamRecord], shard_len: u64) -> Result<Vec<Plan<'_>>> {
    let plans = records.iter().map(|r| plan_one(r, shard_len)).collect::<Result<Vec<_>>>()?;
    check_disjoint(&plans)?;
    Ok(plans)
}

/// One record's dtype, shape and range, checked.
fn plan_one(rec: &ParamRecord, shard_len: u64) -> Result<Plan<'_>> {
    let bad = |m: String| Error::value(format!("parameter {:?}: {m}", rec.name));
    let dtype: DataType = rec.dtype.parse().map_err(|e: Error| bad(e.to_string()))?;
    let shape = Shape::from(rec.shape.clone());
    let numel = shape.numel().ok_or_else(|| bad(format!("invalid shape {shape}")))?;
    let bf16 = dtype == DataType::F32 && rec.format == "f32-to-bf16";
    let stored_size = if bf16 { 2 } else { dtype.itemsize() };
    let expected = numel.checked_mul(stored_size).ok_or_else(|| bad(format!("shape {shape} is too large")))?;
    if usize::try_from(rec.nbytes).ok() != Some(expected) {
        return Err(bad(format!(
            "nbytes is {} but shape {shape} of {} in format {:?} needs {expected}",
            rec.nbytes, rec.dtype, rec.format
        )));
    }
    let start =
        usize::try_from(rec.byte_offset).map_err(|_| bad(format!("negative byteOffset {}", rec.byte_offset)))?;
    let range =
        start.checked_add(expected).filter(|&end| end as u64 <= shard_len).map(|end| start..end).ok_or_else(|| {
            bad(format!("bytes {start}..{start}+{expected} lie outside the shard of {shard_len} bytes"))
        })?;
    Ok(Plan { rec, dtype, shape, bf16, range })
}

/// Refuses two records sharing a byte, naming both (empty records share nothing).
fn check_disjoint(plans: &[Plan<'_>]) -> Result<()> {
    let mut order: Vec<&Plan<'_>> = plans.iter().filter(|p| !p.range.is_empty()).collect();
    order.sort_by_key(|p| (p.range.start, p.range.end));
    // Sorted by start, a record overlaps an earlier one exactly when it starts before the
    // furthest end so far; that record is the one to name.
    let mut furthest: Option<&Plan<'_>> = None;
    for p in order {
        if let Some(f) = furthest {
            if p.range.start < f.range.end {
                return Err(Error::value(format!(
                    "parameter {:?} (bytes {}..{}) overlaps parameter {:?} (bytes {}..{}): the records of a \
                     shard must not share bytes",
                    p.rec.name, p.range.start, p.range.end, f.rec.name, f.range.start, f.range.end
                )));
            }
        }
        if furthest.is_none_or(|f| p.range.end > f.range.end) {
            furthest = Some(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, offset: i64, nbytes: i64) -> ParamRecord {
        ParamRecord {
            name: name.into(),
            shape: vec![nbytes],
            dtype: "uint8".into(),
            format: "raw".into(),
            nbytes,
            byte_offset: offset,
        }
    }

    fn err(records: &[ParamRecord], len: u64) -> String {
        plan(records, len).err().expect("refused").to_string()
    }

    #[test]
    fn records_end_to_end_and_empty_ones_are_fine() {
        let recs = [rec("a", 0, 4), rec("b", 4, 4), rec("e", 2, 0), rec("c", 8, 2)];
        let plans = plan(&recs, 10).unwrap();
        let ranges: Vec<_> = plans.iter().map(|p| p.range.clone()).collect();
        assert_eq!(ranges, [0..4, 4..8, 2..2, 8..10]);
    }

    #[test]
    fn overlapping_and_duplicate_ranges_are_refused_naming_both() {
        let e = err(&[rec("p0", 0, 8), rec("p1", 0, 8)], 8);
        assert!(e.contains("\"p1\" (bytes 0..8) overlaps parameter \"p0\" (bytes 0..8)"), "{e}");
        let e = err(&[rec("a", 4, 4), rec("b", 0, 5)], 8);
        assert!(e.contains("\"a\" (bytes 4..8) overlaps parameter \"b\" (bytes 0..5)"), "{e}");
        // A record inside a long earlier one, after a short one that ends first.
        let e = err(&[rec("long", 0, 10), rec("short", 1, 1), rec("late", 5, 1)], 10);
        assert!(e.contains("overlaps parameter \"long\""), "{e}");
    }

    #[test]
    fn a_record_outside_the_shard_is_refused_before_overlaps() {
        let e = err(&[rec("a", 0, 8), rec("b", 6, 4)], 8);
        assert!(e.contains("parameter \"b\": bytes 6..6+4 lie outside the shard of 8 bytes"), "{e}");
        let e = err(&[rec("n", -1, 1)], 8);
        assert!(e.contains("negative byteOffset -1"), "{e}");
    }
}
