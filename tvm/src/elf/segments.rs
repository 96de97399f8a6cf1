//! The program headers: the segments the loader maps, and the other headers it reads.
//!
//! glibc maps every PT_LOAD at `load base + p_vaddr`, page-aligned, reading `p_filesz` bytes
//! from `p_offset` and zero-filling up to `p_memsz`. It assumes what linkers produce: loadable
//! segments sorted by address and not overlapping, `p_offset` congruent to `p_vaddr` modulo a
//! power-of-two alignment of at least a page, and file bytes inside the file (a segment past the
//! end is mapped anyway, and touching it is SIGBUS). The checks here hold a file to that.

use super::bad;
use object::elf;
use relaxvm::Result;

/// Stack-trace data (binutils 2.41+), which glibc does not read.
const PT_GNU_SFRAME: u32 = 0x6474_e554;

/// The smallest alignment of a loadable segment (a page).
const PAGE: u64 = 4096;

/// The loaded image may span at most this many bytes more than the file holds (room for
/// zero-filled `.bss`): a flipped size bit must not reserve terabytes.
const MAX_ZERO_FILL: u64 = 1 << 30;

/// One loadable segment.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    pub vaddr: u64,
    pub offset: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub flags: u32,
}

impl Load {
    pub fn writable(&self) -> bool {
        self.flags & elf::PF_W != 0
    }
    pub fn executable(&self) -> bool {
        self.flags & elf::PF_X != 0
    }
}

/// The segments of a library, after every check of this module.
#[derive(Debug)]
pub struct Segments {
    pub loads: Vec<Load>,
    /// The dynamic section: its address and size.
    pub dynamic: (u64, u64),
    /// The range made read-only after relocation (PT_GNU_RELRO), if any.
    pub relro: Option<(u64, u64)>,
    /// The thread-local template (PT_TLS): address and memory size, if any.
    pub tls: Option<(u64, u64)>,
}

impl Segments {
    /// The file offset of `size` bytes at address `addr`, when they lie in one segment's file
    /// bytes.
    pub fn file_offset(&self, addr: u64, size: u64) -> Option<usize> {
        self.loads.iter().find_map(|l| {
            let rel = addr.checked_sub(l.vaddr)?;
            (rel.checked_add(size)? <= l.filesz).then(|| (l.offset + rel) as usize)
        })
    }

    /// The segment whose memory holds `size` bytes at `addr`.
    pub fn segment(&self, addr: u64, size: u64) -> Option<&Load> {
        self.loads
            .iter()
            .find(|l| addr.checked_sub(l.vaddr).and_then(|rel| rel.checked_add(size)).is_some_and(|end| end <= l.memsz))
    }

    /// Whether `addr` lies in the memory of the loaded image (first segment to last).
    pub fn in_image(&self, addr: u64) -> bool {
        self.segment(addr, 0).is_some()
    }
}

