//! The binary executable format (`.rvx`): see `docs/format.md`.
//!
//! A file is a 4-byte magic number, a format version, a producer string and a list of
//! sections (strings, functions, constants, instructions, debug information, tensor data),
//! closed by a checksum section:
//!
//! ```
//! use relaxvm_isa::format::{self, SaveOptions};
//! use relaxvm_isa::{Executable, ExecutableParts, FuncInfo, Instruction};
//!
//! let exe = Executable::from_parts(ExecutableParts {
//!     funcs: vec![FuncInfo::bytecode("id", 0, 1, 1, 1).with_param_names(["x"])],
//!     instrs: vec![Instruction::Ret { result: 0 }],
//!     ..Default::default()
//! }).unwrap();
//! let bytes = exe.save_to_bytes();
//! let back = format::load_bytes(&bytes).unwrap();
//! assert_eq!(back.save_to_bytes(), bytes);
//! // Version 1 for older readers, without debug information:
//! let old = format::save_to_bytes(&exe, &SaveOptions { version: 1, strip_debug: true, ..Default::default() });
//! assert!(format::load_bytes(&old).unwrap().funcs()[0].param_names.is_empty());
//! ```
//!
//! Loading never panics on a malformed file: every count is checked against the bytes left
//! before anything is allocated, every index against its table, and the result goes through
//! the verifier ([`Executable::from_parts`]).

#[cfg(feature = "tooling")]
mod atomic;
mod checksum;
mod constants;
mod cursor;
mod debug;
pub mod field_record;
mod functions;
mod instructions;
mod libraries;
mod mmap;
mod owned;
mod reader;
mod sections;
mod signatures;
mod strings;
mod varint;
mod writer;

#[cfg(feature = "tooling")]
pub use atomic::{output_target, write_atomically};
pub use constants::MAX_TUPLE_DEPTH;
pub use libraries::NativeLibraries;

use crate::error::Result;
use crate::executable::Executable;
use crate::input_file::ReadOptions;
use std::io::Write;
use std::ops::Range;
use std::path::Path;

/// The magic number that opens every file: a non-ASCII byte (which catches 7-bit transfers
/// and text-mode newline conversion, as PNG's does), then `RVX`.
pub const MAGIC: [u8; 4] = [0x89, b'R', b'V', b'X'];

/// The first layout: instructions spelled out field by field.
pub const VERSION_1: u32 = 1;
/// Version 2: the compact instruction encoding (opcode byte packs argument count and flags).
pub const VERSION_2: u32 = 2;
/// Version 3: function signatures and the entry function, in sections of their own.
pub const VERSION_3: u32 = 3;
/// Version 4: references to native libraries (e.g. a TVM model's kernels).
pub const VERSION_4: u32 = 4;
/// The version written by default; the reader accepts every version up to this one.
pub const CURRENT_VERSION: u32 = VERSION_4;

/// The producer string written by default.
pub const DEFAULT_PRODUCER: &str = concat!("relaxvm ", env!("CARGO_PKG_VERSION"));

/// How to write a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaveOptions {
    /// Leave out debug information (locations and parameter names). Signatures are not debug
    /// information: they stay, and with them the names of their parameters.
    pub strip_debug: bool,
    /// The format version to write: [`CURRENT_VERSION`], or an older one for older readers.
    /// Versions before 3 have no place for signatures and the entry function: writing one
    /// leaves them out (the functions then run unchecked, and the entry defaults to `main`).
    pub version: u32,
    /// Who wrote the file (free text, recorded in the header).
    pub producer: String,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions { strip_debug: false, version: CURRENT_VERSION, producer: DEFAULT_PRODUCER.to_string() }
    }
}

