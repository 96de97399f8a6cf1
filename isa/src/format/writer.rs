//! Writes an executable: encodes the metadata sections in memory, then streams them and the
//! tensor bytes to a [`Write`], computing the checksums on the way.

use super::constants::{self, BlobPlan};
use super::sections::{header_bytes, Kind, TENSOR_ALIGNMENT};
use super::strings::StringTable;
use super::{
    debug, functions, instructions, libraries, signatures, varint, SaveOptions, CURRENT_VERSION, MAGIC, VERSION_3,
    VERSION_4,
};
use crate::error::{Error, Result};
use crate::executable::Executable;
use std::io::Write;

/// A growing byte vector whose growth is fallible: `Vec`'s own `Write` aborts the process when
/// memory runs out, which saving a large executable to bytes must not do.
#[derive(Default)]
pub struct VecSink {
    buf: Vec<u8>,
    /// The size that could not be had, once growing failed.
    failed: Option<u128>,
}

impl VecSink {
    /// The bytes, or the write's error: [`Error::alloc`] when it was this sink that ran out.
    pub fn finish(self, written: Result<()>) -> Result<Vec<u8>> {
        match (written, self.failed) {
            (Ok(()), _) => Ok(self.buf),
            (Err(_), Some(bytes)) => Err(Error::alloc(bytes, "saving the executable to bytes")),
            (Err(e), None) => Err(e),
        }
    }

    /// Room for `extra` more bytes, or an `OutOfMemory` I/O error (and `failed` set).
    fn grow(&mut self, extra: usize) -> std::io::Result<()> {
        if self.buf.try_reserve(extra).is_err() {
            self.failed = Some(self.buf.len() as u128 + extra as u128);
            return Err(std::io::Error::new(std::io::ErrorKind::OutOfMemory, "out of memory"));
        }
        Ok(())
    }
}

impl Write for VecSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.grow(bytes.len())?;
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A byte sink that knows its position and hashes what passes through.
struct Sink<W: Write> {
    out: W,
    pos: u64,
    metadata: crc32fast::Hasher,
    data: crc32fast::Hasher,
}

impl<W: Write> Sink<W> {
    fn metadata(&mut self, bytes: &[u8]) -> Result<()> {
        self.metadata.update(bytes);
        self.raw(bytes)
    }

    fn data(&mut self, bytes: &[u8]) -> Result<()> {
        self.data.update(bytes);
        self.raw(bytes)
    }

    fn raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes)?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    fn section(&mut self, kind: Kind, data: &[u8]) -> Result<()> {
        let header = header_bytes(kind.id(), data.len() as u64, 1, self.pos);
        self.metadata(&header)?;
        self.metadata(data)
    }
}

