//! The two libraries the damages patch, and finders of the file offsets of their fields (by
//! name, from the file's own tables), for the cases in `cases.rs`.

use std::process::Command;
use std::sync::OnceLock;

// ELF constants (the `object` crate's names).
pub(crate) const PT_LOAD: u32 = 1;
pub(crate) const PT_DYNAMIC: u32 = 2;
pub(crate) const PT_NOTE: u32 = 4;
pub(crate) const PT_TLS: u32 = 7;
pub(crate) const PT_GNU_STACK: u32 = 0x6474_e551;
pub(crate) const PT_GNU_RELRO: u32 = 0x6474_e552;
pub(crate) const DT_NULL: u64 = 0;
pub(crate) const DT_NEEDED: u64 = 1;
pub(crate) const DT_PLTGOT: u64 = 3;
pub(crate) const DT_RELASZ: u64 = 8;
pub(crate) const DT_DEBUG: u64 = 21;
pub(crate) const DT_INIT_ARRAY: u64 = 25;
pub(crate) const DT_INIT_ARRAYSZ: u64 = 27;
pub(crate) const DT_FLAGS: u64 = 30;
pub(crate) const DT_RELRSZ: u64 = 35;
pub(crate) const DT_GNU_HASH: u64 = 0x6fff_fef5;
pub(crate) const DT_VERSYM: u64 = 0x6fff_fff0;
pub(crate) const DT_RELACOUNT: u64 = 0x6fff_fff9;
pub(crate) const DT_FLAGS_1: u64 = 0x6fff_fffb;
pub(crate) const DT_VERNEED: u64 = 0x6fff_fffe;

/// The two libraries.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Lib {
    /// TVM's export_library output (tests/data/mlp.so).
    Mlp,
    /// Built here from C: see [`built`].
    C,
}

/// `mlp.so`, copied to the heap: the parser needs the alignment a file read gives.
pub(crate) fn mlp() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| include_bytes!("../data/mlp.so").to_vec())
}

/// A C library with both hash tables, a version script (definitions), an import of `strlen`
/// (requirements on libc), pointers to its own data (packed relative relocations) and
/// thread-local data of its own (a TLS module-id relocation with symbol 0).
pub(crate) fn built() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("lib.c");
        std::fs::write(
            &c,
            "#include <string.h>\n\
             static __thread long counts[4];\n\
             static long one = 1;\n\
             long *first = &one, *second = &one, *third = &one;\n\
             long count(const char *s) { return counts[strlen(s) & 3]++; }\n",
        )
        .unwrap();
        let script = dir.path().join("vers.map");
        std::fs::write(&script, "VERS_1 { global: count; first; second; third; local: *; };\n").unwrap();
        let so = dir.path().join("lib.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-Wl,--hash-style=both", "-Wl,-z,pack-relative-relocs", "-o"])
            .arg(&so)
            .arg(&c)
            .arg(format!("-Wl,--version-script={}", script.display()))
            .output()
            .unwrap_or_else(|e| panic!("the C compiler {cc:?} is needed for these tests: {e}"));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::read(&so).unwrap()
    })
}

pub(crate) fn bytes_of(lib: Lib) -> &'static [u8] {
    match lib {
        Lib::Mlp => mlp(),
        Lib::C => built(),
    }
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// One section header: the file offset of the header itself, and the section's fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Section {
    pub(crate) header: usize,
    pub(crate) addr: u64,
    pub(crate) offset: usize,
    pub(crate) size: usize,
}

