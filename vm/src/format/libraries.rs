//! The libraries section (version 4): the native libraries an executable calls into.
//!
//! ```text
//! libraries ::= count:varint (path:string-index content_hash:fixed64)*
//! ```
//!
//! Only a reference is stored — the path the library was opened from and the XXH3-64 hash of
//! its bytes — never the library itself, so reading a file never runs native code. A loader
//! crate (`relaxvm-tvm`) opens the references and refuses a library whose bytes hash
//! differently.

use super::cursor::Cursor;
use super::strings::{Budget, StringTable, Strings};
use super::varint;
use crate::error::Result;
use crate::executable::Library;
use crate::native::LibraryRef;

/// The section data, or `None` when the executable calls into no library.
pub fn encode<'a>(libraries: &'a [Library], strings: &mut StringTable<'a>) -> Option<Vec<u8>> {
    if libraries.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    varint::put(&mut out, libraries.len() as u64);
    for lib in libraries {
        varint::put(&mut out, strings.intern(&lib.reference.path));
        out.extend_from_slice(&lib.reference.content_hash.to_le_bytes());
    }
    Some(out)
}

/// The references the section holds, none of them opened.
pub fn decode(mut c: Cursor<'_>, strings: &Strings<'_>, budget: &mut Budget) -> Result<Vec<Library>> {
    // Each entry takes at least nine bytes: a one-byte string index and the hash.
    let n = c.count("libraries", 9)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let path = strings.read_owned(&mut c, budget)?;
        let content_hash = c.fixed64()?;
        out.push(Library { reference: LibraryRef { path, content_hash }, loaded: None });
    }
    c.finish()?;
    Ok(out)
}
