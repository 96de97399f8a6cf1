//! Tests of the checks on a real TVM model (tests/data/mlp.so, written by TVM's
//! export_library) and mutants of it: each damage is refused with an error naming the field.

use super::*;

/// The model's bytes, in a heap buffer (aligned as the parser needs, like a file read).
fn mlp() -> Vec<u8> {
    include_bytes!("../../tests/data/mlp.so").to_vec()
}

fn u64_at_mut(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The file offset of the dynamic entry with `tag`.
fn dyn_entry(b: &[u8], tag: u32) -> usize {
    let file = headers::parse(b).unwrap();
    let endian = file.endian();
    let ph = file.elf_program_headers().iter().find(|p| p.p_type(endian) == elf::PT_DYNAMIC).unwrap();
    let off = ph.p_offset(endian) as usize;
    (off..off + ph.p_filesz(endian) as usize).step_by(16).find(|at| u64_at(b, *at) == u64::from(tag)).unwrap()
}

/// The file offset of the section named `name`.
fn section(b: &[u8], name: &str) -> (usize, usize) {
    let file = headers::parse(b).unwrap();
    let s = sections::Sections::read(&file).unwrap();
    let s = s.named(name).unwrap();
    (s.offset as usize, s.size as usize)
}

fn err(b: &[u8]) -> String {
    validate(b).expect_err("refused").to_string()
}

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

#[test]
fn a_real_model_validates() {
    let info = validate(&mlp()).unwrap();
    assert!(info.functions.iter().any(|f| f == "__tvm_ffi_matmul"), "{info:?}");
    assert!(exported_symbol_range(&mlp(), HOLE_SYMBOL).unwrap().is_some());
}

/// `mlp.so` with `f` applied, validated: the error message.
fn mutant(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut b = mlp();
    f(&mut b);
    err(&b)
}

/// The file offset of relocation `i` of `.rela.dyn`.
fn rela(_b: &[u8], i: usize) -> usize {
    section(&mlp(), ".rela.dyn").0 + 24 * i
}

/// The file offset of dynamic symbol `name`.
fn dynsym(b: &[u8], name: &str) -> usize {
    let (off, size) = section(&mlp(), ".dynsym");
    let (stroff, _) = section(&mlp(), ".dynstr");
    (off..off + size)
        .step_by(24)
        .find(|at| {
            let n = stroff + u32_at(b, *at) as usize;
            b[n..].starts_with(name.as_bytes()) && b[n + name.len()] == 0
        })
        .unwrap()
}

fn has(e: &str, parts: &[&str]) {
    assert!(parts.iter().all(|p| e.contains(p)), "{e:?} lacks one of {parts:?}");
}

#[test]
fn dynamic_entry_sizes_and_tags() {
    has(&mutant(|b| u64_at_mut(b, dyn_entry(&mlp(), elf::DT_RELAENT) + 8, 16)), &["DT_RELAENT is 16, expected 24"]);
    has(&mutant(|b| u64_at_mut(b, dyn_entry(&mlp(), elf::DT_SYMENT) + 8, 25)), &["DT_SYMENT is 25, expected 24"]);
    has(&mutant(|b| u64_at_mut(b, dyn_entry(&mlp(), elf::DT_PLTREL) + 8, 17)), &["DT_PLTREL is 17, expected 7"]);
    // DT_RELACOUNT turned into DT_RELCOUNT, a tag of the REL format glibc asserts is absent.
    has(
        &mutant(|b| u64_at_mut(b, dyn_entry(&mlp(), elf::DT_RELACOUNT), 0x6fff_fffa)),
        &["tag 0x6ffffffa is not one relaxvm can check", "refused", "file offset"],
    );
    // DT_FINI turned into a second DT_INIT.
    has(&mutant(|b| u64_at_mut(b, dyn_entry(&mlp(), elf::DT_FINI), elf::DT_INIT.into())), &["a second DT_INIT entry"]);
    // DT_NULL and the padding after it replaced by DT_BIND_NOW: no terminator.
    has(
        &mutant(|b| {
            let null = dyn_entry(&mlp(), elf::DT_NULL);
            let (off, size) = section(&mlp(), ".dynamic");
            let end = off + size;
            u64_at_mut(b, null, elf::DT_BIND_NOW.into());
            for at in (null + 16..end).step_by(16) {
                u64_at_mut(b, at, elf::DT_DEBUG.into());
            }
        }),
        &["a second DT_DEBUG"],
    );
    has(&mutant(|b| u64_at_mut(b, dyn_entry(&mlp(), elf::DT_RELACOUNT) + 8, 4)), &["DT_RELACOUNT is 4", "first 3"]);
    // DT_RELAENT's tag turned into DT_NEEDED: glibc would read the missing entry size through a
    // null pointer (a death the bit-flip campaign found).
    has(&mutant(|b| b[dyn_entry(&mlp(), elf::DT_RELAENT)] = 1), &["DT_RELA without DT_RELAENT"]);
    has(
        &mutant(|b| u64_at_mut(b, dyn_entry(&mlp(), elf::DT_STRSZ) + 8, 20)),
        &["DT_STRTAB is 0x3d8 with DT_STRSZ 20, but the .dynstr section is at 0x3d8 with 236 bytes"],
    );
}

#[test]
fn relocations() {
    // The first relocation no longer relative: glibc would assert (DT_RELACOUNT says 3).
    has(&mutant(|b| b[rela(&mlp(), 0) + 8] = 9), &["DT_RELACOUNT is 3, but only the first 0 relocations are relative"]);
    // GLOB_DAT (6) to 9 (GOTPCREL, not a dynamic relocation).
    has(
        &mutant(|b| b[rela(&mlp(), 3) + 8] = 9),
        &["DT_RELA entry 3 (type 9, target 0x7fc8)", "type 9 is not one relaxvm accepts"],
    );
    // IRELATIVE (37): the loader would call the library's resolver.
    has(&mutant(|b| b[rela(&mlp(), 3) + 8] = 37), &["type 37 is not one"]);
    // The init_array entry's addend moved by one byte: the linker's copy at the target disagrees.
    has(&mutant(|b| b[rela(&mlp(), 0) + 16] ^= 1), &["addend 0x1101, but the linker wrote 0x1100 at the target"]);
    // Both moved: no longer a function.
    has(
        &mutant(|b| {
            b[rela(&mlp(), 0) + 16] ^= 1;
            b[section(&mlp(), ".init_array").0] ^= 1;
        }),
        &["DT_INIT_ARRAY entry 0 is 0x1101, which is not the address of a function"],
    );
    // A target in the read-only first segment, and one inside the dynamic section.
    has(&mutant(|b| b[rela(&mlp(), 0) + 1] = 0x0e), &["target 0xe38 is not 8 aligned bytes of a writable segment"]);
    has(&mutant(|b| b[rela(&mlp(), 0)] = 0x50), &["lies in the dynamic section"]);
    // The init_array relocation retargeted at the fini_array slot: the linker's copy disagrees.
    has(&mutant(|b| b[rela(&mlp(), 0)] = 0x40), &["addend 0x1100, but the linker wrote 0x10c0 at the target"]);
    // A GOT relocation retargeted at another's slot, or outside the GOT.
    has(
        &mutant(|b| b[rela(&mlp(), 3)] ^= 0x10),
        &["DT_RELA entry 5: the target 0x7fd8 is written by another relocation too"],
    );
    has(&mutant(|b| b[rela(&mlp(), 3)] ^= 0x08), &["DT_RELA entry 3: the target 0x7fc0 lies in the dynamic section"]);
    // The __gmon_start__ GOT entry (symbol 5) retargeted at symbol 4 (already in the PLT) or 1.
    has(&mutant(|b| b[rela(&mlp(), 6) + 12] = 1), &["a second GOT or PLT entry for symbol 1"]);
    has(&mutant(|b| b[rela(&mlp(), 6) + 12] = 4), &["dynamic symbol 5 is undefined but no relocation uses it"]);
    has(&mutant(|b| b[rela(&mlp(), 6) + 12] = 13), &["symbol index 13 is past the 13 dynamic symbols"]);
    // The PLT relocation's type made GLOB_DAT.
    has(
        &mutant(|b| b[section(&mlp(), ".rela.plt").0 + 8] = 6),
        &["DT_JMPREL entry 0 (type 6", "not one relaxvm accepts"],
    );
}

#[test]
fn initializers_and_segments() {
    has(
        &mutant(|b| b[dyn_entry(&mlp(), elf::DT_INIT) + 8] = 1),
        &["DT_INIT is 0x1001, which is not the address of a function"],
    );
    has(&mutant(|b| b[dyn_entry(&mlp(), elf::DT_FINI) + 9] ^= 0x10), &["DT_FINI is 0x52b0"]);
    // The text segment read from file offset 0 instead of 0x1000.
    let bytes = mlp();
    let file = headers::parse(&bytes).unwrap();
    let endian = file.endian();
    let text = file.elf_program_headers().iter().position(|p| p.p_flags(endian) & elf::PF_X != 0).unwrap();
    let text = 64 + 56 * text;
    has(&mutant(|b| b[text + 9] = 0), &["overlaps or precedes the previous one"]);
    // The code no longer executable: the functions are refused.
    has(&mutant(|b| b[text + 4] = 4), &["outside the executable segments"]);
    has(&mutant(|b| b[text + 48] = 0x3), &["alignment 0x1003 is not a power of two"]);
    // The stack made executable.
    let stack = (0..9).map(|i| 64 + 56 * i).find(|at| u32_at(&mlp(), *at) == elf::PT_GNU_STACK).unwrap();
    has(&mutant(|b| b[stack + 4] |= 1), &["executable stack"]);
}

#[test]
fn symbols_and_hash() {
    // A kernel made an indirect function: looking it up would call it.
    has(&mutant(|b| b[dynsym(&mlp(), "__tvm_ffi_add") + 4] = 0x1a), &["(__tvm_ffi_add): type 10", "refused"]);
    // Its address moved: the full symbol table disagrees.
    has(
        &mutant(|b| b[dynsym(&mlp(), "__tvm_ffi_add") + 8] ^= 4),
        &["__tvm_ffi_add", "but 0x1110, 2837, 0x12 in the symbol table"],
    );
    // An import made hidden: the loader would bind it to the library's own load address (a
    // death the bit-flip campaign found: __cxa_finalize called at exit jumped to the header).
    has(
        &mutant(|b| b[dynsym(&mlp(), "__cxa_finalize") + 5] = 2),
        &["(__cxa_finalize): an undefined symbol", "visibility 2"],
    );
    // An undefined symbol made defined in section 1 (where its value 0 is not).
    has(
        &mutant(|b| b[dynsym(&mlp(), "__gmon_start__") + 6] = 1),
        &["(__gmon_start__): address 0x0..0x0 is not inside its section"],
    );
    // The GNU hash table: Bloom size, buckets, a renamed symbol.
    let gnu = section(&mlp(), ".gnu.hash").0;
    has(&mutant(|b| b[gnu + 8] = 3), &["3 Bloom words", "power-of-two"]);
    has(&mutant(|b| b[gnu + 4] = 100), &["below the first hashed symbol 100"]);
    let name = section(&mlp(), ".dynstr").0 + u32_at(&mlp(), dynsym(&mlp(), "__tvm_ffi_relu")) as usize;
    has(&mutant(|b| b[name + 10] = b'X'), &["(__tvm_ffi_Xelu): defined in the dynamic symbol table, but absent"]);
    // A chain word changed: the symbol's hash disagrees.
    let m = mlp();
    let chains = gnu + 16 + 8 * u32_at(&m, gnu + 8) as usize + 4 * u32_at(&m, gnu) as usize;
    has(
        &mutant(|b| b[chains] ^= 0x20),
        &["DT_GNU_HASH: symbol 6 (__tvm_ffi_matmul) is in the chain of bucket", "hashes to"],
    );
}

/// Every single-bit flip of what the loader reads is refused or leaves a library that still
/// validates; this lists the survivors (the bit-flip campaign loads them in child processes).
#[test]
fn every_flip_of_the_loader_structures_is_checked_without_panic() {
    let good = mlp();
    let mut accepted = Vec::new();
    let mut total = 0;
    for (what, range) in loader_regions(&good).unwrap() {
        for at in range {
            for bit in 0..8 {
                let mut m = good.clone();
                m[at] ^= 1 << bit;
                total += 1;
                if validate(&m).is_ok() {
                    accepted.push((what, at, bit));
                }
            }
        }
    }
    let mut by_byte: std::collections::BTreeMap<(&str, usize), Vec<i32>> = Default::default();
    for (what, at, bit) in &accepted {
        by_byte.entry((what, *at)).or_default().push(*bit);
    }
    println!("{} of {total} flips validate", accepted.len());
    for ((what, at), bits) in by_byte {
        println!("{what} {at:#x} {bits:?}");
    }
    assert!(accepted.len() < total / 4, "{} of {total}", accepted.len());
}

/// A library built here with the C compiler, with both hash tables, version requirements (on
/// libc) and, with `versioned`, version definitions.
fn built(versioned: bool) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("relaxvm-elf-test-{}-{versioned}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("lib.c");
    std::fs::write(&c, "#include <string.h>\nint f(const char *s) { return (int)strlen(s); }\n").unwrap();
    let so = dir.join("lib.so");
    let mut cmd = std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cmd.args(["-shared", "-fPIC", "-O1", "-Wl,--hash-style=both", "-o"]).arg(&so).arg(&c);
    if versioned {
        let script = dir.join("vers.map");
        std::fs::write(&script, "VERS_1 { global: f; local: *; };\n").unwrap();
        cmd.arg(format!("-Wl,--version-script={}", script.display()));
    }
    let out = cmd.output().expect("the C compiler is needed for this test");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&so).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    bytes
}

