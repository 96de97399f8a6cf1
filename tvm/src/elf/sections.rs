//! The section headers and the full symbol table. The loader reads neither; the linker wrote
//! them from the same data as the dynamic structures, so where both exist they must agree, which
//! catches corruption that no rule about the dynamic structures alone could see (a function
//! pointer moved by a few bytes, a symbol's size changed).

use super::bad;
use object::elf;
use object::read::elf::{ElfFile64, SectionHeader};
use object::Endianness;
use relaxvm::Result;
use std::collections::HashMap;

/// One section.
#[derive(Debug)]
pub struct Section {
    pub name: String,
    pub kind: u32,
    pub addr: u64,
    pub size: u64,
    pub flags: u64,
    pub offset: u64,
    pub link: u32,
    pub entsize: u64,
}

/// What the full symbol table (`.symtab`) says.
pub struct FullTable {
    /// The defined global and weak symbols: name to (value, size, st_info).
    pub globals: HashMap<Vec<u8>, (u64, u64, u8)>,
    /// The addresses of every defined function, local ones included.
    pub functions: Vec<u64>,
    /// The undefined global and weak symbols: name (without an `@VERSION` suffix) to st_info.
    pub undefined: HashMap<Vec<u8>, u8>,
}

/// The section headers (empty when the file has none).
#[derive(Debug, Default)]
pub struct Sections {
    list: Vec<Section>,
}

impl Sections {
    pub fn read(file: &ElfFile64<'_, Endianness>) -> Result<Sections> {
        let endian = file.endian();
        let table = file.elf_section_table();
        let mut list = Vec::new();
        for s in table.iter() {
            let name = table.section_name(endian, s).map_err(|e| bad(format!("section name: {e}")))?;
            list.push(Section {
                name: String::from_utf8_lossy(name).into_owned(),
                kind: s.sh_type(endian),
                addr: s.sh_addr(endian),
                size: s.sh_size(endian),
                flags: s.sh_flags(endian),
                offset: s.sh_offset(endian),
                link: s.sh_link(endian),
                entsize: s.sh_entsize(endian),
            });
        }
        Ok(Sections { list })
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Section `index` (not 0, the null section).
    pub fn get(&self, index: u16) -> Option<&Section> {
        self.list.get(usize::from(index)).filter(|_| index != 0)
    }

    /// The first section of type `kind`.
    pub fn of_kind(&self, kind: u32) -> Option<&Section> {
        self.list.iter().find(|s| s.kind == kind)
    }

    /// The section named `name`.
    pub fn named(&self, name: &str) -> Option<&Section> {
        self.list.iter().find(|s| s.name == name)
    }

    /// Whether `addr` lies inside a section of executable code.
    pub fn executable_contains(&self, addr: u64) -> bool {
        self.list.iter().any(|s| {
            s.flags & u64::from(elf::SHF_EXECINSTR) != 0
                && s.kind == elf::SHT_PROGBITS
                && addr >= s.addr
                && addr < s.addr.saturating_add(s.size)
        })
    }

    /// The full symbol table, when the file has one (a stripped library has not).
    pub fn full_symbols(&self, bytes: &[u8]) -> Result<Option<FullTable>> {
        let Some(symtab) = self.of_kind(elf::SHT_SYMTAB) else { return Ok(None) };
        let strtab = self.list.get(symtab.link as usize).filter(|s| s.kind == elf::SHT_STRTAB);
        let (Some(strtab), true) = (strtab, symtab.entsize == 24) else {
            return Err(bad("the symbol table (.symtab) has no string table or entries of 24 bytes"));
        };
        let range = |s: &Section| {
            let start = usize::try_from(s.offset).ok()?;
            bytes.get(start..start.checked_add(usize::try_from(s.size).ok()?)?)
        };
        let (Some(syms), Some(strs)) = (range(symtab), range(strtab)) else {
            return Err(bad("the .symtab section or its string section lies outside the file"));
        };
        let mut out = FullTable { globals: HashMap::new(), functions: Vec::new(), undefined: HashMap::new() };
        for entry in syms.chunks_exact(24) {
            let name = u32::from_le_bytes(entry[..4].try_into().expect("4 bytes")) as usize;
            let (info, shndx) = (entry[4], u16::from_le_bytes([entry[6], entry[7]]));
            let value = u64::from_le_bytes(entry[8..16].try_into().expect("8 bytes"));
            let size = u64::from_le_bytes(entry[16..24].try_into().expect("8 bytes"));
            let name_of = || strs.get(name..).and_then(|r| r.split(|b| *b == 0).next()).unwrap_or_default();
            if shndx == elf::SHN_UNDEF {
                if info >> 4 != elf::STB_LOCAL {
                    let name = name_of();
                    let plain = name.split(|b| *b == b'@').next().unwrap_or_default();
                    out.undefined.insert(plain.to_vec(), info);
                }
                continue;
            }
            if info & 0xf == elf::STT_FUNC {
                out.functions.push(value);
            }
            if info >> 4 != elf::STB_LOCAL {
                out.globals.insert(name_of().to_vec(), (value, size, info));
            }
        }
        Ok(Some(out))
    }
}