/// How to read a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Check the metadata checksum (everything but tensor data).
    pub verify_checksum: bool,
    /// Also check the tensor-data checksum, which reads every byte of tensor data. Ignored
    /// unless `verify_checksum`.
    pub verify_data_checksum: bool,
    /// For files: memory-map the file instead of reading it into memory of our own. Loading
    /// then takes time proportional to the metadata, not the tensor data — but the file must be
    /// trusted not to change while the executable lives: truncating it makes the next read of
    /// a constant a SIGBUS, and rewriting it in place changes constants under the program.
    /// Ignored when loading bytes.
    pub mmap: bool,
    /// How files are read: the size limit (checked before reading) and the poll hook called
    /// between chunks (see [`crate::input_file`]). Applies to the executable's file and, in
    /// the loader that opens native libraries, to each library file.
    pub read: ReadOptions,
    /// Which native libraries the executable's references may open (run the code of). This
    /// module never opens a library (it only records references); the loader that does
    /// (`relaxvm_tvm::import`) obeys this. Refused by default.
    pub native_libraries: NativeLibraries,
}

impl Default for LoadOptions {
    /// Check everything; read files into memory of our own; open no native library.
    fn default() -> Self {
        LoadOptions {
            verify_checksum: true,
            verify_data_checksum: true,
            mmap: false,
            read: ReadOptions::default(),
            native_libraries: NativeLibraries::Refuse,
        }
    }
}

impl LoadOptions {
    /// For trusted files: memory-mapped, with the metadata checksum checked and the tensor data
    /// left unread until used.
    pub fn trusted_mmap() -> Self {
        LoadOptions { verify_checksum: true, verify_data_checksum: false, mmap: true, ..Default::default() }
    }

    /// No checksum checked (for tools that look at damaged files, and fuzzing).
    pub fn unchecked() -> Self {
        LoadOptions { verify_checksum: false, verify_data_checksum: false, ..Default::default() }
    }
}

/// Encodes `exe` as `opts` asks.
///
/// # Panics
/// If a constant cannot be saved (functions, storage, opaque objects, or nesting beyond the
/// format's limits); [`try_save_to_bytes`] returns that as an error instead.
pub fn save_to_bytes(exe: &Executable, opts: &SaveOptions) -> Vec<u8> {
    try_save_to_bytes(exe, opts).unwrap_or_else(|e| panic!("cannot save executable: {e}"))
}

/// Encodes `exe` as `opts` asks, or says why it cannot be saved. The bytes grow fallibly: when
/// memory runs out the error is [`ErrorKind::Alloc`](relaxvm_core::ErrorKind::Alloc), never an abort.
pub fn try_save_to_bytes(exe: &Executable, opts: &SaveOptions) -> Result<Vec<u8>> {
    let mut out = writer::VecSink::default();
    let written = writer::write(exe, opts, &mut out);
    out.finish(written)
}

/// Writes `exe` to `out`, streaming tensor data without an intermediate copy.
pub fn save_to_writer(exe: &Executable, opts: &SaveOptions, out: impl Write) -> Result<()> {
    writer::write(exe, opts, out)
}

/// Writes `exe` to the file `path`, replacing it atomically ([`write_atomically`]): a
/// failure never leaves half a file, and executables mapped from the old file keep seeing
/// the old bytes.
#[cfg(feature = "tooling")]
pub fn save_file(exe: &Executable, path: impl AsRef<Path>, opts: &SaveOptions) -> Result<()> {
    write_atomically(path.as_ref(), |out| writer::write(exe, opts, out))
}

/// Decodes an executable from bytes, checking both checksums. Tensor constants are copied
/// once into one aligned buffer that they share.
pub fn load_bytes(bytes: &[u8]) -> Result<Executable> {
    load_bytes_with(bytes, &LoadOptions::default())
}

/// Decodes an executable from bytes with the given checks.
pub fn load_bytes_with(bytes: &[u8], opts: &LoadOptions) -> Result<Executable> {
    reader::read(bytes, opts, |range| {
        let storage = crate::storage::Storage::alloc(range.len(), crate::device::Device::cpu(0))?;
        storage.write(0, &bytes[range])?;
        Ok(storage)
    })
}

