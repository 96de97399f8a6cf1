//! The dynamic string and symbol tables, and what the other checks need from them: symbol
//! names, where each defined symbol lies, and which addresses start a function.

use super::{bad, sections::Sections, u16_at, u32_at, u64_at, Lib};
use object::elf;
use relaxvm::Result;
use std::collections::{BTreeSet, HashMap};

/// Bits of `st_other` accepted: the visibility; on AArch64 also STO_AARCH64_VARIANT_PCS.
#[cfg(target_arch = "aarch64")]
const OTHER_OK: u8 = 0x83;
#[cfg(not(target_arch = "aarch64"))]
const OTHER_OK: u8 = 0x03;

/// One dynamic symbol.
#[derive(Clone, Copy, Debug)]
pub struct Sym {
    pub name: u32,
    pub info: u8,
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
}

impl Sym {
    pub fn kind(&self) -> u8 {
        self.info & 0xf
    }
    pub fn bind(&self) -> u8 {
        self.info >> 4
    }
    pub fn defined(&self) -> bool {
        self.shndx != elf::SHN_UNDEF
    }
}

/// The string at `offset` in the dynamic string table, checked to end inside it.
pub fn string<'a>(lib: &Lib<'a>, offset: u64, what: &str) -> Result<&'a [u8]> {
    let (start, size) = lib.strtab;
    let table = &lib.bytes[start..start + size];
    let rest = usize::try_from(offset).ok().and_then(|o| table.get(o..)).ok_or_else(|| {
        bad(format!("{what}: string offset {offset} is outside the {size}-byte string table (DT_STRSZ)"))
    })?;
    let end = rest
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| bad(format!("{what}: the string at offset {offset} does not end inside the string table")))?;
    Ok(&rest[..end])
}

/// Reads symbol `i` of the dynamic symbol table (`i < lib.nsyms`).
pub fn sym(lib: &Lib<'_>, i: usize) -> Sym {
    let at = lib.dynsym + 24 * i;
    let b = lib.bytes;
    Sym {
        name: u32_at(b, at),
        info: b[at + 4],
        shndx: u16_at(b, at + 6),
        value: u64_at(b, at + 8),
        size: u64_at(b, at + 16),
    }
}

/// The addresses known to start a function: the defined functions of the dynamic symbol table,
/// and of the full symbol table when the file has one (`full`; a stripped library has not).
pub struct Functions {
    pub starts: BTreeSet<u64>,
    pub full: bool,
}

