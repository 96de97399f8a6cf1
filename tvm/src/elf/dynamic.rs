//! The dynamic section: the entries glibc reads to link a library.
//!
//! glibc reads entries up to DT_NULL, keeps the last of each tag (in a table indexed by tag) and
//! acts on the ones it knows. Here every entry up to DT_NULL must carry a tag on the list below
//! (each at most once, except DT_NEEDED), so every value the loader will act on is one this
//! module or its siblings check. Any other tag is refused: an unknown tag may be one glibc acts on
//! (filters, audit libraries, prelink tables, TLS descriptors, REL-format relocations, which
//! glibc's x86-64 and AArch64 loaders assert are absent).

use super::bad;
use object::elf;
use relaxvm::Result;
use std::collections::BTreeMap;

/// The tags a library may use, with what their value is.
const KNOWN: &[(u32, &str, Kind)] = &[
    (elf::DT_NEEDED, "DT_NEEDED", Kind::String),
    (elf::DT_PLTRELSZ, "DT_PLTRELSZ", Kind::Size),
    (elf::DT_PLTGOT, "DT_PLTGOT", Kind::Address),
    (elf::DT_HASH, "DT_HASH", Kind::Address),
    (elf::DT_STRTAB, "DT_STRTAB", Kind::Address),
    (elf::DT_SYMTAB, "DT_SYMTAB", Kind::Address),
    (elf::DT_RELA, "DT_RELA", Kind::Address),
    (elf::DT_RELASZ, "DT_RELASZ", Kind::Size),
    (elf::DT_RELAENT, "DT_RELAENT", Kind::Size),
    (elf::DT_STRSZ, "DT_STRSZ", Kind::Size),
    (elf::DT_SYMENT, "DT_SYMENT", Kind::Size),
    (elf::DT_INIT, "DT_INIT", Kind::Address),
    (elf::DT_FINI, "DT_FINI", Kind::Address),
    (elf::DT_SONAME, "DT_SONAME", Kind::String),
    (elf::DT_RPATH, "DT_RPATH", Kind::String),
    (elf::DT_SYMBOLIC, "DT_SYMBOLIC", Kind::Flag),
    (elf::DT_PLTREL, "DT_PLTREL", Kind::Size),
    (elf::DT_DEBUG, "DT_DEBUG", Kind::Flag),
    (elf::DT_JMPREL, "DT_JMPREL", Kind::Address),
    (elf::DT_BIND_NOW, "DT_BIND_NOW", Kind::Flag),
    (elf::DT_INIT_ARRAY, "DT_INIT_ARRAY", Kind::Address),
    (elf::DT_FINI_ARRAY, "DT_FINI_ARRAY", Kind::Address),
    (elf::DT_INIT_ARRAYSZ, "DT_INIT_ARRAYSZ", Kind::Size),
    (elf::DT_FINI_ARRAYSZ, "DT_FINI_ARRAYSZ", Kind::Size),
    (elf::DT_RUNPATH, "DT_RUNPATH", Kind::String),
    (elf::DT_FLAGS, "DT_FLAGS", Kind::Flag),
    (DT_RELRSZ, "DT_RELRSZ", Kind::Size),
    (DT_RELR, "DT_RELR", Kind::Address),
    (DT_RELRENT, "DT_RELRENT", Kind::Size),
    (elf::DT_GNU_HASH, "DT_GNU_HASH", Kind::Address),
    (elf::DT_VERSYM, "DT_VERSYM", Kind::Address),
    (elf::DT_RELACOUNT, "DT_RELACOUNT", Kind::Size),
    (elf::DT_FLAGS_1, "DT_FLAGS_1", Kind::Flag),
    (elf::DT_VERDEF, "DT_VERDEF", Kind::Address),
    (elf::DT_VERDEFNUM, "DT_VERDEFNUM", Kind::Size),
    (elf::DT_VERNEED, "DT_VERNEED", Kind::Address),
    (elf::DT_VERNEEDNUM, "DT_VERNEEDNUM", Kind::Size),
];

pub const DT_RELRSZ: u32 = 35;
pub const DT_RELR: u32 = 36;
pub const DT_RELRENT: u32 = 37;

/// DT_FLAGS bits accepted: DF_ORIGIN, DF_SYMBOLIC, DF_BIND_NOW. (DF_TEXTREL would make the loader
/// write to code; DF_STATIC_TLS asks for TLS the library does not declare.)
const FLAGS_OK: u64 = (elf::DF_ORIGIN | elf::DF_SYMBOLIC | elf::DF_BIND_NOW) as u64;
/// DT_FLAGS_1 bits accepted: DF_1_NOW, DF_1_NODELETE, DF_1_ORIGIN, DF_1_NODEFLIB.
const FLAGS_1_OK: u64 = (elf::DF_1_NOW | elf::DF_1_NODELETE | elf::DF_1_ORIGIN | elf::DF_1_NODEFLIB) as u64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An offset into the string table.
    String,
    /// A size or count (checked where it is used).
    Size,
    /// An address in the loaded image.
    Address,
    /// A flag or flag word.
    Flag,
}

/// The entries of the dynamic section, up to DT_NULL.
#[derive(Debug, Default)]
pub struct Dynamic {
    /// The value of each tag (at most one each), by tag.
    values: BTreeMap<u32, u64>,
    /// The string-table offsets of the DT_NEEDED entries.
    pub needed: Vec<u64>,
}

