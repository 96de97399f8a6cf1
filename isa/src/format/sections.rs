//! The file header and the section framing: ids, lengths, alignment and padding.
//!
//! ```text
//! file    ::= magic version:varint producer:string section* checksum_section
//! section ::= id:byte length:varint [alignment:varint padding:0xCB*] data:byte[length]
//! id      ::= aligned:1 bulk:1 kind:6
//! ```

use super::cursor::Cursor;
use super::varint;
use super::{CURRENT_VERSION, MAGIC};
use crate::error::{Error, Result};
use std::ops::Range;

/// Id flag: an alignment (and padding) follows the length.
pub const ALIGNED: u8 = 0x80;
/// Id flag: bulk data, left out of the metadata checksum and covered by the data checksum.
pub const BULK: u8 = 0x40;
/// The id bits that say what a section holds.
pub const KIND_MASK: u8 = 0x3F;
/// The byte that pads a section up to its alignment (MLIR's choice).
pub const PADDING: u8 = 0xCB;
/// The largest alignment a section may ask for.
pub const MAX_ALIGNMENT: u64 = 4096;
/// The alignment of the tensor-data section, and of every tensor in it.
pub const TENSOR_ALIGNMENT: u64 = crate::storage::ALIGNMENT as u64;

/// The sections this version knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The string table.
    Strings = 1,
    /// The function table.
    Functions = 2,
    /// The constant pool (tensor records point into the tensor data).
    Constants = 3,
    /// The instruction stream.
    Instructions = 4,
    /// Parameter names (debug information).
    ParamNames = 5,
    /// Instruction locations (debug information).
    Locations = 6,
    /// Tensor bytes (aligned, bulk).
    TensorData = 7,
    /// Function signatures (version 3).
    Signatures = 8,
    /// The entry function (version 3).
    Entry = 9,
    /// References to native libraries (version 4).
    Libraries = 10,
    /// The checksums; always the last section.
    Checksum = 0x3F,
}

impl Kind {
    /// Every kind, for lookups.
    pub const ALL: [Kind; 11] = [
        Kind::Strings,
        Kind::Functions,
        Kind::Constants,
        Kind::Instructions,
        Kind::ParamNames,
        Kind::Locations,
        Kind::TensorData,
        Kind::Signatures,
        Kind::Entry,
        Kind::Libraries,
        Kind::Checksum,
    ];

    /// The id byte: kind plus flags.
    pub fn id(self) -> u8 {
        match self {
            Kind::TensorData => self as u8 | ALIGNED | BULK,
            _ => self as u8,
        }
    }

    /// The first format version that has this section.
    pub fn since(self) -> u32 {
        match self {
            Kind::Signatures | Kind::Entry => super::VERSION_3,
            Kind::Libraries => super::VERSION_4,
            _ => super::VERSION_1,
        }
    }

    /// The name errors use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Strings => "strings",
            Kind::Functions => "functions",
            Kind::Constants => "constants",
            Kind::Instructions => "instructions",
            Kind::ParamNames => "parameter names",
            Kind::Locations => "locations",
            Kind::TensorData => "tensor data",
            Kind::Signatures => "signatures",
            Kind::Entry => "entry",
            Kind::Libraries => "libraries",
            Kind::Checksum => "checksum",
        }
    }

    fn from_bits(kind: u8) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u8 == kind)
    }
}

/// The header fields after the magic number.
#[derive(Debug)]
pub struct Header<'a> {
    /// The format version.
    pub version: u32,
    /// Who wrote the file.
    pub producer: &'a str,
}

/// One section as found by [`scan`].
#[derive(Clone, Debug)]
pub struct RawSection {
    /// The id byte.
    pub id: u8,
    /// The kind, when this version knows it.
    pub kind: Option<Kind>,
    /// The file offset of the id byte.
    pub header_at: usize,
    /// The data, as a range of file offsets.
    pub data: Range<usize>,
}

