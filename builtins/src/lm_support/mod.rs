//! TVM's sampling and logit builtins for language models (`src/runtime/vm/lm_support.cc`, TVM
//! 0.27), bit for bit:
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `vm.builtin.sample_top_p_from_logits` | `(logits, temperature, top_p, uniform_sample)` | the sampled token index (argmax when `temperature < 1e-6`) |
//! | `vm.builtin.sample_top_p_from_prob` | `(prob, top_p, uniform_sample)` | the sampled token index |
//! | `vm.builtin.multinomial_from_uniform` | `(prob, uniform_samples)` | int64 `(batch, 1)`: per row, the first index whose running sum exceeds the sample |
//! | `vm.builtin.apply_repetition_penalty` | `(logits, token_ids, penalty)` | null; in place, each listed logit divided by the penalty (multiplied when `<= 0`) |
//! | `vm.builtin.apply_presence_and_frequency_penalty` | `(logits, token_ids, token_freqs, presence_penalty, frequency_penalty)` | null; in place, `logit -= freq * frequency_penalty + presence_penalty` |
//! | `vm.builtin.apply_softmax_with_temperature` | `(logits, temperature)` | null; in place, the softmax of `logits / temperature` |
//!
//! Bit-exact means TVM's host arithmetic: which operations are `float` and which `double`
//! (`1.0f / temperature` divides in double and rounds to float; the softmax's denominator is a
//! double), the C library's `expf` (Rust's `f32::exp` calls the same symbol, and TVM's library
//! is built without fused multiply-adds, as Rust never contracts), and libstdc++'s `std::sort`
//! order for equal logits (`introsort`). The tests compare with TVM's recorded outputs
//! (`tests/test_tvm_lm_support.py`).
//!
//! Where TVM reads outside its inputs or silently ignores part of them, relaxvm refuses the
//! call (docs/tvm-compat.md lists each case): a 0-d tensor (TVM reads `shape[-1]`), a token id
//! outside the logits, frequencies fewer than the ids, `multinomial_from_uniform` samples that
//! are not float32 (TVM reads float64 samples as float32) or fewer than the rows, a tensor of
//! several rows where TVM processes only the first, empty logits to sample from, and a sort
//! that would step outside the vector.

use crate::args::{self, type_err, value_err};
use crate::table::{builtin, Builtin};
use relaxvm::{DataType, DeviceType, Error, Result, Tensor, Value};

mod introsort;
mod logits;
mod multinomial;
mod top_p;
mod x86;

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.sample_top_p_from_logits", top_p::from_logits),
    builtin!("vm.builtin.sample_top_p_from_prob", top_p::from_prob),
    builtin!("vm.builtin.multinomial_from_uniform", multinomial::multinomial_from_uniform),
    builtin!("vm.builtin.apply_repetition_penalty", logits::repetition_penalty),
    builtin!("vm.builtin.apply_presence_and_frequency_penalty", logits::presence_and_frequency_penalty),
    builtin!("vm.builtin.apply_softmax_with_temperature", logits::softmax_with_temperature),
];

/// Argument `i` as a C `double` (TVM converts ints and bools too).
fn double(name: &str, args: &[Value], i: usize, what: &str) -> Result<f64> {
    match args.get(i) {
        Some(Value::Float(f)) => Ok(*f),
        Some(Value::Int(v)) => Ok(*v as f64),
        Some(Value::Bool(b)) => Ok(f64::from(u8::from(*b))),
        Some(other) => Err(type_err(name, i, what, "float", other)),
        None => Err(args::missing(name, i, args.len())),
    }
}

/// Argument `i` as a CPU tensor of `dtype` with at least one dimension; returns it and its
/// last dimension (what TVM reads as the vocabulary size or the id count).
fn host_tensor<'a>(
    name: &str,
    args: &'a [Value],
    i: usize,
    what: &str,
    dtype: DataType,
) -> Result<(&'a Tensor, usize)> {
    let t = args::tensor(name, args, i, what)?;
    if t.dtype() != dtype {
        return Err(Error::type_mismatch(
            format!("tensor of {dtype} as argument {i} ({what}) of {name}"),
            format!("tensor of {}", t.dtype()),
        ));
    }
    if t.device().device_type != DeviceType::Cpu {
        return Err(value_err(name, format!("{what} must be on the CPU, found {}", t.device())));
    }
    let Some(&last) = t.shape().last() else {
        return Err(value_err(name, format!("{what} needs at least one dimension, found a 0-d tensor")));
    };
    Ok((t, last as usize))
}

/// Fails unless every dimension of `t` before the last is 1: TVM reads only the first row.
fn single_row(name: &str, t: &Tensor, what: &str) -> Result<()> {
    let dims = t.shape();
    if dims[..dims.len() - 1].iter().any(|d| *d != 1) {
        return Err(value_err(
            name,
            format!("the leading dimensions of {what} must be 1 (one row), found shape {dims}"),
        ));
    }
    Ok(())
}

/// The elements of `t` in row-major order, copied into a vector allocated fallibly (a stride-0
/// view of a few bytes can stand for gigabytes: that is a memory error, not an abort).
fn elements<T: relaxvm::Element>(name: &str, t: &Tensor) -> Result<Vec<T>> {
    t.to_vec::<T>().map_err(|e| args::in_builtin(name, e))
}

/// An empty vector with room for `n` items, allocated fallibly.
fn with_room<T>(name: &str, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::alloc((n as u128).saturating_mul(std::mem::size_of::<T>() as u128), format!("out of memory (in {name})"))
    })?;
    Ok(v)
}

/// Writes `values` over the elements of the contiguous tensor `t`, in place.
fn write_f32(name: &str, t: &Tensor, what: &str, values: &[f32]) -> Result<()> {
    if !t.is_contiguous() {
        return Err(value_err(name, format!("{what} must be contiguous (it is written in place)")));
    }
    t.storage().write(t.byte_offset(), bytemuck::cast_slice(values)).map_err(|e| args::in_builtin(name, e))
}

#[cfg(test)]
mod tests;
