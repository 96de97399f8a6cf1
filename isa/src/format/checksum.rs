//! Integrity: CRC-32 (IEEE, as `crc32fast` computes it) over the file.
//!
//! ```text
//! checksum ::= metadata_crc:fixed32 data_crc:fixed32
//! ```
//!
//! `metadata_crc` covers every byte before the checksum section except the data of bulk
//! sections (their headers and padding are covered); `data_crc` covers the data of the bulk
//! sections, concatenated in file order. Keeping them apart lets `load_file` check the metadata
//! in microseconds without touching gigabytes of mapped tensor data.

use super::sections::{Kind, Layout, RawSection};
use crate::error::{Error, Result};

/// The length of the checksum section's data.
pub const LEN: usize = 8;

/// The two checksums of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sums {
    /// Over the metadata.
    pub metadata: u32,
    /// Over the bulk data.
    pub data: u32,
}

/// Computes the metadata checksum of the sections before the checksum section.
pub fn metadata(file: &[u8], sections: &[RawSection], end: usize) -> u32 {
    let mut h = crc32fast::Hasher::new();
    let mut pos = 0;
    for s in sections.iter().filter(|s| s.is_bulk() && s.data.end <= end) {
        h.update(&file[pos..s.data.start]);
        pos = s.data.end;
    }
    h.update(&file[pos..end]);
    h.finalize()
}

/// Computes the data checksum of the bulk sections.
pub fn data(file: &[u8], sections: &[RawSection]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for s in sections.iter().filter(|s| s.is_bulk()) {
        h.update(&file[s.data.clone()]);
    }
    h.finalize()
}

/// The checksums the file records.
pub fn stored(file: &[u8], layout: &Layout<'_>) -> Result<Sums> {
    let s = layout.checksum();
    let d = &file[s.data.clone()];
    if d.len() != LEN {
        return Err(Error::format(format!(
            "checksum section at byte {}: {} bytes, expected {LEN}",
            s.data.start,
            d.len()
        )));
    }
    Ok(Sums {
        metadata: u32::from_le_bytes([d[0], d[1], d[2], d[3]]),
        data: u32::from_le_bytes([d[4], d[5], d[6], d[7]]),
    })
}

/// Checks the metadata checksum, and the data checksum too when `with_data`.
pub fn verify(file: &[u8], layout: &Layout<'_>, with_data: bool) -> Result<()> {
    let want = stored(file, layout)?;
    let at = layout.checksum().header_at;
    let got = metadata(file, &layout.sections, at);
    if got != want.metadata {
        return Err(Error::format(format!(
            "checksum section at byte {}: metadata checksum mismatch (stored {:#010x}, computed {got:#010x}): \
             the file is corrupt",
            layout.checksum().data.start,
            want.metadata
        )));
    }
    if with_data {
        let got = data(file, &layout.sections);
        if got != want.data {
            let bulk = layout.sections.iter().find(|s| s.is_bulk()).map_or(at, |s| s.data.start);
            return Err(Error::format(format!(
                "{} section at byte {bulk}: data checksum mismatch (stored {:#010x}, computed {got:#010x}): \
                 the tensor data is corrupt",
                Kind::TensorData.name(),
                want.data
            )));
        }
    }
    Ok(())
}

/// Recomputes and stores both checksums of `file` in place, e.g. after a tool patched it.
pub fn reseal(file: &mut [u8]) -> Result<()> {
    let (sums, at) = {
        let layout = super::sections::scan(file)?;
        stored(file, &layout)?;
        let end = layout.checksum().header_at;
        let sums = Sums { metadata: metadata(file, &layout.sections, end), data: data(file, &layout.sections) };
        (sums, layout.checksum().data.start)
    };
    file[at..at + 4].copy_from_slice(&sums.metadata.to_le_bytes());
    file[at + 4..at + 8].copy_from_slice(&sums.data.to_le_bytes());
    Ok(())
}