/// Checks every dynamic symbol: its name, type, binding, section and address.
pub fn check(lib: &Lib<'_>, sections: &Sections) -> Result<Functions> {
    let first = sym(lib, 0);
    if first.name != 0 || first.info != 0 || first.shndx != 0 || first.value != 0 || first.size != 0 {
        return Err(bad("dynamic symbol 0 is not the null symbol"));
    }
    let full = sections.full_symbols(lib.bytes)?;
    let mut starts = BTreeSet::new();
    for i in 1..lib.nsyms {
        let s = sym(lib, i);
        let name = string(lib, s.name.into(), &format!("dynamic symbol {i}"))?;
        let shown = String::from_utf8_lossy(name);
        let at = |msg: String| bad(format!("dynamic symbol {i} ({shown}): {msg}"));
        let other = lib.bytes[lib.dynsym + 24 * i + 5];
        if other & !OTHER_OK != 0 {
            return Err(at(format!("st_other {other:#x} has unknown bits")));
        }
        match s.bind() {
            elf::STB_LOCAL | elf::STB_GLOBAL | elf::STB_WEAK => {}
            b => return Err(at(format!("binding {b}: expected local (0), global (1) or weak (2)"))),
        }
        match s.kind() {
            elf::STT_NOTYPE | elf::STT_OBJECT | elf::STT_FUNC | elf::STT_SECTION => {}
            k => {
                return Err(at(format!(
                    "type {k}: expected no type (0), object (1), function (2) or section (3) (thread-local and indirect functions are refused)"
                )))
            }
        }
        if !s.defined() {
            // A non-default visibility makes the loader bind the import to this library itself
            // (at its load address plus the value 0): a call through it jumps to the ELF header.
            if s.kind() == elf::STT_SECTION || s.bind() == elf::STB_LOCAL || s.value != 0 || other & 3 != 0 {
                return Err(at(format!(
                    "an undefined symbol with binding {}, type {}, visibility {}, value {:#x}: expected global or weak, not a section, default visibility, value 0",
                    s.bind(),
                    s.kind(),
                    other & 3,
                    s.value
                )));
            }
            // The name of an import decides what the loader binds it to: the full symbol table
            // must import the same name the same way.
            if let Some(full) = &full {
                match full.undefined.get(name) {
                    Some(info) if *info == s.info => {}
                    Some(info) => {
                        return Err(at(format!(
                            "imported with st_info {:#x}, but the symbol table says {info:#x}",
                            s.info
                        )))
                    }
                    None => return Err(at("imported, but the symbol table imports no such name".into())),
                }
            }
            continue;
        }
        if s.shndx == elf::SHN_ABS {
            continue; // relocations may not use it (relocations.rs)
        }
        if s.shndx >= elf::SHN_LORESERVE {
            return Err(at(format!(
                "section index {:#x} is reserved (common or extended symbols are refused)",
                s.shndx
            )));
        }
        let end = s.value.checked_add(s.size).ok_or_else(|| at(format!("address {:#x} + size overflows", s.value)))?;
        let seg = lib
            .seg
            .segment(s.value, s.size)
            .ok_or_else(|| at(format!("address {:#x} ({} bytes) lies outside the loaded segments", s.value, s.size)))?;
        if s.kind() == elf::STT_FUNC && !seg.executable() {
            return Err(at(format!("a function at {:#x}, outside the executable segments", s.value)));
        }
        if let Some(sec) = sections.get(s.shndx) {
            if sec.flags & u64::from(elf::SHF_ALLOC) == 0
                || s.value < sec.addr
                || end > sec.addr.saturating_add(sec.size)
            {
                return Err(at(format!(
                    "address {:#x}..{end:#x} is not inside its section {} ({:#x}..{:#x})",
                    s.value,
                    sec.name,
                    sec.addr,
                    sec.addr.saturating_add(sec.size)
                )));
            }
            if s.kind() == elf::STT_FUNC && sec.flags & u64::from(elf::SHF_EXECINSTR) == 0 {
                return Err(at(format!("a function in the non-executable section {}", sec.name)));
            }
        } else if !sections.is_empty() {
            return Err(at(format!("section index {} does not exist", s.shndx)));
        }
        if let Some(full) = &full {
            if s.bind() != elf::STB_LOCAL {
                agree(&full.globals, name, &s).map_err(at)?;
            }
        }
        if s.kind() == elf::STT_FUNC {
            starts.insert(s.value);
        }
    }
    let has_full = full.is_some();
    if let Some(full) = full {
        // Local functions (frame_dummy, _init) are in the full table only.
        starts.extend(full.functions);
    }
    Ok(Functions { starts, full: has_full })
}

/// A defined dynamic symbol must agree with the full symbol table (which the linker wrote from
/// the same data and the loader never reads): a corrupted value, size or type shows as a
/// difference.
fn agree(full: &HashMap<Vec<u8>, (u64, u64, u8)>, name: &[u8], s: &Sym) -> std::result::Result<(), String> {
    match full.get(name) {
        Some(&(value, size, info)) if value == s.value && size == s.size && info == s.info => Ok(()),
        Some(&(value, size, info)) => Err(format!(
            "address {:#x}, size {}, info {:#x} in the dynamic symbol table, but {value:#x}, {size}, {info:#x} in the symbol table",
            s.value, s.size, s.info
        )),
        None => Err("defined in the dynamic symbol table, but absent from the symbol table".into()),
    }
}