fn edited(b: &[u8], at: usize, bytes: &[u8]) -> String {
    let mut m = b.to_vec();
    m[at..at + bytes.len()].copy_from_slice(bytes);
    err(&m)
}

#[test]
fn sysv_hash_and_version_requirements() {
    let b = built(false);
    validate(&b).unwrap();
    let (hash, _) = section(&b, ".hash");
    let nchain = u32_at(&b, hash + 4);
    has(&edited(&b, hash + 4, &(nchain + 1).to_le_bytes()), &["DT_HASH", &format!("{} chains", nchain + 1)]);
    // A chain that loops back to itself: glibc would walk it forever.
    let nbucket = u32_at(&b, hash) as usize;
    let chains = hash + 8 + 4 * nbucket;
    let first = (0..nbucket).map(|i| u32_at(&b, hash + 8 + 4 * i)).find(|s| *s != 0).unwrap();
    has(
        &edited(&b, chains + 4 * first as usize, &first.to_le_bytes()),
        &["DT_HASH: the chain of bucket", "already reached"],
    );
    // Version requirements: the count, the library named, a symbol's version index.
    let count = dyn_entry(&b, elf::DT_VERNEEDNUM) + 8;
    has(&edited(&b, count, &9u64.to_le_bytes()), &["DT_VERNEED entry 0 of 9 has next offset 0"]);
    let (verneed, _) = section(&b, ".gnu.version_r");
    has(&edited(&b, verneed + 4, &0u32.to_le_bytes()), &["of a library named by DT_NEEDED"]);
    let (versym, _) = section(&b, ".gnu.version");
    has(&edited(&b, versym + 2, &0x7fffu16.to_le_bytes()), &["DT_VERSYM: symbol 1 has version index 32767"]);
    let hash_field = verneed + u32_at(&b, verneed + 8) as usize;
    has(&edited(&b, hash_field, &1u32.to_le_bytes()), &["DT_VERNEED version at", "hash 0x1"]);
}

