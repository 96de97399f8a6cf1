//! Reading a tensor's elements from its storage bytes, for any layout: strided, offset, even
//! misaligned for its element type (which ndarray views reject but TVM's runtime accepts).

use crate::args::{in_builtin, value_err};
use half::{bf16, f16};
use relaxvm::pool::POLL_EVERY;
use relaxvm::{Element, Error, Result, Tensor};

/// An element type decodable from its native-endian bytes.
pub(crate) trait Raw: Element {
    /// The element held by `b` (exactly `size_of::<Self>()` bytes).
    fn from_raw(b: &[u8]) -> Self;
}

macro_rules! raw_num {
    ($($t:ty),*) => {$(
        impl Raw for $t {
            fn from_raw(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_ne_bytes(a)
            }
        }
    )*};
}
raw_num!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl Raw for bool {
    fn from_raw(b: &[u8]) -> Self {
        // As a C++ reader of a `bool` byte: anything but zero is true.
        b[0] != 0
    }
}

impl Raw for f16 {
    fn from_raw(b: &[u8]) -> Self {
        f16::from_bits(u16::from_raw(b))
    }
}

impl Raw for bf16 {
    fn from_raw(b: &[u8]) -> Self {
        bf16::from_bits(u16::from_raw(b))
    }
}

/// The elements of `t` in row-major order. Fails (never panics) when `T` is not the tensor's
/// type or the element count cannot be allocated (zero strides can make a huge logical view of a
/// small storage).
pub(crate) fn elements<T: Raw>(name: &str, t: &Tensor) -> Result<Vec<T>> {
    elements_polled(name, t, &mut || Ok(()))
}

/// [`elements`], calling `poll` every [`POLL_EVERY`] elements (a view may be huge).
pub(crate) fn elements_polled<T: Raw>(name: &str, t: &Tensor, poll: &mut dyn FnMut() -> Result<()>) -> Result<Vec<T>> {
    if t.dtype() != T::DTYPE {
        return Err(value_err(name, format!("internal: reading {} elements as {}", t.dtype(), T::DTYPE)));
    }
    let size = std::mem::size_of::<T>();
    let n = t.numel();
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| {
        in_builtin(name, Error::alloc((n as u128) * size as u128, "cannot hold the elements of the input"))
    })?;
    let bytes = t.storage().bytes();
    let read = |elem: usize| -> Result<T> {
        let start = elem.checked_mul(size).and_then(|b| b.checked_add(t.byte_offset()));
        start
            .and_then(|s| bytes.get(s..s.checked_add(size)?))
            .map(T::from_raw)
            .ok_or_else(|| value_err(name, "tensor element outside its storage"))
    };
    if n == 0 {
        return Ok(out);
    }
    if t.is_contiguous() {
        for i in 0..n {
            if i % POLL_EVERY == POLL_EVERY - 1 {
                poll()?;
            }
            out.push(read(i)?);
        }
        return Ok(out);
    }
    // An odometer over the multi-index, carrying the element offset along.
    let dims = t.shape().dims().to_vec();
    let strides: Vec<usize> = t.strides().iter().map(|s| usize::try_from(*s).unwrap_or(0)).collect();
    let mut idx = vec![0i64; dims.len()];
    let mut off = 0usize;
    for i in 0..n {
        if i % POLL_EVERY == POLL_EVERY - 1 {
            poll()?;
        }
        out.push(read(off)?);
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            off = off.wrapping_add(strides[d]);
            if idx[d] < dims[d] {
                break;
            }
            off = off.wrapping_sub(strides[d].wrapping_mul(dims[d] as usize));
            idx[d] = 0;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::DataType;

    #[test]
    fn reading_a_huge_view_polls_and_stops_when_a_poll_fails() {
        // 2^28 copies of one float (stride 0): reserved, never all written.
        let one = Tensor::scalar(1.0f32);
        let view =
            Tensor::from_parts(one.storage().clone(), 0, [1i64 << 28].into(), Some(vec![0]), DataType::F32).unwrap();
        let mut calls = 0;
        let e = elements_polled::<f32>("relax.run.nonzero", &view, &mut || {
            calls += 1;
            if calls == 2 {
                Err(Error::value("polled out"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!((e.to_string(), calls), ("polled out".to_string(), 2));
        // A contiguous tensor polls too, and a poll that never fails changes nothing.
        let n = 3 * POLL_EVERY;
        let t = Tensor::from_vec([n as i64], vec![2.0f32; n]).unwrap();
        let mut polls = 0;
        let v = elements_polled::<f32>("x", &t, &mut || {
            polls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((polls, v.len()), (3, n));
    }
}
