//! Validation of an ELF shared library before anything maps it, and reads of its exported
//! symbols from the file's bytes (no code runs).
//!
//! The dynamic loader trusts a library: a segment that extends past the end of the file is
//! mapped anyway (touching it is SIGBUS), a relocation writes wherever its offset says, a hash
//! chain is followed wherever it leads, an initializer is called wherever it points, and several
//! inconsistencies are glibc assertions that abort the process. So before a library is opened,
//! [`validate`] checks everything the loader will read: the program headers (`segments`), the
//! dynamic section (`dynamic`), the string and symbol tables (`symbols`), the hash tables
//! (`hash`), the version tables (`versions`), the relocations and initializers
//! (`relocations`), cross-checked against the section headers and full symbol table where the
//! file has them (`sections`). What it cannot check (unknown dynamic tags, relocation types TVM
//! does not emit, IFUNC and TLS symbols) is refused. This protects against malformed and
//! corrupted files, not against a malicious library, whose code runs when it is opened anyway.

mod dynamic;
mod hash;
mod headers;
mod relocations;
mod sections;
mod segments;
mod symbols;
#[cfg(test)]
mod tests;
mod versions;

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Endianness, Object, ObjectSymbol, SymbolKind};
use relaxvm::{Error, Result};
use segments::Segments;
use std::cell::RefCell;

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::format(format!("invalid ELF shared library: {msg}"))
}

// Readers of little-endian fields at file offsets the caller checked to be inside the file.
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A library under validation: what the checks so far established.
struct Lib<'a> {
    bytes: &'a [u8],
    seg: Segments,
    dynamic: dynamic::Dynamic,
    /// The dynamic string table: file offset and size.
    strtab: (usize, usize),
    /// The file offset of the dynamic symbol table, and its number of symbols.
    dynsym: usize,
    nsyms: usize,
    /// Every file range the loader reads (what, offset, size), to check against the hole the
    /// loaded copy leaves where the program blob was.
    reads: RefCell<Vec<(&'static str, usize, usize)>>,
}

impl Lib<'_> {
    /// The file offset of the table `what` of `size` bytes at address `addr`, which must lie in
    /// one segment's file bytes; recorded as read by the loader.
    fn table(&self, what: &'static str, addr: u64, size: u64) -> Result<usize> {
        let off = self.seg.file_offset(addr, size).ok_or_else(|| {
            bad(format!("{what} (address {addr:#x}, {size} bytes) lies outside the loaded file bytes"))
        })?;
        self.reads.borrow_mut().push((what, off, size as usize));
        Ok(off)
    }
}

/// A parsed, validated library.
struct Parsed<'a> {
    file: ElfFile64<'a, Endianness>,
    /// The file ranges the loader reads, by what they hold.
    reads: Vec<(&'static str, usize, usize)>,
}

/// The data symbol whose bytes the loaded copy leaves out (see `ffi/private_copy.rs`).
const HOLE_SYMBOL: &str = "__tvm_ffi__library_bin";

fn parse(bytes: &[u8]) -> Result<Parsed<'_>> {
    let file = headers::parse(bytes)?;
    let endian = file.endian();
    let seg = segments::check(bytes, file.elf_program_headers(), endian, file.elf_header().e_phoff(endian))?;
    let (dyn_addr, dyn_size) = seg.dynamic;
    let dyn_off = seg.file_offset(dyn_addr, dyn_size).expect("checked by segments");
    let dynamic = dynamic::read(&bytes[dyn_off..dyn_off + dyn_size as usize], dyn_off)?;
    let sections = sections::Sections::read(&file)?;
    let strtab_addr = dynamic.get(elf::DT_STRTAB).expect("required (dynamic.rs)");
    let strsz = dynamic.get(elf::DT_STRSZ).expect("paired (dynamic.rs)");
    let nsyms = hash::symbol_count(bytes, &seg, dynamic.get(elf::DT_GNU_HASH), dynamic.get(elf::DT_HASH))?;
    let symtab_addr = dynamic.get(elf::DT_SYMTAB).expect("required (dynamic.rs)");
    let mut lib = Lib { bytes, seg, dynamic, strtab: (0, 0), dynsym: 0, nsyms, reads: RefCell::new(Vec::new()) };
    lib.reads.borrow_mut().push(("the dynamic section", dyn_off, dyn_size as usize));
    lib.strtab = (lib.table("DT_STRTAB", strtab_addr, strsz)?, strsz as usize);
    lib.dynsym = lib.table("DT_SYMTAB", symtab_addr, 24 * nsyms as u64)?;
    if let Some(s) = sections.of_kind(elf::SHT_DYNSYM) {
        if s.addr != symtab_addr || s.size != 24 * nsyms as u64 {
            return Err(bad(format!(
                "DT_SYMTAB is {symtab_addr:#x} and the hash table implies {nsyms} symbols, but the .dynsym section is at {:#x} with {} bytes",
                s.addr, s.size
            )));
        }
    }
    if let Some(s) = sections.of_kind(elf::SHT_STRTAB).filter(|s| s.name == ".dynstr") {
        if s.addr != strtab_addr || s.size != strsz {
            return Err(bad(format!(
                "DT_STRTAB is {strtab_addr:#x} with DT_STRSZ {strsz}, but the .dynstr section is at {:#x} with {} bytes",
                s.addr, s.size
            )));
        }
    }
    for (tag, offset) in lib.dynamic.strings() {
        symbols::string(&lib, offset, tag)?;
    }
    let functions = symbols::check(&lib, &sections)?;
    hash::check(&lib)?;
    versions::check(&lib)?;
    relocations::check(&lib, &sections, &functions)?;
    // The loaded copy has zeros where the program blob was: nothing the loader reads may be there.
    if let Some(hole) = symbol_range(&file, &lib.seg, HOLE_SYMBOL)? {
        if let Some((what, off, size)) =
            lib.reads.borrow().iter().find(|(_, off, size)| *off < hole.end && off + size > hole.start)
        {
            return Err(bad(format!(
                "{what} (file bytes {off}..{}) overlaps the {HOLE_SYMBOL} data ({}..{})",
                off + size,
                hole.start,
                hole.end
            )));
        }
    }
    let mut reads = lib.reads.into_inner();
    let phoff = file.elf_header().e_phoff(endian) as usize;
    reads.push(("the ELF header", 0, 64));
    reads.push(("the program headers", phoff, 56 * file.elf_program_headers().len()));
    Ok(Parsed { file, reads })
}