#[test]
fn version_definitions() {
    let b = built(true);
    validate(&b).unwrap();
    let count = dyn_entry(&b, elf::DT_VERDEFNUM) + 8;
    has(&edited(&b, count, &1u64.to_le_bytes()), &["DT_VERDEF entry 0 of 1 has next offset", "must end (0) exactly"]);
    let (verdef, _) = section(&b, ".gnu.version_d");
    has(&edited(&b, verdef, &2u16.to_le_bytes()), &["DT_VERDEF entry at", "version 2"]);
    has(&edited(&b, verdef + 8, &7u32.to_le_bytes()), &["DT_VERDEF entry at", "hash 0x7"]);
}

/// The model without its full symbol table (`strip`), as a user may ship it.
fn stripped() -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("relaxvm-elf-strip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, out) = (dir.join("mlp.so"), dir.join("stripped.so"));
    std::fs::write(&src, mlp()).unwrap();
    let done = std::process::Command::new("strip").arg("-o").arg(&out).arg(&src).output();
    let done = done.expect("binutils' strip is needed for this test");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    bytes
}

#[test]
fn a_stripped_model_validates_with_weaker_initializer_checks() {
    let b = stripped();
    assert!(sections::Sections::read(&headers::parse(&b).unwrap()).unwrap().full_symbols(&b).unwrap().is_none());
    validate(&b).unwrap();
    // DT_INIT must still start .init.
    has(
        &edited(&b, dyn_entry(&b, elf::DT_INIT) + 8, &[0x08]),
        &["DT_INIT is 0x1008", "nor, the library being stripped"],
    );
    // An init_array entry outside the code.
    let rela = section(&b, ".rela.dyn").0;
    let init = section(&b, ".init_array").0;
    let mut m = b.clone();
    m[rela + 16..rela + 24].copy_from_slice(&0x5000u64.to_le_bytes());
    m[init..init + 8].copy_from_slice(&0x5000u64.to_le_bytes());
    has(&err(&m), &["DT_INIT_ARRAY entry 0 is 0x5000"]);
}
