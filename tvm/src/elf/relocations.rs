//! The relocations the loader applies (DT_RELA, DT_JMPREL, DT_RELR) and the initializers it
//! calls (DT_INIT, DT_FINI, DT_INIT_ARRAY, DT_FINI_ARRAY).
//!
//! Each relocation writes 8 bytes: its target must be 8-aligned inside a writable segment, away
//! from the dynamic section, written by no other relocation, and its value one we can check. Only
//! the types TVM's libraries use are accepted (absolute, GOT, PLT and relative addresses); TLS,
//! copy and IFUNC relocations (which run the library's code from inside the loader) are refused.
//! Where the linker left redundancy the loader ignores, it must agree: a relative relocation's
//! addend equals the value the linker also wrote at the target (or that value is 0), and the
//! undefined symbols are each used by some relocation. Every initializer must be the address of
//! a function (one the symbol tables name), each init/fini array slot set by exactly one
//! relocation.

use super::{bad, sections::Sections, symbols, u64_at, Lib};
use object::elf;
use relaxvm::Result;
use std::collections::{BTreeMap, BTreeSet};

#[cfg(not(target_arch = "aarch64"))]
mod types {
    pub const ABS64: u32 = object::elf::R_X86_64_64;
    pub const GLOB_DAT: u32 = object::elf::R_X86_64_GLOB_DAT;
    pub const JUMP_SLOT: u32 = object::elf::R_X86_64_JUMP_SLOT;
    pub const RELATIVE: u32 = object::elf::R_X86_64_RELATIVE;
    pub const DTPMOD: u32 = object::elf::R_X86_64_DTPMOD64;
    pub const DTPOFF: u32 = object::elf::R_X86_64_DTPOFF64;
}
#[cfg(target_arch = "aarch64")]
mod types {
    pub const ABS64: u32 = object::elf::R_AARCH64_ABS64;
    pub const GLOB_DAT: u32 = object::elf::R_AARCH64_GLOB_DAT;
    pub const JUMP_SLOT: u32 = object::elf::R_AARCH64_JUMP_SLOT;
    pub const RELATIVE: u32 = object::elf::R_AARCH64_RELATIVE;
    pub const DTPMOD: u32 = object::elf::R_AARCH64_TLS_DTPMOD;
    pub const DTPOFF: u32 = object::elf::R_AARCH64_TLS_DTPREL;
}
use types::*;

/// One relocation the loader will apply.
#[derive(Clone, Copy, Debug)]
struct Reloc {
    offset: u64,
    kind: u32,
    sym: usize,
    addend: i64,
}

