//! Validation of an ELF shared library before anything maps it, and reads of its exported
//! symbols from the file's bytes (no code runs).
//!
//! The dynamic loader trusts a library's program headers: a segment that extends past the end of
//! the file is mapped anyway and the first touch of the missing pages kills the process with
//! SIGBUS (TVM's loader dies this way on a truncated `.so`). So before a library is opened, every
//! loaded segment must lie inside the file, the dynamic section inside a loaded segment, and
//! every address the dynamic section gives the loader (string and symbol tables, hash tables,
//! relocations, init and fini arrays) inside a loaded segment's file bytes. This protects against
//! malformed files, not against a malicious library, whose code runs when it is opened anyway.

use object::elf;
use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
use object::{Endianness, Object, ObjectSymbol, SymbolKind};
use relaxvm::{Error, Result};

/// The machine this build runs on, as ELF names it.
#[cfg(target_arch = "x86_64")]
const HOST_MACHINE: (u16, &str) = (elf::EM_X86_64, "x86-64");
#[cfg(target_arch = "aarch64")]
const HOST_MACHINE: (u16, &str) = (elf::EM_AARCH64, "AArch64");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const HOST_MACHINE: (u16, &str) = (elf::EM_NONE, "this machine");

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::format(format!("invalid ELF shared library: {msg}"))
}

/// A file range `[offset, offset + size)` inside `len` bytes.
fn in_file(offset: u64, size: u64, len: usize) -> bool {
    offset.checked_add(size).is_some_and(|end| end <= len as u64)
}

/// A parsed, validated library.
struct Parsed<'a> {
    file: ElfFile64<'a, Endianness>,
}

/// Dynamic-section tags whose value is an address the loader reads.
const ADDRESS_TAGS: &[(u32, &str, Option<u32>)] = &[
    (elf::DT_STRTAB, "DT_STRTAB", Some(elf::DT_STRSZ)),
    (elf::DT_SYMTAB, "DT_SYMTAB", None),
    (elf::DT_HASH, "DT_HASH", None),
    (elf::DT_GNU_HASH, "DT_GNU_HASH", None),
    (elf::DT_RELA, "DT_RELA", Some(elf::DT_RELASZ)),
    (elf::DT_REL, "DT_REL", Some(elf::DT_RELSZ)),
    (elf::DT_JMPREL, "DT_JMPREL", Some(elf::DT_PLTRELSZ)),
    (elf::DT_INIT_ARRAY, "DT_INIT_ARRAY", Some(elf::DT_INIT_ARRAYSZ)),
    (elf::DT_FINI_ARRAY, "DT_FINI_ARRAY", Some(elf::DT_FINI_ARRAYSZ)),
    (elf::DT_VERSYM, "DT_VERSYM", None),
    (elf::DT_VERDEF, "DT_VERDEF", None),
    (elf::DT_VERNEED, "DT_VERNEED", None),
];