/// The section named `name`.
pub(crate) fn section(b: &[u8], name: &str) -> Section {
    let (shoff, shnum, shstrndx) = (u64_at(b, 40) as usize, u16_at(b, 60) as usize, u16_at(b, 62) as usize);
    let strings = u64_at(b, shoff + 64 * shstrndx + 24) as usize;
    (0..shnum)
        .map(|i| shoff + 64 * i)
        .find(|h| {
            let n = strings + u32_at(b, *h) as usize;
            b[n..].starts_with(name.as_bytes()) && b[n + name.len()] == 0
        })
        .map(|h| Section {
            header: h,
            addr: u64_at(b, h + 16),
            offset: u64_at(b, h + 24) as usize,
            size: u64_at(b, h + 32) as usize,
        })
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// The file offset of the `k`-th program header of type `p_type`.
pub(crate) fn phdr(b: &[u8], p_type: u32, k: usize) -> usize {
    let (off, num) = (u64_at(b, 32) as usize, u16_at(b, 56) as usize);
    (0..num).map(|i| off + 56 * i).filter(|at| u32_at(b, *at) == p_type).nth(k).expect("such a program header")
}

/// The file offset of the loaded address `addr`.
pub(crate) fn file_offset(b: &[u8], addr: u64) -> usize {
    (0..)
        .map_while(|k| (k < u16_at(b, 56) as usize).then(|| u64_at(b, 32) as usize + 56 * k))
        .filter(|ph| u32_at(b, *ph) == PT_LOAD)
        .find_map(|ph| {
            let (off, vaddr, filesz) = (u64_at(b, ph + 8), u64_at(b, ph + 16), u64_at(b, ph + 32));
            (addr >= vaddr && addr < vaddr + filesz).then(|| (off + addr - vaddr) as usize)
        })
        .expect("an address in the file")
}

/// The file offset of the dynamic entry with `tag`.
pub(crate) fn dyn_entry(b: &[u8], tag: u64) -> usize {
    let d = section(b, ".dynamic");
    (d.offset..d.offset + d.size).step_by(16).find(|at| u64_at(b, *at) == tag).expect("such a dynamic entry")
}

/// The file offset of the symbol `name` in the symbol table `table` (`.dynsym`, `.symtab`)
/// whose strings are in `strings`.
pub(crate) fn symbol_in(b: &[u8], table: &str, strings: &str, name: &str) -> usize {
    let (t, s) = (section(b, table), section(b, strings));
    (t.offset..t.offset + t.size)
        .step_by(24)
        .find(|at| {
            let n = s.offset + u32_at(b, *at) as usize;
            b[n..].starts_with(name.as_bytes()) && b[n + name.len()] == 0
        })
        .unwrap_or_else(|| panic!("no symbol {name} in {table}"))
}

pub(crate) fn dynsym(b: &[u8], name: &str) -> usize {
    symbol_in(b, ".dynsym", ".dynstr", name)
}

/// The file offset of the first relocation of `.rela.dyn` with type `kind`.
pub(crate) fn rela_of_type(b: &[u8], kind: u32) -> usize {
    let r = section(b, ".rela.dyn");
    (r.offset..r.offset + r.size).step_by(24).find(|at| u32_at(b, at + 8) == kind).expect("such a relocation")
}

/// The GNU hash table: file offset, bucket count, symbol offset, Bloom words.
pub(crate) fn gnu_hash(b: &[u8]) -> (usize, usize, u32, usize) {
    let g = section(b, ".gnu.hash").offset;
    (g, u32_at(b, g) as usize, u32_at(b, g + 4), u32_at(b, g + 8) as usize)
}

pub(crate) fn le16(v: u16) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}
pub(crate) fn le32(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}
pub(crate) fn le64(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod arch {
    pub const RELATIVE: u32 = 8;
    pub const GLOB_DAT: u32 = 6;
    pub const DTPMOD: u32 = 16;
}
#[cfg(target_arch = "aarch64")]
pub(crate) mod arch {
    pub const RELATIVE: u32 = 1027;
    pub const GLOB_DAT: u32 = 1025;
    pub const DTPMOD: u32 = 1028;
}
pub(crate) use arch::*;

pub(crate) type Edits = Vec<(usize, Vec<u8>)>;

/// One damage: which library, the edits, and the fragments its message must hold.
pub(crate) struct Case {
    pub(crate) what: &'static str,
    pub(crate) lib: Lib,
    pub(crate) edits: fn(&[u8]) -> Edits,
    pub(crate) expect: &'static [&'static str],
}

pub(crate) const fn case(
    what: &'static str,
    lib: Lib,
    edits: fn(&[u8]) -> Edits,
    expect: &'static [&'static str],
) -> Case {
    Case { what, lib, edits, expect }
}
