//! Debug information, in sections of their own that `strip_debug` leaves out.
//!
//! ```text
//! param_names ::= count:varint (func:varint n:varint name:varint[n])[count]
//!                 func indices strictly increasing; names are string indices
//!
//! locations   ::= count:varint loc[count] ninstrs:varint ref:varint[ninstrs]
//! loc         ::= 0x00 file:varint line:varint col:varint
//!               | 0x01 name:varint
//!               | 0x02 callee:varint caller:varint          (indices of earlier locs)
//!               | 0x03 n:varint child:varint[n]             (indices of earlier locs)
//! ref         ::= 0 (no location) | 1 + index of a loc
//! ```
//!
//! Locations are stored once each and shared by reference; nested locations refer only to
//! earlier entries, so decoding needs no recursion and cannot meet a cycle.

use super::cursor::Cursor;
use super::strings::{Budget, StringTable, Strings};
use super::varint;
use crate::error::{Error, Result};
use crate::executable::FuncInfo;
use crate::location::Location;
use indexmap::IndexSet;

/// How deeply locations may nest (dropping and printing them recurse).
pub const MAX_LOCATION_DEPTH: usize = 128;

const FILE: u8 = 0;
const NAME: u8 = 1;
const CALLSITE: u8 = 2;
const FUSED: u8 = 3;

/// Encodes the parameter names of every function that has them (but, with `skip_signed`, of
/// those with a signature, whose names the signature gives), or `None` if none has.
pub fn encode_param_names<'a>(
    funcs: &'a [FuncInfo],
    skip_signed: bool,
    strings: &mut StringTable<'a>,
) -> Option<Vec<u8>> {
    let named: Vec<(usize, &FuncInfo)> = funcs
        .iter()
        .enumerate()
        .filter(|(_, f)| !(f.param_names.is_empty() || skip_signed && f.signature.is_some()))
        .collect();
    if named.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    varint::put(&mut out, named.len() as u64);
    for (i, f) in named {
        varint::put(&mut out, i as u64);
        varint::put(&mut out, f.param_names.len() as u64);
        for p in &f.param_names {
            varint::put(&mut out, strings.intern(p));
        }
    }
    Some(out)
}

/// Decodes parameter names into `funcs`.
pub fn decode_param_names(
    mut c: Cursor<'_>,
    funcs: &mut [FuncInfo],
    strings: &Strings<'_>,
    budget: &mut Budget,
) -> Result<()> {
    let n = c.count("function entry", 2)?;
    let mut next = 0;
    for _ in 0..n {
        let i = c.increasing_function_index(&mut next, funcs.len())?;
        let k = c.count("parameter name", 1)?;
        let mut names = Vec::with_capacity(k);
        for _ in 0..k {
            names.push(strings.read_owned(&mut c, budget)?);
        }
        funcs[i].param_names = names;
    }
    c.finish()
}

/// Interns locations (children first) for writing, with the height of each.
#[derive(Default)]
struct LocTable<'a> {
    set: IndexSet<&'a Location>,
    heights: Vec<usize>,
}