impl RawSection {
    /// True for bulk sections (excluded from the metadata checksum).
    pub fn is_bulk(&self) -> bool {
        self.id & BULK != 0
    }

    /// A cursor over the data of this section within `file`.
    pub fn cursor<'a>(&self, file: &'a [u8]) -> Cursor<'a> {
        let name = self.kind.map_or("unknown", Kind::name);
        Cursor::new(&file[self.data.clone()], self.data.start as u64, name)
    }
}

/// The structure of a file: header, known sections by kind, and the checksum section.
#[derive(Debug)]
pub struct Layout<'a> {
    /// The header.
    pub header: Header<'a>,
    /// Every section in file order, the checksum section last.
    pub sections: Vec<RawSection>,
}

impl Layout<'_> {
    /// The section of kind `kind`, if present.
    pub fn get(&self, kind: Kind) -> Option<&RawSection> {
        self.sections.iter().find(|s| s.kind == Some(kind))
    }

    /// The checksum section (always present and last).
    pub fn checksum(&self) -> &RawSection {
        self.sections.last().expect("scan requires a checksum section")
    }
}

/// Reads the header and walks the section headers, checking framing (lengths, alignment,
/// padding, duplicates, the final checksum section) without decoding any section.
pub fn scan(file: &[u8]) -> Result<Layout<'_>> {
    let mut c = Cursor::new(file, 0, "header");
    let magic = c.bytes(MAGIC.len()).map_err(|_| c.err_at(0, "file too short for the magic number"))?;
    if magic != MAGIC {
        return Err(
            c.err_at(0, format!("bad magic number {magic:02x?}: not a relaxvm executable (expected {MAGIC:02x?})"))
        );
    }
    let at = c.pos();
    let version = c.varint()?;
    if version == 0 || version > u64::from(CURRENT_VERSION) {
        return Err(c.err_at(
            at,
            format!("unsupported format version {version}: this build reads versions 1 to {CURRENT_VERSION}"),
        ));
    }
    let version = version as u32;
    if version < CURRENT_VERSION {
        log::info!("reading format version {version} (this build writes {CURRENT_VERSION}; re-save to upgrade)");
    }
    let len = c.count("producer byte", 1)?;
    let at = c.pos();
    let producer = std::str::from_utf8(c.bytes(len)?).map_err(|_| c.err_at(at, "the producer string is not UTF-8"))?;
    let header = Header { version, producer };

    let mut sections: Vec<RawSection> = Vec::new();
    let mut pos = c.pos();
    loop {
        if pos == file.len() {
            return Err(Error::format(format!(
                "section header at byte {pos}: the file ends without a checksum section (truncated?)"
            )));
        }
        let section = read_section(file, pos)?;
        pos = section.data.end;
        if let Some(kind) = section.kind {
            if kind.since() > version {
                return Err(Error::format(format!(
                    "section header at byte {}: a {} section, which needs format version {}, in a version-{version} file",
                    section.header_at,
                    kind.name(),
                    kind.since()
                )));
            }
            if sections.iter().any(|s| s.kind == Some(kind)) {
                return Err(Error::format(format!(
                    "section header at byte {}: a second {} section",
                    section.header_at,
                    kind.name()
                )));
            }
        }
        let last = section.kind == Some(Kind::Checksum);
        sections.push(section);
        if last {
            break;
        }
    }
    if pos != file.len() {
        return Err(Error::format(format!(
            "checksum section at byte {pos}: {} unexpected bytes after the checksum section",
            file.len() - pos
        )));
    }
    Ok(Layout { header, sections })
}

