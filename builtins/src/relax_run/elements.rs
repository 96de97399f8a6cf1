//! Reading a tensor's elements from its storage bytes, for any layout: strided, offset, even
//! misaligned for its element type (which ndarray views reject but TVM's runtime accepts).

use crate::args::{in_builtin, value_err};
use half::{bf16, f16};
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
            out.push(read(i)?);
        }
        return Ok(out);
    }
    // An odometer over the multi-index, carrying the element offset along.
    let dims = t.shape().dims().to_vec();
    let strides: Vec<usize> = t.strides().iter().map(|s| usize::try_from(*s).unwrap_or(0)).collect();
    let mut idx = vec![0i64; dims.len()];
    let mut off = 0usize;
    for _ in 0..n {
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
