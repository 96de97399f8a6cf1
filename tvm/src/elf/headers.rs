//! The ELF identification and file header: a 64-bit little-endian shared library for this
//! machine.

use super::bad;
use object::elf;
use object::read::elf::{ElfFile64, FileHeader};
use object::Endianness;
use relaxvm::Result;

/// The machine this build runs on, as ELF names it.
#[cfg(target_arch = "x86_64")]
pub const HOST_MACHINE: (u16, &str) = (elf::EM_X86_64, "x86-64");
#[cfg(target_arch = "aarch64")]
pub const HOST_MACHINE: (u16, &str) = (elf::EM_AARCH64, "AArch64");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const HOST_MACHINE: (u16, &str) = (elf::EM_NONE, "this machine");

/// The length of the ELF identification (`e_ident`, ELF's `EI_NIDENT`) that starts every file.
const IDENT_LEN: usize = 16;

/// Parses the headers (the `object` crate checks the tables it reads lie inside the file).
pub fn parse(bytes: &[u8]) -> Result<ElfFile64<'_, Endianness>> {
    if !bytes.starts_with(b"\x7fELF") {
        let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(bad(format!("not an ELF file: it starts with bytes [{}], expected 7f 45 4c 46", head.join(" "))));
    }
    // The class and the data encoding when the file has them (what is wrong first), then one
    // check of the identification's length.
    if let Some(&c) = bytes.get(4).filter(|&&c| c != elf::ELFCLASS64) {
        return Err(bad(format!("ELF class {c}, expected {} (64-bit)", elf::ELFCLASS64)));
    }
    if let Some(&d) = bytes.get(5).filter(|&&d| d != elf::ELFDATA2LSB) {
        return Err(bad(format!("ELF data encoding {d}, expected {} (little-endian)", elf::ELFDATA2LSB)));
    }
    if bytes.len() < IDENT_LEN {
        return Err(bad(format!(
            "the file ends inside the ELF identification: {} bytes, expected at least {IDENT_LEN}",
            bytes.len()
        )));
    }
    // The `object` crate refuses another entry size too, but without saying what it found.
    if let Some(size) = bytes.get(54..56) {
        let phentsize = u16::from_le_bytes([size[0], size[1]]);
        if phentsize != 56 {
            return Err(bad(format!("program header size {phentsize} (ELF header byte 54), expected 56")));
        }
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
    Ok(file)
}