impl<'a> LocTable<'a> {
    /// The index of `loc` in the table, adding it (and its children) if new.
    fn intern(&mut self, loc: &'a Location, out: &mut Vec<u8>, strings: &mut StringTable<'a>) -> Result<u64> {
        if let Some(i) = self.set.get_index_of(loc) {
            return Ok(i as u64);
        }
        let mut entry = Vec::new();
        let mut height = 1;
        match loc {
            Location::File { file, line, col } => {
                entry.push(FILE);
                varint::put(&mut entry, strings.intern(file));
                varint::put(&mut entry, (*line).into());
                varint::put(&mut entry, (*col).into());
            }
            Location::Name(n) => {
                entry.push(NAME);
                varint::put(&mut entry, strings.intern(n));
            }
            Location::CallSite { callee, caller } => {
                let a = self.intern(callee, out, strings)?;
                let b = self.intern(caller, out, strings)?;
                height += self.heights[a as usize].max(self.heights[b as usize]);
                entry.push(CALLSITE);
                varint::put(&mut entry, a);
                varint::put(&mut entry, b);
            }
            Location::Fused(locs) => {
                let mut idx = Vec::with_capacity(locs.len());
                for l in locs {
                    let i = self.intern(l, out, strings)?;
                    height = height.max(1 + self.heights[i as usize]);
                    idx.push(i);
                }
                entry.push(FUSED);
                varint::put(&mut entry, idx.len() as u64);
                for i in idx {
                    varint::put(&mut entry, i);
                }
            }
        }
        if height > MAX_LOCATION_DEPTH {
            return Err(Error::format(format!("a location nests deeper than {MAX_LOCATION_DEPTH} levels")));
        }
        out.extend_from_slice(&entry);
        self.heights.push(height);
        Ok(self.set.insert_full(loc).0 as u64)
    }
}

/// Encodes one optional location per instruction.
pub fn encode_locations<'a>(
    locs: impl ExactSizeIterator<Item = Option<&'a Location>>,
    strings: &mut StringTable<'a>,
) -> Result<Vec<u8>> {
    let mut table = LocTable::default();
    let mut entries = Vec::new();
    let mut refs = Vec::new();
    varint::put(&mut refs, locs.len() as u64);
    for loc in locs {
        let r = match loc {
            Some(l) => table.intern(l, &mut entries, strings)? + 1,
            None => 0,
        };
        varint::put(&mut refs, r);
    }
    let mut out = Vec::with_capacity(entries.len() + refs.len() + 9);
    varint::put(&mut out, table.set.len() as u64);
    out.extend_from_slice(&entries);
    out.extend_from_slice(&refs);
    Ok(out)
}

/// A decoded location with what it costs to copy and how deep it nests.
struct Entry {
    loc: Location,
    cost: u64,
    depth: usize,
}

/// Decodes the locations of `n_instrs` instructions.
pub fn decode_locations(
    mut c: Cursor<'_>,
    n_instrs: usize,
    strings: &Strings<'_>,
    budget: &mut Budget,
) -> Result<Vec<Option<Location>>> {
    let node = std::mem::size_of::<Location>() as u64;
    let n = c.count("location", 2)?;
    let mut entries: Vec<Entry> = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.pos();
        let child = |c: &mut Cursor<'_>, entries: &[Entry]| -> Result<usize> {
            c.index("location index (must refer to an earlier location)", entries.len())
        };
        let entry = match c.byte()? {
            FILE => {
                let file = strings.read(&mut c)?;
                let line = c.u32("line")?;
                let col = c.u32("column")?;
                let cost = node + file.len() as u64;
                Entry { loc: Location::File { file: file.to_string(), line, col }, cost, depth: 1 }
            }
            NAME => {
                let name = strings.read(&mut c)?;
                Entry { loc: Location::Name(name.to_string()), cost: node + name.len() as u64, depth: 1 }
            }
            CALLSITE => {
                let (a, b) = (child(&mut c, &entries)?, child(&mut c, &entries)?);
                let (a, b) = (&entries[a], &entries[b]);
                let cost = (2 * node).saturating_add(a.cost).saturating_add(b.cost);
                let depth = 1 + a.depth.max(b.depth);
                // Charge before cloning: the children may be large.
                budget.charge(cost, &c, at)?;
                check_depth(&c, at, depth)?;
                let loc = Location::CallSite { callee: Box::new(a.loc.clone()), caller: Box::new(b.loc.clone()) };
                entries.push(Entry { loc, cost, depth });
                continue;
            }
            FUSED => {
                let k = c.count("fused location", 1)?;
                let mut idx = Vec::with_capacity(k);
                let (mut cost, mut depth) = (node, 0);
                for _ in 0..k {
                    let i = child(&mut c, &entries)?;
                    cost = cost.saturating_add(entries[i].cost);
                    depth = depth.max(entries[i].depth);
                    idx.push(i);
                }
                budget.charge(cost, &c, at)?;
                check_depth(&c, at, depth + 1)?;
                let loc = Location::Fused(idx.into_iter().map(|i| entries[i].loc.clone()).collect());
                entries.push(Entry { loc, cost, depth: depth + 1 });
                continue;
            }
            tag => return Err(c.err_at(at, format!("unknown location tag {tag:#04x}"))),
        };
        budget.charge(entry.cost, &c, at)?;
        entries.push(entry);
    }
    let at = c.pos();
    let count = c.varint()?;
    if count != n_instrs as u64 {
        return Err(c.err_at(at, format!("locations for {count} instructions, the file has {n_instrs}")));
    }
    let mut out = Vec::with_capacity(n_instrs.min(c.remaining()));
    for _ in 0..n_instrs {
        let at = c.pos();
        let r = c.index("location reference", entries.len() + 1)?;
        out.push(match r {
            0 => None,
            r => {
                let e = &entries[r - 1];
                budget.charge(e.cost, &c, at)?;
                Some(e.loc.clone())
            }
        });
    }
    c.finish()?;
    Ok(out)
}

