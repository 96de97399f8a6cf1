//! The symbol hash tables (DT_GNU_HASH, DT_HASH), which the loader walks to find a symbol.
//!
//! The loader trusts them: it indexes the symbol table with their entries and follows their
//! chains until a stop bit (GNU) or index 0 (SysV), so a corrupt entry reads out of bounds and a
//! cyclic SysV chain never ends. Here every symbol of the table is reached from exactly the
//! bucket its name hashes to, the GNU Bloom filter holds every name, and every index is in range.

use super::{bad, symbols, u32_at, Lib, Segments};
use object::elf;
use relaxvm::Result;

/// The number of dynamic symbols the hash tables imply (the loader knows no other count): with
/// a GNU table, one past the last chain's end; with a SysV table, its `nchain`.
pub fn symbol_count(bytes: &[u8], seg: &Segments, gnu: Option<u64>, sysv: Option<u64>) -> Result<usize> {
    let max = bytes.len() / 24;
    let n = if let Some(addr) = gnu {
        let g = Gnu::read(bytes, seg, addr)?;
        let last = (0..g.nbuckets).map(|i| g.bucket(bytes, i)).max().unwrap_or(0);
        if last == 0 {
            g.symoffset
        } else {
            let mut i = last as usize;
            loop {
                let c = g.chain(bytes, seg, i)?;
                if c & 1 == 1 {
                    break i + 1;
                }
                i += 1;
            }
        }
    } else {
        let addr = sysv.expect("one of the two tables (dynamic.rs)");
        let off = seg.file_offset(addr, 8).ok_or_else(|| outside("DT_HASH", addr, 8))?;
        u32_at(bytes, off + 4) as usize
    };
    if n > max {
        return Err(bad(format!("the hash table implies {n} dynamic symbols, more than the file could hold")));
    }
    if n == 0 {
        return Err(bad("the hash table implies no dynamic symbols (not even the null symbol)"));
    }
    Ok(n)
}

fn outside(what: &str, addr: u64, size: u64) -> relaxvm::Error {
    bad(format!("{what} (address {addr:#x}, {size} bytes) lies outside the loaded file bytes"))
}

/// A GNU hash table's header, at file offset `off`.
struct Gnu {
    addr: u64,
    nbuckets: usize,
    symoffset: usize,
    bloom_words: usize,
    shift: u32,
    /// File offsets of the Bloom filter and the buckets.
    bloom: usize,
    buckets: usize,
}

impl Gnu {
    fn read(bytes: &[u8], seg: &Segments, addr: u64) -> Result<Gnu> {
        let off = seg.file_offset(addr, 16).ok_or_else(|| outside("DT_GNU_HASH", addr, 16))?;
        let (nbuckets, symoffset, bloom_words, shift) =
            (u32_at(bytes, off), u32_at(bytes, off + 4), u32_at(bytes, off + 8), u32_at(bytes, off + 12));
        if nbuckets == 0 || !bloom_words.is_power_of_two() || shift >= 64 {
            return Err(bad(format!(
                "DT_GNU_HASH: {nbuckets} buckets, {bloom_words} Bloom words, shift {shift}: expected at least one bucket, a power-of-two Bloom size and a shift below 64"
            )));
        }
        let size = 16 + 8 * u64::from(bloom_words) + 4 * u64::from(nbuckets);
        seg.file_offset(addr, size).ok_or_else(|| outside("DT_GNU_HASH", addr, size))?;
        Ok(Gnu {
            addr,
            nbuckets: nbuckets as usize,
            symoffset: symoffset as usize,
            bloom_words: bloom_words as usize,
            shift,
            bloom: off + 16,
            buckets: off + 16 + 8 * bloom_words as usize,
        })
    }

    fn bucket(&self, bytes: &[u8], i: usize) -> u32 {
        u32_at(bytes, self.buckets + 4 * i)
    }

    /// The chain word of symbol `i` (`i >= symoffset`).
    fn chain(&self, bytes: &[u8], seg: &Segments, i: usize) -> Result<u32> {
        let rel = i.checked_sub(self.symoffset).ok_or_else(|| {
            bad(format!("DT_GNU_HASH: a bucket starts at symbol {i}, below the first hashed symbol {}", self.symoffset))
        })?;
        let addr = self.addr + 16 + 8 * self.bloom_words as u64 + 4 * (self.nbuckets + rel) as u64;
        let off = seg.file_offset(addr, 4).ok_or_else(|| outside("DT_GNU_HASH chain", addr, 4))?;
        Ok(u32_at(bytes, off))
    }
}

/// The GNU hash of a name.
fn gnu_hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, c| h.wrapping_mul(33).wrapping_add(u32::from(*c)))
}

