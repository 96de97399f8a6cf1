//! Variable-width integers: MLIR's *PrefixVarInt*, and zigzag for signed values.
//!
//! The first byte carries the encoded length in its low bits: the number of trailing zero bits
//! is the number of bytes that follow. The remaining bits, little-endian, are the value.
//!
//! ```text
//! xxxxxxx1                      7 value bits, 1 byte
//! xxxxxx10 xxxxxxxx            14 value bits, 2 bytes
//! ...
//! 10000000 xxxxxxxx * 7        56 value bits, 8 bytes
//! 00000000 xxxxxxxx * 8        64 value bits, 9 bytes
//! ```

/// The most bytes one varint takes.
pub const MAX_LEN: usize = 9;

/// The number of bytes [`put`] writes for `v`.
pub fn len(v: u64) -> usize {
    let bits = 64 - v.leading_zeros() as usize;
    match bits.div_ceil(7).max(1) {
        n if n <= 8 => n,
        _ => MAX_LEN,
    }
}

/// Appends `v` to `out`.
pub fn put(out: &mut Vec<u8>, v: u64) {
    let n = len(v);
    if n == MAX_LEN {
        out.push(0);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        // n <= 8 and v < 2^(7n), so the shifted value fits in n bytes.
        let encoded = (v << n) | (1 << (n - 1));
        out.extend_from_slice(&encoded.to_le_bytes()[..n]);
    }
}

/// Appends the zigzag encoding of `v` to `out`.
pub fn put_signed(out: &mut Vec<u8>, v: i64) {
    put(out, zigzag(v));
}

/// Maps signed to unsigned so that small magnitudes stay small: 0, -1, 1, -2... → 0, 1, 2, 3...
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Decodes one varint from the start of `bytes`: the value and the bytes it took, or `None`
/// when `bytes` ends first.
pub fn get(bytes: &[u8]) -> Option<(u64, usize)> {
    let first = *bytes.first()?;
    if first == 0 {
        let rest: [u8; 8] = bytes.get(1..MAX_LEN)?.try_into().ok()?;
        return Some((u64::from_le_bytes(rest), MAX_LEN));
    }
    let n = first.trailing_zeros() as usize + 1;
    let mut buf = [0u8; 8];
    buf[..n].copy_from_slice(bytes.get(..n)?);
    Some((u64::from_le_bytes(buf) >> n, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_follow_the_prefix_table() {
        let cases = [
            (0u64, 1),
            (127, 1),
            (128, 2),
            ((1 << 14) - 1, 2),
            (1 << 14, 3),
            ((1 << 56) - 1, 8),
            (1 << 56, 9),
            (u64::MAX, 9),
        ];
        for (v, n) in cases {
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(out.len(), n, "{v}");
            assert_eq!(len(v), n);
            assert_eq!(get(&out), Some((v, n)), "{v}");
        }
    }

    #[test]
    fn matches_mlir_examples() {
        let mut out = Vec::new();
        put(&mut out, 1);
        assert_eq!(out, [0b0000_0011]);
        out.clear();
        put(&mut out, 200);
        assert_eq!(out, [(200 << 2 | 0b10) as u8, (200 >> 6) as u8]);
    }

    #[test]
    fn round_trips_many_values() {
        let mut v = 1u64;
        while v != 0 {
            for x in [v - 1, v, v + 1, v.wrapping_mul(3)] {
                let mut out = Vec::new();
                put(&mut out, x);
                assert_eq!(get(&out), Some((x, out.len())));
            }
            v <<= 1;
        }
    }

    #[test]
    fn zigzag_round_trips() {
        for x in [0i64, -1, 1, -2, 63, -64, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(x)), x);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
    }

    #[test]
    fn truncated_input_is_none() {
        assert_eq!(get(&[]), None);
        assert_eq!(get(&[0b10]), None);
        assert_eq!(get(&[0, 1, 2, 3]), None);
    }
}