impl Dynamic {
    /// The value of `tag`, if the section has it.
    pub fn get(&self, tag: u32) -> Option<u64> {
        self.values.get(&tag).copied()
    }

    /// The string-table offsets the loader reads (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH),
    /// with their tag names.
    pub fn strings(&self) -> Vec<(&'static str, u64)> {
        let mut out: Vec<_> = self.needed.iter().map(|v| ("DT_NEEDED", *v)).collect();
        for &(tag, name, kind) in KNOWN {
            if kind == Kind::String && tag != elf::DT_NEEDED {
                out.extend(self.get(tag).map(|v| (name, v)));
            }
        }
        out
    }
}

/// The name of a known tag.
pub fn name(tag: u32) -> &'static str {
    KNOWN.iter().find(|k| k.0 == tag).map_or("?", |k| k.1)
}

/// Reads and checks the entries in `bytes` (the dynamic section's file bytes).
pub fn read(bytes: &[u8], file_offset: usize) -> Result<Dynamic> {
    let mut out = Dynamic::default();
    let mut terminated = false;
    for (i, entry) in bytes.chunks_exact(16).enumerate() {
        let tag = u64::from_le_bytes(entry[..8].try_into().expect("8 bytes"));
        let value = u64::from_le_bytes(entry[8..].try_into().expect("8 bytes"));
        let at = |msg: String| bad(format!("dynamic entry {i} (file offset {}): {msg}", file_offset + 16 * i));
        if tag == u64::from(elf::DT_NULL) {
            terminated = true;
            break;
        }
        let Some(&(tag, name, _)) = KNOWN.iter().find(|k| u64::from(k.0) == tag) else {
            return Err(at(format!(
                "tag {tag:#x} is not one relaxvm can check, and the dynamic loader may act on it: refused"
            )));
        };
        if tag == elf::DT_NEEDED {
            out.needed.push(value);
        } else if out.values.insert(tag, value).is_some() {
            return Err(at(format!("a second {name} entry (the loader would use only the last)")));
        }
    }
    if !terminated {
        return Err(bad("the dynamic section has no DT_NULL entry: the loader would read past its end"));
    }
    check_values(&out)?;
    Ok(out)
}

/// The checks of values that need no other table.
fn check_values(d: &Dynamic) -> Result<()> {
    let want = |tag: u32, expected: u64| match d.get(tag) {
        Some(v) if v != expected => Err(bad(format!("{} is {v}, expected {expected}", name(tag)))),
        _ => Ok(()),
    };
    want(elf::DT_RELAENT, 24)?;
    want(elf::DT_SYMENT, 24)?;
    want(DT_RELRENT, 8)?;
    want(elf::DT_PLTREL, u64::from(elf::DT_RELA))?;
    if let Some(f) = d.get(elf::DT_FLAGS).filter(|f| f & !FLAGS_OK != 0) {
        return Err(bad(format!(
            "DT_FLAGS {f:#x} has bits {:#x} relaxvm does not accept (accepted: {FLAGS_OK:#x})",
            f & !FLAGS_OK
        )));
    }
    if let Some(f) = d.get(elf::DT_FLAGS_1).filter(|f| f & !FLAGS_1_OK != 0) {
        return Err(bad(format!(
            "DT_FLAGS_1 {f:#x} has bits {:#x} relaxvm does not accept (accepted: {FLAGS_1_OK:#x})",
            f & !FLAGS_1_OK
        )));
    }
    // Tables and their sizes come in pairs.
    for (table, size) in [
        (elf::DT_RELA, elf::DT_RELASZ),
        (elf::DT_JMPREL, elf::DT_PLTRELSZ),
        (elf::DT_INIT_ARRAY, elf::DT_INIT_ARRAYSZ),
        (elf::DT_FINI_ARRAY, elf::DT_FINI_ARRAYSZ),
        (DT_RELR, DT_RELRSZ),
        (elf::DT_VERDEF, elf::DT_VERDEFNUM),
        (elf::DT_VERNEED, elf::DT_VERNEEDNUM),
        (elf::DT_STRTAB, elf::DT_STRSZ),
    ] {
        if d.get(table).is_some() != d.get(size).is_some() {
            return Err(bad(format!("{} without {} (or the reverse)", name(table), name(size))));
        }
    }
    // glibc reads the entry size of each table it has without checking it is there: a missing
    // one is a NULL dereference in the loader (a campaign death: DT_RELAENT's tag flipped).
    for (table, entry) in [
        (elf::DT_JMPREL, elf::DT_PLTREL),
        (elf::DT_RELA, elf::DT_RELAENT),
        (DT_RELR, DT_RELRENT),
        (elf::DT_SYMTAB, elf::DT_SYMENT),
    ] {
        if d.get(table).is_some() && d.get(entry).is_none() {
            return Err(bad(format!("{} without {}", name(table), name(entry))));
        }
    }
    for tag in [elf::DT_STRTAB, elf::DT_SYMTAB] {
        if d.get(tag).is_none() {
            return Err(bad(format!("no {}", name(tag))));
        }
    }
    if d.get(elf::DT_GNU_HASH).is_none() && d.get(elf::DT_HASH).is_none() {
        return Err(bad("neither DT_GNU_HASH nor DT_HASH: the loader could find no symbol"));
    }
    Ok(())
}
