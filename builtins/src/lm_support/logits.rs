//! In-place logit transforms: repetition penalty, presence and frequency penalties, softmax with
//! temperature. Each follows TVM's C++ operation for operation (`float` elements updated by
//! `double` factors, then rounded back to `float`), NaNs included ([`super::x86`]).

use super::x86::{add64, div64, mul32, mul64, sub32, sub64, to_f32, to_f64};
use super::{double, elements, host_tensor, single_row, with_room, write_f32};
use crate::args::{self, value_err};
use relaxvm::{DataType, Result, Tensor, Value};

/// The token ids (int32, one row) checked against the logits' element count.
fn token_ids(name: &str, args: &[Value], i: usize, logits: usize) -> Result<(Vec<i32>, Tensor)> {
    let (ids, _) = host_tensor(name, args, i, "token_ids", DataType::I32)?;
    single_row(name, ids, "token_ids")?;
    let v = elements::<i32>(name, ids)?;
    if let Some((k, id)) = v.iter().enumerate().find(|(_, id)| usize::try_from(**id).map_or(true, |id| id >= logits)) {
        return Err(value_err(name, format!("token_ids[{k}] = {id} is outside the {logits} logits")));
    }
    Ok((v, ids.clone()))
}

/// `apply_repetition_penalty(logits, token_ids, penalty)`: for each id in turn (a repeated id
/// is penalised again), `logit *= penalty` when `logit <= 0`, else `logit /= penalty`.
pub(super) fn repetition_penalty(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let (logits, _) = host_tensor(name, args, 0, "logits", DataType::F32)?;
    let mut l = elements::<f32>(name, logits)?;
    let (ids, _) = token_ids(name, args, 1, l.len())?;
    let penalty = double(name, args, 2, "penalty")?;
    for id in ids {
        let x = &mut l[id as usize];
        // `float *= double`: widened, multiplied in double, rounded back.
        *x = if *x <= 0.0 { to_f32(mul64(to_f64(*x), penalty)) } else { to_f32(div64(to_f64(*x), penalty)) };
    }
    write_f32(name, logits, "logits", &l)?;
    Ok(Value::Null)
}

/// `apply_presence_and_frequency_penalty(logits, token_ids, token_freqs, presence_penalty,
/// frequency_penalty)`: `logit -= freq * frequency_penalty + presence_penalty`, in double.
pub(super) fn presence_and_frequency_penalty(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 5)?;
    let (logits, _) = host_tensor(name, args, 0, "logits", DataType::F32)?;
    let mut l = elements::<f32>(name, logits)?;
    let (ids, ids_t) = token_ids(name, args, 1, l.len())?;
    let (freqs_t, _) = host_tensor(name, args, 2, "token_freqs", DataType::I32)?;
    if freqs_t.shape() != ids_t.shape() {
        return Err(value_err(
            name,
            format!("token_freqs must have the shape of token_ids {}, found {}", ids_t.shape(), freqs_t.shape()),
        ));
    }
    let freqs = elements::<i32>(name, freqs_t)?;
    let presence = double(name, args, 3, "presence_penalty")?;
    let frequency = double(name, args, 4, "frequency_penalty")?;
    for (id, freq) in ids.iter().zip(freqs) {
        let x = &mut l[*id as usize];
        *x = to_f32(sub64(to_f64(*x), add64(mul64(f64::from(freq), frequency), presence)));
    }
    write_f32(name, logits, "logits", &l)?;
    Ok(Value::Null)
}

/// `apply_softmax_with_temperature(logits, temperature)`: one pass for the running maximum and
/// denominator (a double, the maximum starting at `FLT_MIN` as TVM's
/// `std::numeric_limits<float>::min()` does: logits all below it are shifted by it, not by
/// their maximum), one pass writing `expf(x - m) / d`.
pub(super) fn softmax_with_temperature(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let (logits, _) = host_tensor(name, args, 0, "logits", DataType::F32)?;
    single_row(name, logits, "logits")?;
    let temperature = double(name, args, 1, "temperature")?;
    let l = elements::<f32>(name, logits)?;
    if l.len() > i32::MAX as usize {
        return Err(value_err(
            name,
            format!("TVM counts the vocabulary with an int: at most {} logits, found {}", i32::MAX, l.len()),
        ));
    }
    write_f32(name, logits, "logits", &softmax(name, &l, temperature)?)?;
    Ok(Value::Null)
}

/// The arithmetic of `ApplySoftmaxWithTemperature`.
fn softmax(name: &str, l: &[f32], temperature: f64) -> Result<Vec<f32>> {
    let inv_temp = to_f32(div64(1.0, temperature));
    let mut m = f32::MIN_POSITIVE;
    let mut d = 0.0f64;
    for &v in l {
        // x86's operand order as TVM's binary has it (the NaN that wins): `inv_temp` stays in
        // the destination register, the product with `exp` lands in `exp`'s (see `super::x86`).
        let x = mul32(inv_temp, v);
        let m_prev = m;
        // `std::max(m, x)`: `(m < x) ? x : m`, so a NaN `x` leaves `m`.
        if m < x {
            m = x;
        }
        d = add64(mul64(to_f64(sub32(m_prev, m).exp()), d), to_f64(sub32(x, m).exp()));
    }
    let mut out = with_room(name, l.len())?;
    out.extend(l.iter().map(|&v| to_f32(div64(to_f64(sub32(mul32(inv_temp, v), m).exp()), d))));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_sums_to_one_and_keeps_tvms_start() {
        let p = softmax("t", &[1.0, 2.0, 3.0], 1.0).unwrap();
        let s: f32 = p.iter().sum();
        assert!((s - 1.0).abs() < 1e-6, "{p:?}");
        assert!(p[2] > p[1] && p[1] > p[0]);
        // Temperature 0 makes inv_temp infinite: TVM's arithmetic, NaN and zeros included.
        let q = softmax("t", &[1.0, -1.0], 0.0).unwrap();
        assert!(q[0].is_nan() || q[0] >= 0.0, "{q:?}");
        assert!(softmax("t", &[], 1.0).unwrap().is_empty());
    }
}