/// Reads the file `path` into memory of our own (one 64-byte-aligned block that the tensor
/// constants view) and decodes it, with every byte checked against the file's checksums first.
/// A file truncated or rewritten after the call changes nothing in the executable; a flipped
/// bit anywhere in the file is an error. For large trusted files, [`LoadOptions::mmap`] maps
/// the file instead.
pub fn load_file(path: impl AsRef<Path>) -> Result<Executable> {
    load_file_with(path, &LoadOptions::default())
}

/// Reads (or, with [`LoadOptions::mmap`], memory-maps) and decodes the file `path`.
pub fn load_file_with(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Executable> {
    if opts.mmap {
        mmap::load(path.as_ref(), opts)
    } else {
        owned::load(path.as_ref(), opts)
    }
}

/// The refusal of an empty file, whichever reader (mapped or owned) opened it.
fn empty_file(path: &Path) -> crate::error::Error {
    located(path, crate::error::Error::format("header at byte 0: the file is empty"))
}

/// `e` with the file's path in front of its message.
fn located(path: &Path, e: crate::error::Error) -> crate::error::Error {
    use crate::error::{Error, ErrorKind};
    match e.into_kind() {
        ErrorKind::Format(m) => Error::format(format!("{}: {m}", path.display())),
        ErrorKind::Invalid(e) => e.within(path.display()).into(),
        ErrorKind::Io(io) => std::io::Error::new(io.kind(), format!("{}: {io}", path.display())).into(),
        other => other.into(),
    }
}

/// Recomputes the checksums of a file in place, for tools that patch files.
pub fn reseal(bytes: &mut [u8]) -> Result<()> {
    checksum::reseal(bytes)
}

/// What [`inspect`] reports about a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// The format version.
    pub version: u32,
    /// The producer string.
    pub producer: String,
    /// The sections, in file order (the checksum section last).
    pub sections: Vec<SectionInfo>,
}

/// One section of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionInfo {
    /// The id byte (kind in the low six bits; 0x80 aligned, 0x40 bulk).
    pub id: u8,
    /// The section's name, or `None` for a kind this version does not know.
    pub name: Option<&'static str>,
    /// The file offset of the id byte.
    pub header_offset: u64,
    /// The data, as file offsets.
    pub data: Range<u64>,
}

/// Reads the header and section table of a file without decoding the sections.
pub fn inspect(bytes: &[u8]) -> Result<FileInfo> {
    let layout = reader::layout(bytes)?;
    Ok(FileInfo {
        version: layout.header.version,
        producer: layout.header.producer.to_string(),
        sections: layout
            .sections
            .iter()
            .map(|s| SectionInfo {
                id: s.id,
                name: s.kind.map(sections::Kind::name),
                header_offset: s.header_at as u64,
                data: s.data.start as u64..s.data.end as u64,
            })
            .collect(),
    })
}

impl Executable {
    /// The executable in the binary format, current version, with debug information.
    ///
    /// # Panics
    /// If a constant cannot be saved; see [`try_save_to_bytes`].
    pub fn save_to_bytes(&self) -> Vec<u8> {
        save_to_bytes(self, &SaveOptions::default())
    }

    /// Writes the executable to the file `path` (replacing it atomically).
    #[cfg(feature = "tooling")]
    pub fn save(&self, path: impl AsRef<Path>, opts: &SaveOptions) -> Result<()> {
        save_file(self, path, opts)
    }

    /// Decodes an executable from bytes; see [`load_bytes`].
    pub fn load_bytes(bytes: &[u8]) -> Result<Executable> {
        load_bytes(bytes)
    }

    /// Memory-maps and decodes the file `path`; see [`load_file`].
    pub fn load_file(path: impl AsRef<Path>) -> Result<Executable> {
        load_file(path)
    }
}