/// The file ranges of a valid library that the dynamic loader reads (the ELF and program
/// headers, the dynamic section, string, symbol, hash and version tables, relocation tables,
/// init and fini arrays), each with what it holds: what a corruption campaign or a fuzzer
/// should damage.
pub fn loader_regions(bytes: &[u8]) -> Result<Vec<(&'static str, std::ops::Range<usize>)>> {
    let mut reads = parse(bytes)?.reads;
    reads.sort_by_key(|r| r.1);
    Ok(reads.into_iter().map(|(what, off, size)| (what, off..off + size)).collect())
}

/// What [`validate`] learned about a library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfInfo {
    /// The machine it was built for, as ELF names it (`x86-64`, `AArch64`).
    pub machine: &'static str,
    /// How many loadable segments (PT_LOAD) it has.
    pub load_segments: usize,
    /// The functions it defines and exports (its dynamic symbol table), in table order.
    pub functions: Vec<String>,
    /// The data objects it defines and exports (pointer slots, `__tvm_ffi__library_bin`).
    pub data: Vec<String>,
}

/// Checks that `bytes` is a shared library for this machine that the dynamic loader can map
/// without reading past the end of the file, and lists what it exports.
pub fn validate(bytes: &[u8]) -> Result<ElfInfo> {
    let parsed = parse(bytes)?;
    let endian = parsed.file.endian();
    let load_segments = parsed.file.elf_program_headers().iter().filter(|ph| ph.p_type(endian) == elf::PT_LOAD).count();
    Ok(ElfInfo {
        machine: headers::HOST_MACHINE.1,
        load_segments,
        functions: defined(&parsed, SymbolKind::Text),
        data: defined(&parsed, SymbolKind::Data),
    })
}

/// The names of the defined dynamic symbols of `kind`.
fn defined(parsed: &Parsed<'_>, kind: SymbolKind) -> Vec<String> {
    parsed
        .file
        .dynamic_symbols()
        .filter(|s| !s.is_undefined() && s.kind() == kind)
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect()
}

/// The file bytes of the defined data symbol `name` exported by the library (its dynamic
/// symbol table), or `None` when it exports no such symbol. Reads the file; runs nothing.
pub fn exported_symbol_bytes<'a>(bytes: &'a [u8], name: &str) -> Result<Option<&'a [u8]>> {
    Ok(exported_symbol_range(bytes, name)?.map(|r| &bytes[r]))
}

/// Where in the file the defined symbol `name` exported by the library lies, or `None` when it
/// exports no such symbol.
pub fn exported_symbol_range(bytes: &[u8], name: &str) -> Result<Option<std::ops::Range<usize>>> {
    let parsed = parse(bytes)?;
    let endian = parsed.file.endian();
    let seg =
        segments::check(bytes, parsed.file.elf_program_headers(), endian, parsed.file.elf_header().e_phoff(endian))?;
    symbol_range(&parsed.file, &seg, name)
}

/// Where in the file the defined dynamic symbol `name` lies.
fn symbol_range(
    file: &ElfFile64<'_, Endianness>,
    seg: &Segments,
    name: &str,
) -> Result<Option<std::ops::Range<usize>>> {
    let Some(sym) = file.dynamic_symbols().find(|s| !s.is_undefined() && s.name() == Ok(name)) else {
        return Ok(None);
    };
    let (addr, size) = (sym.address(), sym.size());
    let offset = seg.file_offset(addr, size).ok_or_else(|| {
        bad(format!("symbol {name} (address {addr:#x}, {size} bytes) does not lie in the file's loaded bytes"))
    })?;
    // Inside the file: every loaded segment's file range was checked by `segments`.
    Ok(Some(offset..offset + size as usize))
}

/// The names of the functions the library defines and exports.
pub fn exported_functions(bytes: &[u8]) -> Result<Vec<String>> {
    Ok(defined(&parse(bytes)?, SymbolKind::Text))
}

/// The names of the data objects the library defines and exports (its pointer slots and blobs).
pub fn exported_data(bytes: &[u8]) -> Result<Vec<String>> {
    Ok(defined(&parse(bytes)?, SymbolKind::Data))
}