/// Checks the program headers; `bytes` is the whole file, `phdrs` its program headers.
pub fn check<P: object::read::elf::ProgramHeader<Endian = object::Endianness, Word = u64>>(
    bytes: &[u8],
    phdrs: &[P],
    endian: object::Endianness,
    phoff: u64,
) -> Result<Segments> {
    let len = bytes.len() as u64;
    let mut loads: Vec<Load> = Vec::new();
    let mut dynamic = None;
    let mut relro = None;
    let mut tls = None;
    let mut notes = Vec::new();
    let mut reads = Vec::new(); // (what, vaddr, memsz) the loader reads from memory
    for (i, ph) in phdrs.iter().enumerate() {
        let (p_type, flags) = (ph.p_type(endian), ph.p_flags(endian));
        let (offset, vaddr, filesz, memsz, align) =
            (ph.p_offset(endian), ph.p_vaddr(endian), ph.p_filesz(endian), ph.p_memsz(endian), ph.p_align(endian));
        let at = |msg: String| bad(format!("program header {i} (type {p_type:#x}): {msg}"));
        if offset.checked_add(filesz).is_none_or(|end| end > len) {
            return Err(at(format!(
                "covers file bytes {offset}..{}, but the file has {len} bytes (truncated?)",
                offset as u128 + filesz as u128
            )));
        }
        if vaddr.checked_add(memsz).is_none_or(|end| end > 1 << 47) {
            return Err(at(format!("address {vaddr:#x} + memory size {memsz:#x} is beyond the 47-bit address space")));
        }
        match p_type {
            elf::PT_LOAD => {
                if !align.is_power_of_two() || align < PAGE {
                    return Err(at(format!(
                        "alignment {align:#x} is not a power of two of at least a page ({PAGE:#x})"
                    )));
                }
                if (vaddr ^ offset) & (align - 1) != 0 {
                    return Err(at(format!(
                        "address {vaddr:#x} and file offset {offset:#x} differ modulo the alignment {align:#x}"
                    )));
                }
                if flags & !(elf::PF_R | elf::PF_W | elf::PF_X) != 0 || flags & elf::PF_R == 0 {
                    return Err(at(format!("flags {flags:#x}: expected readable, with only the R, W and X bits")));
                }
                if filesz > memsz {
                    return Err(at(format!("file size {filesz} exceeds memory size {memsz}")));
                }
                if memsz - filesz > MAX_ZERO_FILL {
                    return Err(at(format!(
                        "memory size {memsz:#x} exceeds the file size {filesz:#x} by more than {MAX_ZERO_FILL:#x}"
                    )));
                }
                if flags & elf::PF_W == 0 && filesz != memsz {
                    return Err(at(format!(
                        "a read-only segment with file size {filesz:#x} and memory size {memsz:#x}: expected equal (only writable segments are zero-filled)"
                    )));
                }
                if let Some(prev) = loads.last() {
                    if vaddr < prev.vaddr + prev.memsz || offset < prev.offset + prev.filesz {
                        return Err(at(format!(
                            "segment at {vaddr:#x} (file offset {offset:#x}) overlaps or precedes the previous one at {:#x} (file offset {:#x}): loadable segments must be sorted and disjoint",
                            prev.vaddr, prev.offset
                        )));
                    }
                }
                loads.push(Load { vaddr, offset, filesz, memsz, flags });
            }
            elf::PT_DYNAMIC => {
                if dynamic.replace((vaddr, filesz)).is_some() {
                    return Err(at("a second dynamic segment".into()));
                }
                if filesz != memsz || filesz % 16 != 0 || vaddr % 8 != 0 {
                    return Err(at(format!(
                        "dynamic segment at {vaddr:#x} of {filesz:#x} file and {memsz:#x} memory bytes: expected 8-aligned, equal sizes, whole 16-byte entries"
                    )));
                }
            }
            elf::PT_GNU_RELRO => {
                if relro.replace((vaddr, memsz)).is_some() {
                    return Err(at("a second PT_GNU_RELRO".into()));
                }
            }
            elf::PT_GNU_STACK => {
                if flags & elf::PF_X != 0 {
                    return Err(at("asks for an executable stack (PT_GNU_STACK with X): refused".into()));
                }
            }
            elf::PT_TLS => {
                if filesz > memsz || !(align == 0 || align.is_power_of_two()) || align > PAGE {
                    return Err(at(format!(
                        "thread-local segment with file size {filesz:#x}, memory size {memsz:#x}, alignment {align:#x}: expected file <= memory, a power-of-two alignment up to a page"
                    )));
                }
                if tls.replace((vaddr, memsz)).is_some() {
                    return Err(at("a second PT_TLS".into()));
                }
                reads.push(("PT_TLS", vaddr, filesz));
            }
            elf::PT_PHDR => {
                let size = phdrs.len() as u64 * 56;
                if filesz != size || memsz != size || offset != phoff {
                    return Err(at(format!(
                        "PT_PHDR at file offset {offset:#x} of {filesz:#x} bytes, but the program headers are at {phoff:#x} ({size:#x} bytes)"
                    )));
                }
                reads.push(("PT_PHDR", vaddr, memsz));
            }
            elf::PT_NOTE | elf::PT_GNU_PROPERTY => {
                check_notes(bytes, offset, filesz, align).map_err(&at)?;
                // The loader parses the notes in memory, at the address: the checked bytes must
                // be the ones mapped there.
                notes.push((vaddr, offset, filesz));
            }
            elf::PT_GNU_EH_FRAME => reads.push(("PT_GNU_EH_FRAME", vaddr, memsz)),
            elf::PT_NULL => {}
            elf::PT_INTERP => return Err(at("a shared library with an interpreter (PT_INTERP): refused".into())),
            PT_GNU_SFRAME => {} // stack-trace data, which the loader does not read
            other => {
                return Err(at(format!(
                    "program header type {other:#x} is not one relaxvm knows (a corrupted type may be one the loader acts on)"
                )))
            }
        }
    }
    if loads.is_empty() {
        return Err(bad("no loadable segment"));
    }
    let span = loads.last().map(|l| l.vaddr + l.memsz).unwrap_or(0) - loads[0].vaddr;
    if span > len + MAX_ZERO_FILL {
        return Err(bad(format!("the loadable segments span {span:#x} bytes, far more than the file's {len}")));
    }
    let segments =
        Segments { loads, dynamic: dynamic.ok_or_else(|| bad("no dynamic section (PT_DYNAMIC)"))?, relro, tls };
    let (dyn_addr, dyn_size) = segments.dynamic;
    if segments.file_offset(dyn_addr, dyn_size).is_none() {
        return Err(bad(format!(
            "the dynamic section (address {dyn_addr:#x}, {dyn_size} bytes) lies outside the loaded file bytes"
        )));
    }
    for (what, vaddr, size) in reads {
        if segments.segment(vaddr, size).is_none() {
            return Err(bad(format!("{what} (address {vaddr:#x}, {size} bytes) lies outside the loaded segments")));
        }
    }
    for (vaddr, offset, size) in notes {
        if segments.file_offset(vaddr, size) != Some(offset as usize) {
            return Err(bad(format!(
                "a note segment at address {vaddr:#x} ({size} bytes) is not mapped from its file offset {offset:#x}"
            )));
        }
    }
    if let Some((vaddr, size)) = segments.relro {
        // The loader makes the pages from the start's page to the end (rounded down) read-only:
        // the end must be a page boundary or the segment's end, or it would protect data
        // written later.
        let seg = segments.segment(vaddr, size).filter(|s| s.writable()).ok_or_else(|| {
            bad(format!(
                "PT_GNU_RELRO (address {vaddr:#x}, {size} bytes) does not lie inside one writable loadable segment"
            ))
        })?;
        let end = vaddr + size;
        if end % PAGE != 0 && end != seg.vaddr + seg.memsz {
            return Err(bad(format!(
                "PT_GNU_RELRO ends at {end:#x}, neither a page boundary nor the end of its segment"
            )));
        }
    }
    Ok(segments)
}

