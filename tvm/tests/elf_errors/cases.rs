//! The table of damages: the library, the edits, and the fragments each message must hold.

use super::library::*;

/// The damages, grouped by the part of the file they hit. Offsets are those of TVM's
/// `mlp.so` where the message shows them (its layout is fixed: the file is checked in).
pub(crate) const CASES: &[Case] = &[
    // The ELF header (tests/elf.rs and the unit tests cover class, encoding, machine, type).
    case(
        "the program header size",
        Lib::Mlp,
        |_| vec![(54, le16(40))],
        &["invalid ELF shared library: program header size 40 (ELF header byte 54), expected 56"],
    ),
    // Program headers: offset 8, vaddr 16, filesz 32, memsz 40, align 48, flags 4.
    case(
        "a loadable segment's alignment below a page",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_LOAD, 1) + 48, le64(0x800))],
        &["program header 1 (type 0x1): alignment 0x800 is not a power of two of at least a page (0x1000)"],
    ),
    case(
        "a loadable segment's address and offset incongruent",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_LOAD, 1) + 16, le64(0x1008))],
        &["program header 1 (type 0x1): address 0x1008 and file offset 0x1000 differ modulo the alignment 0x1000"],
    ),
    case(
        "a loadable segment's flags",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_LOAD, 1) + 4, le32(0x8 | 0x4 | 0x1))],
        &["program header 1 (type 0x1): flags 0xd: expected readable, with only the R, W and X bits"],
    ),
    case(
        "a read-only segment zero-filled",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_LOAD, 0) + 40, le64(0x600))],
        &["program header 0 (type 0x1): a read-only segment with file size 0x588 and memory size 0x600: expected equal (only writable segments are zero-filled)"],
    ),
    case(
        "a writable segment zero-filled beyond a gigabyte",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_LOAD, 3) + 40, le64(0x1d8 + (1 << 30) + 1))],
        &["program header 3 (type 0x1): memory size 0x400001d9 exceeds the file size 0x1d8 by more than 0x40000000"],
    ),
    case(
        "a loadable segment out of order",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_LOAD, 1) + 8, le64(0)), (phdr(b, PT_LOAD, 1) + 16, le64(0))],
        &["program header 1 (type 0x1): segment at 0x0 (file offset 0x0) overlaps or precedes the previous one at 0x0 (file offset 0x0): loadable segments must be sorted and disjoint"],
    ),
    case(
        "a segment beyond the address space",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_LOAD, 3) + 16, le64((1 << 47) - 0x100))],
        &["program header 3 (type 0x1): address 0x7fffffffff00 + memory size 0x1e0 is beyond the 47-bit address space"],
    ),
    case(
        "segments spanning far more than the file",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_LOAD, 3) + 16, le64(0x7e38 + (1 << 31)))],
        &["the loadable segments span 0x80008018 bytes, far more than the file's 45464"],
    ),
    case(
        "no loadable segment",
        Lib::Mlp,
        |b| (0..4).map(|k| (phdr(b, PT_LOAD, 0) + 56 * k, le32(0))).collect(),
        &["invalid ELF shared library: no loadable segment"],
    ),
    case(
        "a second dynamic segment",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_GNU_STACK, 0), le32(PT_DYNAMIC))],
        &["program header 7 (type 0x2): a second dynamic segment"],
    ),
    case(
        "a dynamic segment of a partial entry",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_DYNAMIC, 0) + 40, le64(0x188))],
        &["dynamic segment at 0x7e48 of 0x180 file and 0x188 memory bytes: expected 8-aligned, equal sizes, whole 16-byte entries"],
    ),
    case(
        "a second PT_GNU_RELRO",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_GNU_STACK, 0), le32(PT_GNU_RELRO))],
        &["program header 8 (type 0x6474e552): a second PT_GNU_RELRO"],
    ),
    case(
        "PT_GNU_RELRO ending inside a page of its segment",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_GNU_RELRO, 0) + 40, le64(0x1c0))],
        &["PT_GNU_RELRO ends at 0x7ff8, neither a page boundary nor the end of its segment"],
    ),
    case(
        "an executable stack",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_GNU_STACK, 0) + 4, le32(7))],
        &["program header 7 (type 0x6474e551): asks for an executable stack (PT_GNU_STACK with X): refused"],
    ),
    case(
        "an interpreter",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_GNU_STACK, 0), le32(3))],
        &["program header 7 (type 0x3): a shared library with an interpreter (PT_INTERP): refused"],
    ),
    case(
        "an unknown program header type",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_GNU_STACK, 0), le32(0x6000_0123))],
        &["program header 7 (type 0x60000123): program header type 0x60000123 is not one relaxvm knows (a corrupted type may be one the loader acts on)"],
    ),
    case(
        "a PT_PHDR that is not the program headers",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_GNU_STACK, 0), le32(6))],
        &["program header 7 (type 0x6): PT_PHDR at file offset 0x0 of 0x0 bytes, but the program headers are at 0x40 (0x1f8 bytes)"],
    ),
    case(
        "a truncated note",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_NOTE, 0) + 32, le64(8))],
        &["program header 5 (type 0x4): the note at file offset 568 is truncated"],
    ),
    case(
        "a note descriptor past its segment",
        Lib::Mlp,
        |b| vec![(section(b, ".note.gnu.build-id").offset + 4, le32(0x100))],
        &["program header 5 (type 0x4): the note at file offset 568 declares a 4-byte name and a 256-byte descriptor, more than the 36 bytes left in its segment"],
    ),
    case(
        "a note mapped from elsewhere",
        Lib::Mlp,
        |b| vec![(phdr(b, PT_NOTE, 0) + 16, le64(0x240))],
        &["a note segment at address 0x240 (36 bytes) is not mapped from its file offset 0x238"],
    ),
    case(
        "a second PT_TLS",
        Lib::C,
        |b| vec![(phdr(b, PT_GNU_STACK, 0), le32(PT_TLS))],
        &["a second PT_TLS"],
    ),
    case(
        "a thread-local segment aligned to no power of two",
        Lib::C,
        |b| vec![(phdr(b, PT_TLS, 0) + 48, le64(3))],
        &["thread-local segment with file size 0x0, memory size 0x20, alignment 0x3: expected file <= memory, a power-of-two alignment up to a page"],
    ),
    case(
        "the unwinding table outside the segments",
        Lib::Mlp,
        |b| vec![(phdr(b, 0x6474_e550, 0) + 16, le64(0x10_0000))],
        &["invalid ELF shared library: PT_GNU_EH_FRAME (address 0x100000, 92 bytes) lies outside the loaded segments"],
    ),
    // The dynamic section.
    case(
        "no DT_NULL",
        Lib::Mlp,
        |b| {
            let d = section(b, ".dynamic");
            let null = dyn_entry(b, DT_NULL);
            (null..d.offset + d.size).step_by(16).map(|at| (at, le64(DT_NEEDED))).collect()
        },
        &["invalid ELF shared library: the dynamic section has no DT_NULL entry: the loader would read past its end"],
    ),
    case(
        "a second DT_INIT",
        Lib::Mlp,
        |b| vec![(dyn_entry(b, 13), le64(12))],
        &["dynamic entry 1 (file offset 28248): a second DT_INIT entry (the loader would use only the last)"],
    ),
    case(
        "a table without its size",
        Lib::Mlp,
        |b| vec![(dyn_entry(b, DT_INIT_ARRAYSZ), le64(DT_DEBUG))],
        &["DT_INIT_ARRAY without DT_INIT_ARRAYSZ (or the reverse)"],
    ),
    case(
        "DT_FLAGS asking for text relocations",
        Lib::Mlp,
        |b| vec![(dyn_entry(b, DT_RELACOUNT), le64(DT_FLAGS)), (dyn_entry(b, DT_RELACOUNT) + 8, le64(0x4))],
        &["DT_FLAGS 0x4 has bits 0x4 relaxvm does not accept (accepted: 0xb)"],
    ),
    case(
        "DT_FLAGS_1 asking for an audit library",
        Lib::Mlp,
        |b| vec![(dyn_entry(b, DT_RELACOUNT), le64(DT_FLAGS_1)), (dyn_entry(b, DT_RELACOUNT) + 8, le64(0x5))],
        &["DT_FLAGS_1 0x5 has bits 0x4 relaxvm does not accept (accepted: 0x889)"],
    ),
    case(
        "no hash table",
        Lib::Mlp,
        |b| vec![(dyn_entry(b, DT_GNU_HASH), le64(DT_DEBUG))],
        &["invalid ELF shared library: neither DT_GNU_HASH nor DT_HASH: the loader could find no symbol"],
    ),
    // The GNU hash table (header: buckets, symbol offset, Bloom words, shift).
    case(
        "a GNU hash shift of 64",
        Lib::Mlp,
        |b| vec![(gnu_hash(b).0 + 12, le32(64))],
        &["DT_GNU_HASH: 3 buckets, 1 Bloom words, shift 64: expected at least one bucket, a power-of-two Bloom size and a shift below 64"],
    ),
    case(
        "GNU hash buckets all empty and no symbols",
        Lib::Mlp,
        |b| {
            let (g, n, _, words) = gnu_hash(b);
            let mut e = vec![(g + 4, le32(0))];
            e.extend((0..n).map(|i| (g + 16 + 8 * words + 4 * i, le32(0))));
            e
        },
        &["invalid ELF shared library: the hash table implies no dynamic symbols (not even the null symbol)"],
    ),
    case(
        "GNU hash buckets all empty and a huge symbol offset",
        Lib::Mlp,
        |b| {
            let (g, n, _, words) = gnu_hash(b);
            let mut e = vec![(g + 4, le32(0x10_0000))];
            e.extend((0..n).map(|i| (g + 16 + 8 * words + 4 * i, le32(0))));
            e
        },
        &["the hash table implies 1048576 dynamic symbols, more than the file could hold"],
    ),
    case(
        "a GNU bucket below the hashed symbols",
        Lib::C,
        |b| {
            // The first non-empty bucket that is not the last one's start (which sizes the table).
            let (g, n, _, words) = gnu_hash(b);
            let buckets: Vec<u32> = (0..n).map(|i| u32_at(b, g + 16 + 8 * words + 4 * i)).collect();
            let max = *buckets.iter().max().unwrap();
            let i = buckets.iter().position(|s| *s != 0 && *s != max).expect("two non-empty buckets");
            vec![(g + 16 + 8 * words + 4 * i, le32(1))]
        },
        &["DT_GNU_HASH: bucket", "starts at symbol 1, outside the hashed symbols"],
    ),
    case(
        "a GNU bucket emptied",
        Lib::C,
        |b| {
            let (g, n, _, words) = gnu_hash(b);
            let buckets: Vec<u32> = (0..n).map(|i| u32_at(b, g + 16 + 8 * words + 4 * i)).collect();
            let max = *buckets.iter().max().unwrap();
            let i = buckets.iter().position(|s| *s != 0 && *s != max).expect("two non-empty buckets");
            vec![(g + 16 + 8 * words + 4 * i, le32(0))]
        },
        &["DT_GNU_HASH: symbol", "is in no bucket's chain"],
    ),
    case(
        "a GNU chain word changed",
        Lib::Mlp,
        |b| {
            let (g, n, _, words) = gnu_hash(b);
            let chains = g + 16 + 8 * words + 4 * n;
            vec![(chains, le32(u32_at(b, chains) ^ 0x20))]
        },
        &["DT_GNU_HASH: symbol 6 (__tvm_ffi_matmul) is in the chain of bucket 0, but its name hashes to bucket 0 (chain word"],
    ),
    case(
        "a Bloom filter emptied",
        Lib::Mlp,
        |b| {
            let (g, _, _, words) = gnu_hash(b);
            vec![(g + 16, vec![0; 8 * words])]
        },
        &["DT_GNU_HASH: the Bloom filter lacks symbol 6 (__tvm_ffi_matmul)"],
    ),
    // The SysV hash table (header: buckets, chains).
    case(
        "SysV hash chains too few",
        Lib::C,
        |b| {
            let h = section(b, ".hash").offset;
            vec![(h + 4, le32(u32_at(b, h + 4) - 1))]
        },
        &["DT_HASH:", "chains, expected at least one bucket and one chain per symbol ("],
    ),
    case(
        "a SysV chain that loops",
        Lib::C,
        |b| {
            let h = section(b, ".hash").offset;
            let nbucket = u32_at(b, h) as usize;
            let first = (0..nbucket).map(|i| u32_at(b, h + 8 + 4 * i)).find(|s| *s != 0).unwrap();
            vec![(h + 8 + 4 * nbucket + 4 * first as usize, le32(first))]
        },
        &["DT_HASH: the chain of bucket", ", out of range or already reached (a cycle?)"],
    ),
    case(
        "a SysV bucket starting at another bucket's symbol",
        Lib::C,
        |b| {
            let h = section(b, ".hash").offset;
            let nbucket = u32_at(b, h) as usize;
            let (last, start) =
                (0..nbucket).map(|i| (i, u32_at(b, h + 8 + 4 * i))).rfind(|(_, s)| *s != 0).unwrap();
            assert!(last > 0, "the last non-empty bucket is not bucket 0");
            vec![(h + 8, le32(start))]
        },
        &["DT_HASH: symbol", "is in the chain of bucket 0, but its name hashes to another"],
    ),
    case(
        "a SysV bucket emptied",
        Lib::C,
        |b| {
            let h = section(b, ".hash").offset;
            let nbucket = u32_at(b, h) as usize;
            let i = (0..nbucket).find(|i| u32_at(b, h + 8 + 4 * i) != 0).unwrap();
            vec![(h + 8 + 4 * i, le32(0))]
        },
        &["DT_HASH: symbol", "is in no bucket's chain"],
    ),
    // The dynamic symbols (name 0, info 4, other 5, section 6, value 8, size 16).
    case(
        "symbol 0 not null",
        Lib::Mlp,
        |b| vec![(section(b, ".dynsym").offset + 4, vec![0x10])],
        &["invalid ELF shared library: dynamic symbol 0 is not the null symbol"],
    ),
    case(
        "unknown st_other bits",
        Lib::Mlp,
        |b| vec![(dynsym(b, "__tvm_ffi_add") + 5, vec![0x10])],
        &["dynamic symbol 9 (__tvm_ffi_add): st_other 0x10 has unknown bits"],
    ),
    case(
        "binding 3",
        Lib::Mlp,
        |b| vec![(dynsym(b, "__tvm_ffi_add") + 4, vec![0x32])],
        &["dynamic symbol 9 (__tvm_ffi_add): binding 3: expected local (0), global (1) or weak (2)"],
    ),
    case(
        "an indirect function",
        Lib::Mlp,
        |b| vec![(dynsym(b, "__tvm_ffi_add") + 4, vec![0x1a])],
        &["dynamic symbol 9 (__tvm_ffi_add): type 10: expected no type (0), object (1), function (2) or section (3) (thread-local and indirect functions are refused)"],
    ),
    case(
        "a function moved in the dynamic symbol table only",
        Lib::Mlp,
        |b| vec![(dynsym(b, "__tvm_ffi_add") + 8, le64(0x1114))],
        &["dynamic symbol 9 (__tvm_ffi_add): address 0x1114, size 2837, info 0x12 in the dynamic symbol table, but 0x1110, 2837, 0x12 in the symbol table"],
    ),
    case(
        "an import with a value",
        Lib::Mlp,
        |b| vec![(dynsym(b, "__gmon_start__") + 8, le64(0x1000))],
        &["dynamic symbol 5 (__gmon_start__): an undefined symbol with binding 2, type 0, visibility 0, value 0x1000: expected global or weak, not a section, default visibility, value 0"],
    ),
    case(
        "an import bound differently in the full symbol table",
        Lib::Mlp,
        |b| vec![(dynsym(b, "__cxa_finalize") + 4, vec![0x10])],
        &["dynamic symbol 1 (__cxa_finalize): imported with st_info 0x10, but the symbol table says 0x20"],
    ),
    case(
        "an import the full symbol table does not import",
        Lib::Mlp,
        |b| {
            let strtab = section(b, ".strtab");
            let at = strtab.offset + u32_at(b, symbol_in(b, ".symtab", ".strtab", "__gmon_start__")) as usize;
            vec![(at + 13, b"X".to_vec())]
        },
        &["dynamic symbol 5 (__gmon_start__): imported, but the symbol table imports no such name"],
    ),
    case(
        "a symbol in a section past the section table",
        Lib::Mlp,
        |b| vec![(dynsym(b, "__tvm_ffi_add") + 6, le16(0x0fff))],
        &["dynamic symbol 9 (__tvm_ffi_add): section index 4095 does not exist"],
    ),
    case(
        "a common symbol",
        Lib::Mlp,
        |b| vec![(dynsym(b, "__tvm_ffi_add") + 6, le16(0xfff2))],
        &["dynamic symbol 9 (__tvm_ffi_add): section index 0xfff2 is reserved (common or extended symbols are refused)"],
    ),
    case(
        "a function in a data section",
        Lib::Mlp,
        |b| vec![(section(b, ".text").header + 8, le64(0x2))],
        &["dynamic symbol 6 (__tvm_ffi_matmul): a function in the non-executable section .text"],
    ),
    case(
        "the .dynsym section disagreeing with the hash table",
        Lib::Mlp,
        |b| vec![(section(b, ".dynsym").header + 32, le64(0x120))],
        &["DT_SYMTAB is 0x2a0 and the hash table implies 13 symbols, but the .dynsym section is at 0x2a0 with 288 bytes"],
    ),
    case(
        "the full symbol table with entries of 16 bytes",
        Lib::Mlp,
        |b| vec![(section(b, ".symtab").header + 56, le64(16))],
        &["invalid ELF shared library: the symbol table (.symtab) has no string table or entries of 24 bytes"],
    ),
    case(
        // Refused by the `object` crate's parse, before sections.rs looks (whose own check of
        // this is a second line of defence).
        "the full symbol table past the end of the file",
        Lib::Mlp,
        |b| vec![(section(b, ".symtab").header + 24, le64(1 << 40))],
        &["invalid ELF shared library: Invalid ELF symbol table data (truncated or corrupt?)"],
    ),
    // Relocations (offset 0, info 8: type and symbol, addend 16).
    case(
        "DT_RELASZ not whole entries",
        Lib::Mlp,
        |b| vec![(dyn_entry(b, DT_RELASZ) + 8, le64(167))],
        &["DT_RELA at 0x4c8 of 167 bytes: expected 8-aligned whole 24-byte entries"],
    ),
    case(
        "a relative relocation with a symbol",
        Lib::Mlp,
        |b| vec![(rela_of_type(b, RELATIVE) + 12, le32(1))],
        &["DT_RELA entry 0 (type 8, target 0x7e38): a relative relocation with symbol 1 and addend 0x1100: expected symbol 0 and an address in the loaded image"],
    ),
    case(
        "a GOT relocation with an addend",
        Lib::Mlp,
        |b| vec![(rela_of_type(b, GLOB_DAT) + 16, le64(8))],
        &["DT_RELA entry 3 (type 6, target 0x7fc8): symbol 1 (section 0x0), addend 0x8: expected a symbol other than 0 and not absolute, and addend 0 for GOT and PLT entries"],
    ),
    case(
        "a GOT relocation outside the GOT",
        Lib::Mlp,
        |b| vec![(rela_of_type(b, GLOB_DAT), le64(section(b, ".data").addr))],
        &["DT_RELA entry 3 (type 6, target 0x8008): the target is outside the GOT (.got or .got.plt) its type writes"],
    ),
    case(
        "DT_PLTGOT not the PLT GOT",
        Lib::Mlp,
        |b| vec![(dyn_entry(b, DT_PLTGOT) + 8, le64(0x7ff0))],
        &["DT_PLTGOT is 0x7ff0 and the PLT GOT (.got.plt at 0x7fe8) has 32 bytes, for 1 PLT relocations: expected its address and 3 reserved entries plus one per relocation"],
    ),
    case(
        "DT_PLTGOT in read-only memory (no .got.plt section to compare with)",
        Lib::Mlp,
        |b| {
            // Renames .got.plt to .got.plX in the section name strings.
            let (shoff, shstrndx) = (u64_at(b, 40) as usize, u16_at(b, 62) as usize);
            let strings = u64_at(b, shoff + 64 * shstrndx + 24) as usize;
            let name = strings + u32_at(b, section(b, ".got.plt").header) as usize;
            vec![(name + 7, b"X".to_vec()), (dyn_entry(b, DT_PLTGOT) + 8, le64(0x1000))]
        },
        &["invalid ELF shared library: DT_PLTGOT 0x1000 is not 24 writable bytes"],
    ),
    case(
        "DT_INIT_ARRAYSZ not whole pointers",
        Lib::Mlp,
        |b| vec![(dyn_entry(b, DT_INIT_ARRAYSZ) + 8, le64(4))],
        &["DT_INIT_ARRAY at 0x7e38 of 4 bytes: expected 8-aligned whole pointers"],
    ),
    case(
        "an init array slot no relocation sets",
        Lib::Mlp,
        // The GOT slot of an import: its relocation sets no address the file defines.
        |b| vec![(dyn_entry(b, DT_INIT_ARRAY) + 8, le64(u64_at(b, rela_of_type(b, GLOB_DAT))))],
        &["DT_INIT_ARRAY entry 0 (at 0x7fc8) is set by no relocation to a defined address: the loader would call its unrelocated value"],
    ),
    case(
        "a TLS relocation with an addend",
        Lib::C,
        |b| vec![(rela_of_type(b, DTPMOD) + 16, le64(1))],
        &["a TLS relocation with symbol 0 and addend 0x1: expected symbol 0 and an offset inside the 32-byte TLS block"],
    ),
    case(
        "a TLS relocation outside the GOT",
        Lib::C,
        |b| vec![(rela_of_type(b, DTPMOD), le64(section(b, ".data").addr))],
        &["the target is outside the GOT (.got)"],
    ),
    case(
        "a packed relative relocation written twice",
        Lib::C,
        // The second word of .relr.dyn made the first one's address again.
        |b| {
            let relr = section(b, ".relr.dyn").offset;
            vec![(relr + 8, le64(u64_at(b, relr)))]
        },
        &["DT_RELR entry 1: the target", "is written by another relocation too"],
    ),
    case(
        "DT_RELRSZ not whole words",
        Lib::C,
        |b| vec![(dyn_entry(b, DT_RELRSZ) + 8, le64(12))],
        &["of 12 bytes: expected 8-aligned whole words"],
    ),
    case(
        "a packed relative relocation whose value is no address",
        Lib::C,
        |b| {
            // The first address word of .relr.dyn, and the value the linker wrote there.
            let relr = section(b, ".relr.dyn").offset;
            let target = u64_at(b, relr);
            vec![(file_offset(b, target), le64(0xdead_0000_0000))]
        },
        &["DT_RELR word 0: the value at target", "is not an address in the image"],
    ),
    // The program blob must not overlap what the loader reads (the loaded copy zeroes it).
    case(
        "the program blob over the dynamic strings",
        Lib::Mlp,
        |b| {
            let strtab = section(b, ".dynstr");
            let mut e = Vec::new();
            for sym in [dynsym(b, "__tvm_ffi__library_bin"), symbol_in(b, ".symtab", ".strtab", "__tvm_ffi__library_bin")] {
                e.push((sym + 6, le16(4))); // .dynstr's index
                e.push((sym + 8, le64(strtab.addr)));
                e.push((sym + 16, le64(8)));
            }
            e
        },
        &["DT_STRTAB (file bytes 984..1220) overlaps the __tvm_ffi__library_bin data (984..992)"],
    ),
];
