//! Top-p (nucleus) sampling of one token: `sample_top_p_from_logits` (softmax with temperature
//! first) and `sample_top_p_from_prob`. Each line mirrors TVM's C++ (`SampleTopPFromLogits`,
//! `SampleTopPFromProb`), with its mix of `float` and `double`: a comparison of a `float` with a
//! `double` argument widens the float, a division of two floats stays float.

use super::introsort::{self, OutOfRange};
use super::{double, elements, host_tensor, single_row, with_room};
use crate::args::{self, value_err};
use relaxvm::{DataType, Result, Value};

/// (value, token index), as TVM's `std::pair<float, int>`.
type Entry = (f32, i32);

/// TVM's comparator: larger values first.
fn greater(a: &Entry, b: &Entry) -> bool {
    a.0 > b.0
}

/// `std::sort` by value, largest first; refused if the sort would step outside the vector
/// (libstdc++ would read outside it: see [`introsort`]).
fn sort_desc(name: &str, data: &mut [Entry]) -> Result<()> {
    introsort::sort(data, &greater).map_err(|OutOfRange| {
        value_err(
            name,
            "the values (NaN among them) would make TVM's std::sort read outside the vector (undefined behaviour); refused",
        )
    })
}

/// The entries of a probability or logit row: TVM numbers tokens with an `int`.
fn entries(name: &str, values: &[f32]) -> Result<Vec<Entry>> {
    if values.len() > i32::MAX as usize {
        return Err(value_err(
            name,
            format!("at most {} tokens can be numbered by an int, found {}", i32::MAX, values.len()),
        ));
    }
    let mut out = with_room(name, values.len())?;
    out.extend(values.iter().enumerate().map(|(i, v)| (*v, i as i32)));
    Ok(out)
}

/// `sample_top_p_from_logits(logits, temperature, top_p, uniform_sample)`.
pub(super) fn from_logits(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 4)?;
    let (logits, vocab) = host_tensor(name, args, 0, "logits", DataType::F32)?;
    single_row(name, logits, "logits")?;
    let temperature = double(name, args, 1, "temperature")?;
    let top_p = double(name, args, 2, "top_p")?;
    let uniform = double(name, args, 3, "uniform_sample")?;
    if vocab == 0 {
        return Err(value_err(name, "cannot sample from empty logits (TVM reads the first of none)"));
    }
    let values = elements::<f32>(name, logits)?;
    let mut data = entries(name, &values)?;
    sort_desc(name, &mut data)?;
    sample_sorted_logits(name, &mut data, temperature, top_p, uniform).map(|i| Value::Int(i64::from(i)))
}

/// The sampling after the sort.
fn sample_sorted_logits(name: &str, data: &mut [Entry], temperature: f64, top_p: f64, uniform: f64) -> Result<i32> {
    // `temperature < 1e-6f`: the float constant widened to double.
    if temperature < f64::from(1e-6f32) {
        return Ok(data[0].1);
    }
    // `float logit_scale = 1.0f / temperature`: a double division rounded to float.
    let logit_scale = (1.0 / temperature) as f32;
    let max_value = data[0].0;
    let mut sum = 0.0f32;
    for e in data.iter_mut() {
        e.0 = ((e.0 - max_value) * logit_scale).exp();
        sum += e.0;
    }
    let mut cum_sum_prob = 0.0f32;
    let mut top_p_sum = 0.0f32;
    for e in data.iter_mut() {
        let prob = e.0 / sum;
        if f64::from(cum_sum_prob) < top_p {
            top_p_sum += prob;
        }
        cum_sum_prob += prob;
        e.0 = cum_sum_prob;
    }
    for e in data.iter() {
        if uniform < f64::from(e.0 / top_p_sum) {
            return Ok(e.1);
        }
    }
    // TVM's `ICHECK_LE(uniform_sample, data[0].first)`.
    if uniform <= f64::from(data[0].0) {
        Ok(data[0].1)
    } else {
        Err(value_err(
            name,
            format!(
                "no token was sampled: uniform_sample {uniform} must be at most the first cumulative probability {} (TVM's check)",
                data[0].0
            ),
        ))
    }
}

/// `sample_top_p_from_prob(prob, top_p, uniform_sample)`.
pub(super) fn from_prob(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let (prob, _) = host_tensor(name, args, 0, "prob", DataType::F32)?;
    single_row(name, prob, "prob")?;
    let top_p = double(name, args, 1, "top_p")?;
    let uniform = double(name, args, 2, "uniform_sample")?;
    let p = elements::<f32>(name, prob)?;
    entries(name, &p)?;
    sample_prob(name, &p, top_p, uniform).map(Value::Int)
}