/// The notes of a PT_NOTE or PT_GNU_PROPERTY: each header and its padded name and descriptor
/// inside the segment (glibc parses GNU property notes while loading).
fn check_notes(bytes: &[u8], offset: u64, size: u64, align: u64) -> std::result::Result<(), String> {
    let pad = if align == 8 { 8 } else { 4 };
    let (offset, size) = (offset as usize, size as usize);
    let mut rel = 0usize;
    while rel < size {
        let word = |k: usize| read_u32(bytes, offset + rel + 4 * k).filter(|_| rel + 12 <= size);
        let (Some(namesz), Some(descsz), Some(_)) = (word(0), word(1), word(2)) else {
            return Err(format!("the note at file offset {} is truncated", offset + rel));
        };
        let desc = (rel + 12).checked_add(namesz as usize).map(|e| e.next_multiple_of(pad));
        let end = desc.and_then(|d| d.checked_add(descsz as usize));
        match end {
            Some(end) if end <= size => rel = end.next_multiple_of(pad).min(size),
            _ => {
                return Err(format!(
                    "the note at file offset {} declares a {namesz}-byte name and a {descsz}-byte descriptor, more than the {} bytes left in its segment",
                    offset + rel,
                    size - rel
                ))
            }
        }
    }
    Ok(())
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}