/// Checks every relocation and initializer; `functions` are the addresses of known functions.
pub fn check(lib: &Lib<'_>, sections: &Sections, functions: &symbols::Functions) -> Result<()> {
    let d = &lib.dynamic;
    let mut targets: BTreeMap<u64, (&'static str, usize, Option<u64>)> = BTreeMap::new(); // target -> (table, index, value)
    let mut used = vec![false; lib.nsyms];
    let mut got_refs = BTreeSet::new();
    let mut plt_refs = BTreeSet::new();
    let got = sections.named(".got").map(|s| (s.addr, s.size));
    let got_plt = sections.named(".got.plt").map(|s| (s.addr, s.size));
    let mut jump_slots = 0u64;
    for (table, addr_tag, size_tag) in
        [("DT_RELA", elf::DT_RELA, elf::DT_RELASZ), ("DT_JMPREL", elf::DT_JMPREL, elf::DT_PLTRELSZ)]
    {
        let Some(addr) = d.get(addr_tag) else { continue };
        let size = d.get(size_tag).expect("paired (dynamic.rs)");
        if !size.is_multiple_of(24) || addr % 8 != 0 {
            return Err(bad(format!("{table} at {addr:#x} of {size} bytes: expected 8-aligned whole 24-byte entries")));
        }
        let off = lib.table(table, addr, size)?;
        let count = (size / 24) as usize;
        if table == "DT_RELA" {
            if let Some(n) = d.get(elf::DT_RELACOUNT) {
                // glibc applies the first DT_RELACOUNT entries as relative ones without looking
                // at their type (and asserts it).
                let leading = (0..count).take_while(|i| rel(lib, off, *i).kind == RELATIVE).count();
                if n > leading as u64 {
                    return Err(bad(format!(
                        "DT_RELACOUNT is {n}, but only the first {leading} relocations are relative"
                    )));
                }
            }
        }
        for i in 0..count {
            let r = rel(lib, off, i);
            let at = |msg: String| bad(format!("{table} entry {i} (type {}, target {:#x}): {msg}", r.kind, r.offset));
            let tls = lib.seg.tls.is_some() && [DTPMOD, DTPOFF].contains(&r.kind);
            let allowed = if table == "DT_JMPREL" {
                r.kind == JUMP_SLOT
            } else {
                [ABS64, GLOB_DAT, RELATIVE].contains(&r.kind) || tls
            };
            if !allowed {
                return Err(at(format!(
                    "relocation type {} is not one relaxvm accepts in {table} (accepted: {})",
                    r.kind,
                    if table == "DT_JMPREL" {
                        format!("{JUMP_SLOT}")
                    } else {
                        format!("{ABS64}, {GLOB_DAT}, {RELATIVE}; {DTPMOD} and {DTPOFF} with PT_TLS")
                    }
                )));
            }
            if r.sym >= lib.nsyms {
                return Err(at(format!("symbol index {} is past the {} dynamic symbols", r.sym, lib.nsyms)));
            }
            place(lib, r.offset, table, i)?;
            let within =
                |sec: Option<(u64, u64)>| sec.is_none_or(|(a, n)| r.offset >= a && r.offset + 8 <= a.saturating_add(n));
            let value = match r.kind {
                DTPMOD | DTPOFF => {
                    // Thread-local data of the library itself (symbol 0): the module id, and an
                    // offset inside its TLS block.
                    let (_, tls_size) = lib.seg.tls.expect("checked above");
                    if r.sym != 0
                        || (r.kind == DTPOFF && r.addend as u64 >= tls_size)
                        || (r.kind == DTPMOD && r.addend != 0)
                    {
                        return Err(at(format!(
                            "a TLS relocation with symbol {} and addend {:#x}: expected symbol 0 and an offset inside the {tls_size}-byte TLS block",
                            r.sym, r.addend
                        )));
                    }
                    if !within(got) {
                        return Err(at("the target is outside the GOT (.got)".into()));
                    }
                    None
                }
                RELATIVE => {
                    if r.sym != 0 || !lib.seg.in_image(r.addend as u64) {
                        return Err(at(format!(
                            "a relative relocation with symbol {} and addend {:#x}: expected symbol 0 and an address in the loaded image",
                            r.sym, r.addend
                        )));
                    }
                    if let Some(foff) = lib.seg.file_offset(r.offset, 8) {
                        let in_place = u64_at(lib.bytes, foff);
                        if in_place != 0 && in_place != r.addend as u64 {
                            return Err(at(format!(
                                "addend {:#x}, but the linker wrote {in_place:#x} at the target",
                                r.addend
                            )));
                        }
                    }
                    Some(r.addend as u64)
                }
                _ => {
                    let s = symbols::sym(lib, r.sym);
                    if r.sym == 0 || s.shndx == elf::SHN_ABS || (r.kind != ABS64 && r.addend != 0) {
                        return Err(at(format!(
                            "symbol {} (section {:#x}), addend {:#x}: expected a symbol other than 0 and not absolute, and addend 0 for GOT and PLT entries",
                            r.sym, s.shndx, r.addend
                        )));
                    }
                    used[r.sym] = true;
                    let refs = if r.kind == JUMP_SLOT { &mut plt_refs } else { &mut got_refs };
                    if r.kind != ABS64 && !refs.insert(r.sym) {
                        return Err(at(format!("a second GOT or PLT entry for symbol {}", r.sym)));
                    }
                    if (r.kind == GLOB_DAT && !within(got)) || (r.kind == JUMP_SLOT && !within(got_plt)) {
                        return Err(at("the target is outside the GOT (.got or .got.plt) its type writes".into()));
                    }
                    if r.kind == JUMP_SLOT {
                        jump_slots += 1;
                    }
                    s.defined().then(|| s.value.wrapping_add(r.addend as u64))
                }
            };
            target(lib, &mut targets, r.offset, table, i, value)?;
        }
    }
    if let (Some((addr, size)), Some(pltgot)) = (got_plt, d.get(elf::DT_PLTGOT)) {
        if pltgot != addr || size != 24 + 8 * jump_slots {
            return Err(bad(format!(
                "DT_PLTGOT is {pltgot:#x} and the PLT GOT (.got.plt at {addr:#x}) has {size} bytes, for {jump_slots} PLT relocations: expected its address and 3 reserved entries plus one per relocation"
            )));
        }
    }
    if let Some(pltgot) = d.get(elf::DT_PLTGOT) {
        if !lib.seg.segment(pltgot, 24).is_some_and(|s| s.writable()) {
            return Err(bad(format!("DT_PLTGOT {pltgot:#x} is not 24 writable bytes")));
        }
    }
    relr(lib, &mut targets)?;
    for (i, used) in used.iter().enumerate().skip(1) {
        let s = symbols::sym(lib, i);
        if !s.defined() && !used {
            return Err(bad(format!(
                "dynamic symbol {i} is undefined but no relocation uses it (a corrupted symbol index?)"
            )));
        }
    }
    initializers(lib, sections, &targets, functions)
}

fn rel(lib: &Lib<'_>, off: usize, i: usize) -> Reloc {
    let at = off + 24 * i;
    let info = u64_at(lib.bytes, at + 8);
    Reloc {
        offset: u64_at(lib.bytes, at),
        kind: (info & 0xffff_ffff) as u32,
        sym: usize::try_from(info >> 32).unwrap_or(usize::MAX),
        addend: u64_at(lib.bytes, at + 16) as i64,
    }
}

/// Checks where an 8-byte write at `addr` lands.
fn place(lib: &Lib<'_>, addr: u64, table: &'static str, i: usize) -> Result<()> {
    let at = |msg: &str| bad(format!("{table} entry {i}: the target {addr:#x} {msg}"));
    if !addr.is_multiple_of(8) || !lib.seg.segment(addr, 8).is_some_and(|s| s.writable()) {
        return Err(at("is not 8 aligned bytes of a writable segment"));
    }
    let (dyn_addr, dyn_size) = lib.seg.dynamic;
    if addr + 8 > dyn_addr && addr < dyn_addr + dyn_size {
        return Err(at("lies in the dynamic section"));
    }
    Ok(())
}

/// Records an 8-byte write at `addr`.
fn target(
    lib: &Lib<'_>,
    targets: &mut BTreeMap<u64, (&'static str, usize, Option<u64>)>,
    addr: u64,
    table: &'static str,
    i: usize,
    value: Option<u64>,
) -> Result<()> {
    place(lib, addr, table, i)?;
    if targets.insert(addr, (table, i, value)).is_some() {
        return Err(bad(format!("{table} entry {i}: the target {addr:#x} is written by another relocation too")));
    }
    Ok(())
}

/// DT_RELR: packed relative relocations, whose addend is the value at the target.
fn relr(lib: &Lib<'_>, targets: &mut BTreeMap<u64, (&'static str, usize, Option<u64>)>) -> Result<()> {
    let Some(addr) = lib.dynamic.get(super::dynamic::DT_RELR) else { return Ok(()) };
    let size = lib.dynamic.get(super::dynamic::DT_RELRSZ).expect("paired (dynamic.rs)");
    if !size.is_multiple_of(8) || addr % 8 != 0 {
        return Err(bad(format!("DT_RELR at {addr:#x} of {size} bytes: expected 8-aligned whole words")));
    }
    let off = lib.table("DT_RELR", addr, size)?;
    let mut base: Option<u64> = None;
    for i in 0..(size / 8) as usize {
        let word = u64_at(lib.bytes, off + 8 * i);
        let mut put = |t: u64| -> Result<()> {
            let value = lib.seg.file_offset(t, 8).map(|o| u64_at(lib.bytes, o));
            if !value.is_some_and(|v| lib.seg.in_image(v)) {
                return Err(bad(format!(
                    "DT_RELR word {i}: the value at target {t:#x} is not an address in the image"
                )));
            }
            target(lib, targets, t, "DT_RELR", i, value)
        };
        if word & 1 == 0 {
            put(word)?;
            base = Some(word + 8);
        } else {
            let b = base.ok_or_else(|| bad(format!("DT_RELR word {i}: a bitmap before any address")))?;
            for bit in 1..64 {
                if word >> bit & 1 == 1 {
                    put(b + 8 * (bit - 1))?;
                }
            }
            base = Some(b + 63 * 8);
        }
    }
    Ok(())
}

fn initializers(
    lib: &Lib<'_>,
    sections: &Sections,
    targets: &BTreeMap<u64, (&'static str, usize, Option<u64>)>,
    functions: &symbols::Functions,
) -> Result<()> {
    let d = &lib.dynamic;
    // With the full symbol table, an initializer must be a function it names. A stripped
    // library keeps only its section headers: DT_INIT and DT_FINI must then start `.init` and
    // `.fini`, and array entries lie in an executable section (their relocations' addends are
    // still checked against what the linker wrote at the slots).
    let function = |what: String, addr: u64, section: Option<&str>| {
        let executable = lib.seg.segment(addr, 1).is_some_and(|s| s.executable());
        let named = functions.starts.contains(&addr)
            || (!functions.full
                && match section {
                    Some(name) => sections.named(name).is_some_and(|s| s.addr == addr),
                    None => sections.executable_contains(addr),
                });
        if executable && named {
            Ok(())
        } else {
            Err(bad(format!(
                "{what} is {addr:#x}, which is not the address of a function the symbol tables name{}",
                if functions.full { "" } else { " (nor, the library being stripped, the start of its section)" }
            )))
        }
    };
    for tag in [elf::DT_INIT, elf::DT_FINI] {
        if let Some(addr) = d.get(tag) {
            let section = if tag == elf::DT_INIT { ".init" } else { ".fini" };
            function(super::dynamic::name(tag).to_string(), addr, Some(section))?;
        }
    }
    for (tag, size_tag) in [(elf::DT_INIT_ARRAY, elf::DT_INIT_ARRAYSZ), (elf::DT_FINI_ARRAY, elf::DT_FINI_ARRAYSZ)] {
        let Some(addr) = d.get(tag) else { continue };
        let size = d.get(size_tag).expect("paired (dynamic.rs)");
        let name = super::dynamic::name(tag);
        if !size.is_multiple_of(8) || addr % 8 != 0 {
            return Err(bad(format!("{name} at {addr:#x} of {size} bytes: expected 8-aligned whole pointers")));
        }
        lib.table(name, addr, size)?;
        for k in 0..size / 8 {
            let slot = addr + 8 * k;
            match targets.get(&slot) {
                Some((_, _, Some(value))) => function(format!("{name} entry {k}"), *value, None)?,
                _ => {
                    return Err(bad(format!(
                        "{name} entry {k} (at {slot:#x}) is set by no relocation to a defined address: the loader would call its unrelocated value"
                    )))
                }
            }
        }
    }
    Ok(())
}