fn read_section(file: &[u8], header_at: usize) -> Result<RawSection> {
    let err = |at: usize, msg: String| Error::format(format!("section header at byte {at}: {msg}"));
    let mut c = Cursor::new(&file[header_at..], header_at as u64, "section header");
    let id = c.byte()?;
    let kind = Kind::from_bits(id & KIND_MASK);
    let name = kind.map_or("unknown", Kind::name);
    if let Some(k) = kind {
        if k.id() != id {
            return Err(err(header_at, format!("{name} section with id byte {id:#04x}, expected {:#04x}", k.id())));
        }
    }
    let len_at = header_at + c.pos();
    let len = c.varint()?;
    let mut data_start = header_at + c.pos();
    if id & ALIGNED != 0 {
        let align_at = data_start;
        let align = c.varint()?;
        if !align.is_power_of_two() || align > MAX_ALIGNMENT {
            return Err(err(
                align_at,
                format!("{name} section alignment {align} is not a power of two up to {MAX_ALIGNMENT}"),
            ));
        }
        if kind == Some(Kind::TensorData) && align < TENSOR_ALIGNMENT {
            return Err(err(
                align_at,
                format!("tensor data aligned to {align} bytes, it must be aligned to {TENSOR_ALIGNMENT}"),
            ));
        }
        let here = header_at + c.pos();
        let pad = (align - here as u64 % align) % align;
        let pad_bytes = c.bytes(pad as usize).map_err(|_| err(here, "truncated alignment padding".into()))?;
        if let Some(i) = pad_bytes.iter().position(|b| *b != PADDING) {
            return Err(err(here + i, format!("padding byte {:#04x}, expected {PADDING:#04x}", pad_bytes[i])));
        }
        data_start = header_at + c.pos();
    }
    let left = file.len() - data_start;
    let end = usize::try_from(len).ok().filter(|n| *n <= left).map(|n| data_start + n).ok_or_else(|| {
        err(len_at, format!("{name} section length {len} exceeds the {left} bytes left in the file (truncated?)"))
    })?;
    Ok(RawSection { id, kind, header_at, data: data_start..end })
}

/// Appends a section header for `len` data bytes that will start at file offset `at +
/// header length`; returns the header bytes including padding.
pub fn header_bytes(id: u8, len: u64, align: u64, at: u64) -> Vec<u8> {
    let mut out = vec![id];
    varint::put(&mut out, len);
    if id & ALIGNED != 0 {
        varint::put(&mut out, align);
        let here = at + out.len() as u64;
        let pad = (align - here % align) % align;
        out.resize(out.len() + pad as usize, PADDING);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(sections: &[u8]) -> Vec<u8> {
        let mut f = MAGIC.to_vec();
        varint::put(&mut f, u64::from(CURRENT_VERSION));
        varint::put(&mut f, 0);
        f.extend_from_slice(sections);
        f
    }

    #[test]
    fn finds_sections_and_requires_a_final_checksum() {
        let mut body = header_bytes(0x20, 2, 1, 0);
        body.extend_from_slice(&[1, 2]);
        body.extend(header_bytes(Kind::Checksum.id(), 0, 1, 0));
        let f = file_with(&body);
        let layout = scan(&f).unwrap();
        assert_eq!(layout.sections.len(), 2);
        assert_eq!(layout.sections[0].kind, None);
        assert_eq!(&f[layout.sections[0].data.clone()], &[1, 2]);
        let e = scan(&f[..f.len() - 2]).unwrap_err().to_string();
        assert!(e.contains("without a checksum section"), "{e}");
        let mut extra = f.clone();
        extra.push(0);
        assert!(scan(&extra).unwrap_err().to_string().contains("after the checksum"));
    }

    #[test]
    fn aligned_headers_pad_with_0xcb() {
        let h = header_bytes(Kind::TensorData.id(), 5, 64, 10);
        assert_eq!((10 + h.len()) % 64, 0);
        assert!(h[3..].iter().all(|b| *b == PADDING));
    }

    #[test]
    fn rejects_bad_magic_and_versions() {
        assert!(scan(b"RXV").unwrap_err().to_string().contains("too short"));
        assert!(scan(b"ELF\x7f\x03\x01").unwrap_err().to_string().contains("bad magic"));
        let mut f = MAGIC.to_vec();
        varint::put(&mut f, 99);
        assert!(scan(&f).unwrap_err().to_string().contains("unsupported format version 99"));
    }
}