fn check_depth(c: &Cursor<'_>, at: usize, depth: usize) -> Result<()> {
    if depth > MAX_LOCATION_DEPTH {
        return Err(c.err_at(at, format!("location nests deeper than {MAX_LOCATION_DEPTH} levels")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(line: u32) -> Location {
        Location::File { file: "m.py".into(), line, col: 1 }
    }

    #[test]
    fn locations_round_trip_and_share() {
        let cs = Location::CallSite { callee: Box::new(Location::Name("add".into())), caller: Box::new(file(3)) };
        let fused = Location::Fused(vec![file(1), cs.clone(), Location::Fused(vec![])]);
        let locs = [Some(&fused), None, Some(&cs), Some(&fused)];
        let mut strings = StringTable::default();
        let bytes = encode_locations(locs.iter().copied(), &mut strings).unwrap();
        let table = strings.encode();
        let strings = Strings::decode(Cursor::new(&table, 0, "strings")).unwrap();
        let mut budget = Budget::for_metadata(0);
        let back = decode_locations(Cursor::new(&bytes, 0, "locations"), 4, &strings, &mut budget).unwrap();
        assert_eq!(back, vec![Some(fused.clone()), None, Some(cs), Some(fused)]);
    }

    #[test]
    fn doubling_chains_hit_the_budget() {
        // loc 0 = name "x"; loc k = callsite(k-1, k-1): 2^k nodes from 3 bytes each.
        let mut table = StringTable::default();
        table.intern("x");
        let table = table.encode();
        let strings = Strings::decode(Cursor::new(&table, 0, "strings")).unwrap();
        let mut bytes = Vec::new();
        varint::put(&mut bytes, 60);
        bytes.extend_from_slice(&[NAME, 0x01]);
        for k in 0..59u64 {
            bytes.push(CALLSITE);
            varint::put(&mut bytes, k);
            varint::put(&mut bytes, k);
        }
        varint::put(&mut bytes, 0);
        let mut budget = Budget::for_metadata(bytes.len());
        let e = decode_locations(Cursor::new(&bytes, 0, "locations"), 0, &strings, &mut budget).unwrap_err();
        assert!(e.to_string().contains("too much memory"), "{e}");
    }

    #[test]
    fn forward_references_are_rejected() {
        let table = StringTable::default().encode();
        let strings = Strings::decode(Cursor::new(&table, 0, "strings")).unwrap();
        let bytes = [0x03, CALLSITE, 0x01, 0x01, 0x01];
        let mut budget = Budget::for_metadata(0);
        let e = decode_locations(Cursor::new(&bytes, 0, "locations"), 0, &strings, &mut budget).unwrap_err();
        assert!(e.to_string().contains("earlier location"), "{e}");
    }
}
