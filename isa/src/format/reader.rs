//! Reads an executable: checks the framing and the checksums, decodes the sections in
//! dependency order, and hands the parts to the verifier.

use super::constants::{self, Blob};
use super::instructions::{self, Bounds};
use super::sections::{self, Kind, Layout};
use super::strings::{Budget, Strings};
use super::{checksum, debug, functions, libraries, signatures, LoadOptions};
use crate::error::{Error, Result};
use crate::executable::{Executable, ExecutableParts};
use crate::storage::Storage;
use std::ops::Range;

/// Decodes `file`. `make_blob` turns the tensor-data section's byte range into the storage
/// tensor constants will view (a copy, or the mapping itself).
pub fn read(
    file: &[u8],
    opts: &LoadOptions,
    make_blob: impl FnOnce(Range<usize>) -> Result<Storage>,
) -> Result<Executable> {
    let layout = sections::scan(file)?;
    if opts.verify_checksum {
        checksum::verify(file, &layout, opts.verify_data_checksum)?;
    } else {
        checksum::stored(file, &layout)?;
    }
    let required = |kind: Kind| {
        layout.get(kind).ok_or_else(|| {
            Error::format(format!(
                "section table at byte {}: the file has no {} section",
                layout.sections[0].header_at,
                kind.name()
            ))
        })
    };
    let bulk: usize = layout.sections.iter().filter(|s| s.is_bulk()).map(|s| s.data.len()).sum();
    let mut budget = Budget::for_metadata(file.len() - bulk);

    let strings = Strings::decode(required(Kind::Strings)?.cursor(file))?;
    let mut strings = strings;
    let mut funcs = functions::decode(required(Kind::Functions)?.cursor(file), &strings, &mut budget)?;
    let blob = Blob { storage: layout.get(Kind::TensorData).map(|s| make_blob(s.data.clone())).transpose()? };
    let constants = constants::decode(required(Kind::Constants)?.cursor(file), &mut strings, &mut budget, &blob)?;
    let bounds = Bounds { funcs: funcs.len(), constants: constants.len() };
    let instrs = instructions::decode(required(Kind::Instructions)?.cursor(file), layout.header.version, &bounds)?;
    if let Some(s) = layout.get(Kind::ParamNames) {
        debug::decode_param_names(s.cursor(file), &mut funcs, &strings, &mut budget)?;
    }
    if let Some(s) = layout.get(Kind::Signatures) {
        signatures::decode(s.cursor(file), &mut funcs, &strings, &mut budget)?;
        // A signature names the parameters (the verifier checks any names stored besides).
        for f in funcs.iter_mut().filter(|f| f.param_names.is_empty()) {
            if let Some(sig) = &f.signature {
                f.param_names = sig.param_names().map(str::to_string).collect();
            }
        }
    }
    let entry = layout.get(Kind::Entry).map(|s| signatures::decode_entry(s.cursor(file), &funcs)).transpose()?;
    let locations = match layout.get(Kind::Locations) {
        Some(s) => debug::decode_locations(s.cursor(file), instrs.len(), &strings, &mut budget)?,
        None => Vec::new(),
    };
    let libraries = match layout.get(Kind::Libraries) {
        Some(s) => libraries::decode(s.cursor(file), &strings, &mut budget)?,
        None => Vec::new(),
    };
    Executable::from_parts(ExecutableParts { funcs, constants, instrs, locations, entry, libraries })
}

/// The header and section table of `file`, for tools and tests.
pub fn layout(file: &[u8]) -> Result<Layout<'_>> {
    sections::scan(file)
}