/// Writes `exe` to `out` as `opts` asks.
pub fn write(exe: &Executable, opts: &SaveOptions, out: impl Write) -> Result<()> {
    if opts.version == 0 || opts.version > CURRENT_VERSION {
        return Err(Error::value(format!(
            "cannot write format version {}: this build writes versions 1 to {CURRENT_VERSION}",
            opts.version
        )));
    }
    if opts.version < VERSION_4 && !exe.libraries().is_empty() {
        return Err(Error::value(format!(
            "format version {} cannot record the native libraries the executable calls into (version {VERSION_4} can)",
            opts.version
        )));
    }
    let mut strings = StringTable::default();
    let libs = libraries::encode(exe.libraries(), &mut strings);
    let funcs = functions::encode(exe.funcs(), &mut strings);
    let mut blob = BlobPlan::default();
    let consts = constants::encode(exe.constants(), &mut strings, &mut blob)?;
    let instrs = instructions::encode(exe.instrs(), opts.version);
    // Signatures and the entry are not debug information: strip_debug keeps them. Versions
    // before 3 cannot hold them (see `SaveOptions::version`).
    let with_abi = opts.version >= VERSION_3;
    let (sigs, entry) = if with_abi {
        (signatures::encode(exe.funcs(), &mut strings)?, signatures::encode_entry(exe))
    } else {
        (None, None)
    };
    let (params, locs) = if opts.strip_debug {
        (None, None)
    } else {
        // A signature names its parameters: they are written only for unsigned functions.
        let params = debug::encode_param_names(exe.funcs(), with_abi, &mut strings);
        let locs = if exe.has_locations() {
            Some(debug::encode_locations((0..exe.instrs().len()).map(|i| exe.location(i)), &mut strings)?)
        } else {
            None
        };
        (params, locs)
    };

    let mut sink = Sink { out, pos: 0, metadata: crc32fast::Hasher::new(), data: crc32fast::Hasher::new() };
    let mut header = MAGIC.to_vec();
    varint::put(&mut header, opts.version.into());
    varint::put(&mut header, opts.producer.len() as u64);
    header.extend_from_slice(opts.producer.as_bytes());
    sink.metadata(&header)?;
    sink.section(Kind::Strings, &strings.encode())?;
    sink.section(Kind::Functions, &funcs)?;
    sink.section(Kind::Constants, &consts)?;
    sink.section(Kind::Instructions, &instrs)?;
    if let Some(s) = sigs {
        sink.section(Kind::Signatures, &s)?;
    }
    if let Some(e) = entry {
        sink.section(Kind::Entry, &e)?;
    }
    if let Some(l) = libs {
        sink.section(Kind::Libraries, &l)?;
    }
    if let Some(p) = params {
        sink.section(Kind::ParamNames, &p)?;
    }
    if let Some(l) = locs {
        sink.section(Kind::Locations, &l)?;
    }
    if blob.len > 0 {
        write_blob(&mut sink, &blob)?;
    }
    let sums = [sink.metadata.clone().finalize(), sink.data.clone().finalize()];
    let header = header_bytes(Kind::Checksum.id(), 8, 1, sink.pos);
    sink.raw(&header)?;
    sink.raw(&sums[0].to_le_bytes())?;
    sink.raw(&sums[1].to_le_bytes())?;
    sink.out.flush()?;
    Ok(())
}

fn write_blob<W: Write>(sink: &mut Sink<W>, blob: &BlobPlan<'_>) -> Result<()> {
    let header = header_bytes(Kind::TensorData.id(), blob.len, TENSOR_ALIGNMENT, sink.pos);
    sink.metadata(&header)?;
    let start = sink.pos;
    let zeros = [0u8; TENSOR_ALIGNMENT as usize];
    for (t, offset) in &blob.tensors {
        let pad = start + offset - sink.pos;
        sink.data(&zeros[..pad as usize])?;
        if t.is_contiguous() {
            sink.data(&t.storage().bytes()[t.byte_offset()..][..t.nbytes()])?;
        } else {
            sink.data(&t.contiguous_bytes()?)?;
        }
    }
    let pad = start + blob.len - sink.pos;
    sink.data(&zeros[..pad as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_sink_collects_what_is_written() {
        let mut sink = VecSink::default();
        sink.write_all(b"ab").unwrap();
        sink.write_all(b"cd").unwrap();
        assert_eq!(sink.finish(Ok(())).unwrap(), b"abcd");
    }

    #[test]
    fn vec_sink_that_cannot_grow_is_an_alloc_error_naming_the_size() {
        let mut sink = VecSink::default();
        sink.write_all(b"abc").unwrap();
        let io = sink.grow(usize::MAX).unwrap_err();
        assert_eq!(io.kind(), std::io::ErrorKind::OutOfMemory);
        let e = sink.finish(Err(io.into())).unwrap_err();
        assert!(matches!(e.kind(), crate::ErrorKind::Alloc { bytes, .. } if *bytes == usize::MAX as u128 + 3), "{e}");
        assert!(e.to_string().contains("saving the executable to bytes"), "{e}");
    }

    #[test]
    fn vec_sink_passes_other_errors_through() {
        let e = VecSink::default().finish(Err(Error::value("no"))).unwrap_err();
        assert_eq!(e.to_string(), Error::value("no").to_string());
    }
}
