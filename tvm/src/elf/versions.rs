//! The symbol version tables (DT_VERSYM, DT_VERDEF, DT_VERNEED).
//!
//! glibc walks the definition and requirement lists by their `next` offsets until one is 0 (it
//! does not use the counts), sizes an array by the largest version index it finds, and indexes it
//! with each symbol's DT_VERSYM entry. It asserts that every library a requirement names is
//! loaded (a DT_NEEDED). So each list here must end after exactly its count of entries, all
//! inside the file, every name in the string table, every hash right, and every symbol's version
//! index one the lists define.

use super::{bad, hash::elf_hash, symbols, u16_at, u32_at, Lib};
use object::elf;
use relaxvm::Result;

/// Checks the version tables, if the library has them.
pub fn check(lib: &Lib<'_>) -> Result<()> {
    let mut max_index = 1u16; // 0 local, 1 global
    if let Some(addr) = lib.dynamic.get(elf::DT_VERDEF) {
        let count = lib.dynamic.get(elf::DT_VERDEFNUM).expect("paired (dynamic.rs)");
        max_index = max_index.max(verdef(lib, addr, count)?);
    }
    if let Some(addr) = lib.dynamic.get(elf::DT_VERNEED) {
        let count = lib.dynamic.get(elf::DT_VERNEEDNUM).expect("paired (dynamic.rs)");
        max_index = max_index.max(verneed(lib, addr, count)?);
    }
    if let Some(addr) = lib.dynamic.get(elf::DT_VERSYM) {
        let off = lib.table("DT_VERSYM", addr, 2 * lib.nsyms as u64)?;
        for i in 0..lib.nsyms {
            let v = u16_at(lib.bytes, off + 2 * i) & 0x7fff;
            if v > max_index {
                return Err(bad(format!(
                    "DT_VERSYM: symbol {i} has version index {v}, but the version tables define indices up to {max_index}"
                )));
            }
        }
    } else if max_index > 1 {
        return Err(bad("version definitions or requirements without DT_VERSYM"));
    }
    Ok(())
}

/// The number of entries allowed in a list: no more than the file could hold.
fn count_ok(lib: &Lib<'_>, what: &str, count: u64) -> Result<usize> {
    usize::try_from(count).ok().filter(|c| *c >= 1 && *c <= lib.bytes.len() / 16).ok_or_else(|| {
        bad(format!("{what} count {count}: expected at least 1 and no more entries than the file could hold"))
    })
}

/// Walks `count` entries of `size` bytes linked by the 32-bit `next` offset at `next_at`; calls
/// `f` with each entry's address and file offset.
fn walk(
    lib: &Lib<'_>,
    what: &'static str,
    mut addr: u64,
    count: usize,
    size: u64,
    next_at: usize,
    mut f: impl FnMut(u64, usize) -> Result<()>,
) -> Result<()> {
    for k in 0..count {
        if !addr.is_multiple_of(4) {
            return Err(bad(format!("{what} entry {k} at {addr:#x} is not 4-byte aligned")));
        }
        let off = lib.table(what, addr, size)?;
        f(addr, off)?;
        let next = u32_at(lib.bytes, off + next_at);
        if (next == 0) != (k + 1 == count) {
            return Err(bad(format!(
                "{what} entry {k} of {count} has next offset {next}: the list must end (0) exactly at its last entry"
            )));
        }
        addr = addr.checked_add(next.into()).ok_or_else(|| bad(format!("{what}: next offset overflows")))?;
    }
    Ok(())
}

fn verdef(lib: &Lib<'_>, addr: u64, count: u64) -> Result<u16> {
    let count = count_ok(lib, "DT_VERDEFNUM", count)?;
    let mut max = 0;
    walk(lib, "DT_VERDEF", addr, count, 20, 16, |at, off| {
        let b = lib.bytes;
        let (version, ndx, cnt, hash, aux) =
            (u16_at(b, off), u16_at(b, off + 4), u16_at(b, off + 6), u32_at(b, off + 8), u32_at(b, off + 12));
        if version != 1 || cnt == 0 || ndx & 0x8000 != 0 {
            return Err(bad(format!(
                "DT_VERDEF entry at {at:#x}: version {version}, index {ndx}, {cnt} names: expected version 1, an index below 0x8000, at least one name"
            )));
        }
        max = max.max(ndx);
        let mut first = true;
        walk(lib, "DT_VERDEF names", at + u64::from(aux), usize::from(cnt), 8, 4, |_, aoff| {
            let name = symbols::string(lib, u32_at(lib.bytes, aoff).into(), "DT_VERDEF name")?;
            if std::mem::take(&mut first) && elf_hash(name) != hash {
                return Err(bad(format!(
                    "DT_VERDEF entry at {at:#x}: hash {hash:#x}, but its name {} hashes to {:#x}",
                    String::from_utf8_lossy(name),
                    elf_hash(name)
                )));
            }
            Ok(())
        })
    })?;
    Ok(max)
}

fn verneed(lib: &Lib<'_>, addr: u64, count: u64) -> Result<u16> {
    let count = count_ok(lib, "DT_VERNEEDNUM", count)?;
    let needed: Vec<&[u8]> =
        lib.dynamic.needed.iter().map(|n| symbols::string(lib, *n, "DT_NEEDED")).collect::<Result<_>>()?;
    let mut max = 0;
    walk(lib, "DT_VERNEED", addr, count, 16, 12, |at, off| {
        let b = lib.bytes;
        let (version, cnt, file, aux) = (u16_at(b, off), u16_at(b, off + 2), u32_at(b, off + 4), u32_at(b, off + 8));
        let file = symbols::string(lib, file.into(), "DT_VERNEED file")?;
        if version != 1 || cnt == 0 || !needed.contains(&file) {
            return Err(bad(format!(
                "DT_VERNEED entry at {at:#x}: version {version}, {cnt} versions of {}: expected version 1, at least one version, of a library named by DT_NEEDED",
                String::from_utf8_lossy(file)
            )));
        }
        walk(lib, "DT_VERNEED versions", at + u64::from(aux), usize::from(cnt), 16, 12, |vat, voff| {
            let (hash, other, name) = (u32_at(b, voff), u16_at(b, voff + 6), u32_at(b, voff + 8));
            let name = symbols::string(lib, name.into(), "DT_VERNEED version name")?;
            if elf_hash(name) != hash || other & 0x8000 != 0 {
                return Err(bad(format!(
                    "DT_VERNEED version at {vat:#x} ({}): hash {hash:#x} (its name hashes to {:#x}), index {other}",
                    String::from_utf8_lossy(name),
                    elf_hash(name)
                )));
            }
            max = max.max(other);
            Ok(())
        })
    })?;
    Ok(max)
}