/// The SysV ELF hash of a name.
pub fn elf_hash(name: &[u8]) -> u32 {
    let mut h = 0u32;
    for c in name {
        h = (h << 4).wrapping_add(u32::from(*c));
        let g = h & 0xf000_0000;
        h ^= g >> 24;
        h &= !g;
    }
    h
}

/// Checks both tables against the symbol table.
pub fn check(lib: &Lib<'_>) -> Result<()> {
    if let Some(addr) = lib.dynamic.get(elf::DT_GNU_HASH) {
        check_gnu(lib, addr)?;
    }
    if let Some(addr) = lib.dynamic.get(elf::DT_HASH) {
        check_sysv(lib, addr)?;
    }
    Ok(())
}

fn check_gnu(lib: &Lib<'_>, addr: u64) -> Result<()> {
    let (bytes, n) = (lib.bytes, lib.nsyms);
    let g = Gnu::read(bytes, &lib.seg, addr)?;
    if g.symoffset > n {
        return Err(bad(format!("DT_GNU_HASH: first hashed symbol {} is past the {n} symbols", g.symoffset)));
    }
    let size = 16 + 8 * g.bloom_words as u64 + 4 * (g.nbuckets + n - g.symoffset) as u64;
    lib.table("DT_GNU_HASH", addr, size)?;
    let mut seen = vec![false; n];
    for b in 0..g.nbuckets {
        let start = g.bucket(bytes, b) as usize;
        if start == 0 {
            continue;
        }
        if start < g.symoffset || start >= n {
            return Err(bad(format!(
                "DT_GNU_HASH: bucket {b} starts at symbol {start}, outside the hashed symbols {}..{n}",
                g.symoffset
            )));
        }
        #[allow(clippy::needless_range_loop)] // `i` also indexes the symbol and chain tables
        for i in start..n {
            let name = symbols::string(lib, symbols::sym(lib, i).name.into(), "dynamic symbol")?;
            let h = gnu_hash(name);
            let chain = g.chain(bytes, &lib.seg, i)?;
            let shown = String::from_utf8_lossy(name);
            if h as usize % g.nbuckets != b || chain | 1 != h | 1 || std::mem::replace(&mut seen[i], true) {
                return Err(bad(format!(
                    "DT_GNU_HASH: symbol {i} ({shown}) is in the chain of bucket {b}, but its name hashes to bucket {} (chain word {chain:#x}, hash {h:#x})",
                    h as usize % g.nbuckets
                )));
            }
            let word = u64::from_le_bytes(
                bytes[g.bloom + 8 * ((h as usize / 64) % g.bloom_words)..][..8].try_into().expect("8 bytes"),
            );
            let bits = (1u64 << (h % 64)) | (1u64 << ((u64::from(h) >> g.shift) % 64));
            if word & bits != bits {
                return Err(bad(format!("DT_GNU_HASH: the Bloom filter lacks symbol {i} ({shown})")));
            }
            if chain & 1 == 1 {
                break;
            }
        }
    }
    if let Some(i) = (g.symoffset..n).find(|i| !seen[*i]) {
        return Err(bad(format!("DT_GNU_HASH: symbol {i} is in no bucket's chain")));
    }
    Ok(())
}

fn check_sysv(lib: &Lib<'_>, addr: u64) -> Result<()> {
    let (bytes, n) = (lib.bytes, lib.nsyms);
    let off = lib.table("DT_HASH", addr, 8)?;
    let (nbucket, nchain) = (u32_at(bytes, off) as usize, u32_at(bytes, off + 4) as usize);
    if nchain != n || nbucket == 0 {
        return Err(bad(format!(
            "DT_HASH: {nbucket} buckets and {nchain} chains, expected at least one bucket and one chain per symbol ({n})"
        )));
    }
    let off = lib.table("DT_HASH", addr, 8 + 4 * (nbucket + nchain) as u64)?;
    let chains = off + 8 + 4 * nbucket;
    let mut seen = vec![false; n];
    seen[0] = true;
    for b in 0..nbucket {
        let mut i = u32_at(bytes, off + 8 + 4 * b) as usize;
        while i != 0 {
            if i >= n || std::mem::replace(&mut seen[i], true) {
                return Err(bad(format!(
                    "DT_HASH: the chain of bucket {b} reaches symbol {i}, out of range or already reached (a cycle?)"
                )));
            }
            let name = symbols::string(lib, symbols::sym(lib, i).name.into(), "dynamic symbol")?;
            if elf_hash(name) as usize % nbucket != b {
                return Err(bad(format!(
                    "DT_HASH: symbol {i} ({}) is in the chain of bucket {b}, but its name hashes to another",
                    String::from_utf8_lossy(name)
                )));
            }
            i = u32_at(bytes, chains + 4 * i) as usize;
        }
    }
    if let Some(i) = seen.iter().position(|s| !s) {
        return Err(bad(format!("DT_HASH: symbol {i} is in no bucket's chain")));
    }
    Ok(())
}