/// TVM's `sample_top_p_with_filter`: the entries of at least `cutoff`, sorted, sampled; `None`
/// for TVM's -1 (nothing left, or the kept mass below `top_p` at a non-zero cutoff).
fn sample_with_filter(name: &str, p: &[f32], cutoff: f32, top_p: f64, uniform: f64) -> Result<Option<i64>> {
    let mut data: Vec<Entry> = with_room(name, p.iter().filter(|v| **v >= cutoff).count())?;
    data.extend(p.iter().enumerate().filter(|(_, v)| **v >= cutoff).map(|(i, v)| (*v, i as i32)));
    if data.is_empty() {
        return Ok(None);
    }
    sort_desc(name, &mut data)?;
    // `uniform_sample < data[0].first / top_p`: the float widened, divided in double.
    if uniform < f64::from(data[0].0) / top_p {
        return Ok(Some(i64::from(data[0].1)));
    }
    let mut cum_sum_prob = 0.0f32;
    let mut top_p_sum = 0.0f32;
    // Entries past the cut keep their probabilities (not cumulated), and the next loop reads
    // them as TVM's does.
    for e in data.iter_mut() {
        let prob = e.0;
        if f64::from(cum_sum_prob) < top_p {
            top_p_sum += prob;
        } else {
            break;
        }
        cum_sum_prob += prob;
        e.0 = cum_sum_prob;
    }
    if f64::from(cum_sum_prob) < top_p && cutoff != 0.0 {
        return Ok(None);
    }
    for e in &data {
        if uniform < f64::from(e.0 / top_p_sum) {
            return Ok(Some(i64::from(e.1)));
        }
    }
    Ok(Some(i64::from(data[data.len() - 1].1)))
}

/// The whole of `SampleTopPFromProb`: a cut at `top_p / 1024` first (when `top_p < 1`), all
/// entries if that fails.
fn sample_prob(name: &str, p: &[f32], top_p: f64, uniform: f64) -> Result<i64> {
    if top_p < 1.0 {
        // `sample_top_p_with_filter(top_p / 1024)`: the double quotient passed as a float.
        if let Some(i) = sample_with_filter(name, p, (top_p / 1024.0) as f32, top_p, uniform)? {
            return Ok(i);
        }
    }
    match sample_with_filter(name, p, 0.0, top_p, uniform)? {
        Some(i) => Ok(i),
        None if p.iter().all(|x| x.is_nan()) => {
            Err(value_err(name, "The output probabilities are all NaNs, can not sample from it"))
        }
        None => {
            Err(value_err(name, "Cannot sample from the given probability distribution: no probability is at least 0"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_below_the_temperature_floor() {
        let mut d = entries("t", &[0.5, 3.0, 1.0]).unwrap();
        sort_desc("t", &mut d).unwrap();
        assert_eq!(sample_sorted_logits("t", &mut d.clone(), 0.0, 0.9, 0.5).unwrap(), 1);
        assert_eq!(sample_sorted_logits("t", &mut d, 1e-7, 0.9, 0.99).unwrap(), 1);
    }

    #[test]
    fn top_p_keeps_the_head() {
        // Probabilities 0.5, 0.3, 0.2: top_p 0.6 keeps the first two (mass 0.8).
        let p = [0.2f32, 0.5, 0.3];
        assert_eq!(sample_prob("t", &p, 0.6, 0.1).unwrap(), 1);
        assert_eq!(sample_prob("t", &p, 0.6, 0.7).unwrap(), 1); // u < 0.5 / 0.6: TVM's shortcut
        assert_eq!(sample_prob("t", &p, 0.6, 0.9).unwrap(), 2);
        let e = sample_prob("t", &[f32::NAN, f32::NAN], 0.9, 0.5).unwrap_err().to_string();
        assert!(e.contains("all NaNs"), "{e}");
        let e = sample_prob("t", &[-1.0, -2.0], 0.9, 0.5).unwrap_err().to_string();
        assert!(e.contains("at least 0"), "{e}");
        let e = sample_prob("t", &[], 0.9, 0.5).unwrap_err().to_string();
        assert!(e.contains("all NaNs"), "{e}");
    }

    #[test]
    fn a_sample_past_the_mass_is_tvms_error() {
        let mut d = entries("t", &[1.0, 1.0]).unwrap();
        sort_desc("t", &mut d).unwrap();
        let e = sample_sorted_logits("t", &mut d, 1.0, 0.9, 2.0).unwrap_err().to_string();
        assert!(e.contains("uniform_sample 2"), "{e}");
    }
}