fn parse(bytes: &[u8]) -> Result<Parsed<'_>> {
    if !bytes.starts_with(b"\x7fELF") {
        let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(bad(format!("not an ELF file: it starts with bytes [{}], expected 7f 45 4c 46", head.join(" "))));
    }
    match bytes.get(4) {
        Some(&elf::ELFCLASS64) => {}
        Some(c) => return Err(bad(format!("ELF class {c}, expected {} (64-bit)", elf::ELFCLASS64))),
        None => return Err(bad("the file ends inside the ELF identification")),
    }
    match bytes.get(5) {
        Some(&elf::ELFDATA2LSB) => {}
        Some(d) => return Err(bad(format!("ELF data encoding {d}, expected {} (little-endian)", elf::ELFDATA2LSB))),
        None => return Err(bad("the file ends inside the ELF identification")),
    }
    let file = ElfFile64::<Endianness>::parse(bytes).map_err(|e| bad(format!("{e} (truncated or corrupt?)")))?;
    let header = file.elf_header();
    let endian = file.endian();
    let machine = header.e_machine(endian);
    if machine != HOST_MACHINE.0 {
        return Err(bad(format!(
            "built for ELF machine {machine}, but this is {} (machine {})",
            HOST_MACHINE.1, HOST_MACHINE.0
        )));
    }
    let kind = header.e_type(endian);
    if kind != elf::ET_DYN {
        return Err(bad(format!("ELF type {kind}, expected {} (a shared library)", elf::ET_DYN)));
    }
    let len = bytes.len();
    let mut loads = Vec::new();
    let mut dynamic = None;
    for (i, ph) in file.elf_program_headers().iter().enumerate() {
        let (offset, filesz, memsz, vaddr) =
            (ph.p_offset(endian), ph.p_filesz(endian), ph.p_memsz(endian), ph.p_vaddr(endian));
        if !in_file(offset, filesz, len) {
            return Err(bad(format!(
                "program header {i} covers file bytes {offset}..{}, but the file has {len} bytes (truncated?)",
                offset as u128 + filesz as u128
            )));
        }
        match ph.p_type(endian) {
            elf::PT_LOAD => {
                if filesz > memsz || vaddr.checked_add(memsz).is_none() {
                    return Err(bad(format!("loadable segment {i}: file size {filesz} exceeds memory size {memsz}")));
                }
                loads.push((vaddr, offset, filesz));
            }
            elf::PT_DYNAMIC => dynamic = Some((vaddr, filesz)),
            _ => {}
        }
    }
    if loads.is_empty() {
        return Err(bad("no loadable segment"));
    }
    let (dyn_addr, dyn_size) = dynamic.ok_or_else(|| bad("no dynamic section (PT_DYNAMIC)"))?;
    let to_file = |addr: u64, size: u64| {
        loads.iter().find_map(|&(vaddr, offset, filesz)| {
            let rel = addr.checked_sub(vaddr)?;
            (rel.checked_add(size)? <= filesz).then_some(offset + rel)
        })
    };
    let dyn_off =
        to_file(dyn_addr, dyn_size).ok_or_else(|| bad("the dynamic section lies outside the loaded segments"))?;
    let entries: &[elf::Dyn64<Endianness>] =
        object::slice_from_bytes(&bytes[dyn_off as usize..], (dyn_size / 16) as usize)
            .map(|(s, _)| s)
            .map_err(|_| bad("the dynamic section is misaligned or truncated"))?;
    let value = |tag: u32| entries.iter().find(|d| d.d_tag(endian) == u64::from(tag)).map(|d| d.d_val(endian));
    for &(tag, name, size_tag) in ADDRESS_TAGS {
        if let Some(addr) = value(tag) {
            let size = size_tag.and_then(value).unwrap_or(1);
            if to_file(addr, size).is_none() {
                return Err(bad(format!(
                    "{name} (address {addr:#x}, {size} bytes) lies outside the loaded file bytes"
                )));
            }
        }
    }
    Ok(Parsed { file })
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
        machine: HOST_MACHINE.1,
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
    let Some(sym) = parsed.file.dynamic_symbols().find(|s| !s.is_undefined() && s.name() == Ok(name)) else {
        return Ok(None);
    };
    let (addr, size) = (sym.address(), sym.size());
    let endian = parsed.file.endian();
    let offset =
        parsed.file.elf_program_headers().iter().filter(|ph| ph.p_type(endian) == elf::PT_LOAD).find_map(|ph| {
            let rel = addr.checked_sub(ph.p_vaddr(endian))?;
            (rel.checked_add(size)? <= ph.p_filesz(endian)).then_some(ph.p_offset(endian) + rel)
        });
    let offset = offset.ok_or_else(|| {
        bad(format!("symbol {name} (address {addr:#x}, {size} bytes) does not lie in the file's loaded bytes"))
    })?;
    // Inside the file: every loaded segment's file range was checked by `parse`.
    Ok(Some(offset as usize..(offset + size) as usize))
}

/// The names of the functions the library defines and exports.
pub fn exported_functions(bytes: &[u8]) -> Result<Vec<String>> {
    Ok(defined(&parse(bytes)?, SymbolKind::Text))
}

/// The names of the data objects the library defines and exports (its pointer slots and blobs).
pub fn exported_data(bytes: &[u8]) -> Result<Vec<String>> {
    Ok(defined(&parse(bytes)?, SymbolKind::Data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_elf_and_wrong_class_are_named() {
        let e = validate(b"hello world").unwrap_err().to_string();
        assert!(e.contains("not an ELF file") && e.contains("68 65 6c 6c"), "{e}");
        let mut h = b"\x7fELF".to_vec();
        h.extend([1u8, 1, 1]);
        let e = validate(&h).unwrap_err().to_string();
        assert!(e.contains("ELF class 1, expected 2"), "{e}");
        let e = validate(b"\x7fEL").unwrap_err().to_string();
        assert!(e.contains("not an ELF file"), "{e}");
    }
}
