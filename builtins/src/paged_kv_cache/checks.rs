//! The checks the cache's entry points make on the tensors they are given, before any kernel
//! runs: dtype, shape, contiguity, and that outputs are writable.

use relaxvm::{DataType, Error, Result, Tensor};

fn err(msg: impl std::fmt::Display) -> Error {
    Error::value(msg.to_string())
}

/// Checks that tensor `t` (argument `what`) has the cache's dtype and `dims` (`None`: any).
pub(crate) fn check_tensor(t: &Tensor, what: &str, dims: &[Option<i64>], dtype: DataType) -> Result<()> {
    if t.dtype() != dtype {
        return Err(err(format!("{what}: expected dtype {dtype}, found {}", t.dtype())));
    }
    let shape = t.shape();
    let ok = shape.len() == dims.len() && shape.iter().zip(dims).all(|(&s, d)| d.is_none_or(|d| d == s));
    if !ok {
        let want: Vec<String> = dims.iter().map(|d| d.map_or("_".to_string(), |d| d.to_string())).collect();
        return Err(err(format!("{what}: expected shape ({}), found {shape}", want.join(", "))));
    }
    if !t.is_contiguous() {
        return Err(err(format!("{what}: expected a contiguous tensor, found strides {:?}", t.strides())));
    }
    Ok(())
}

/// Checks that the kernels may write output `t` (argument `what`), before any kernel runs: a
/// write into read-only memory is refused by the kernel guard, and an operation refused midway
/// would leave a layer's pages unappended (attack finding kvcache/03).
pub(crate) fn check_writable(t: &Tensor, what: &str) -> Result<()> {
    if t.storage().is_frozen() || t.storage().is_sealed() {
        return Err(err(format!("{what}: expected a writable tensor, found read-only memory")));
    }
    Ok(())
}
