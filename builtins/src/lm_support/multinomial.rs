//! `multinomial_from_uniform(prob, uniform_samples)`: one token per row of `prob`, the first
//! index whose running `float` sum exceeds the row's sample (the last index when none does).

use super::{elements, host_tensor, with_room};
use crate::args::{self, value_err};
use relaxvm::{DataType, Result, Tensor, Value};

/// `prob` is `(batch, vocab)` float32; the samples are float32, one per row (TVM reads any
/// samples tensor as float32: float64 samples would be read as pairs of halves of doubles, so
/// they are refused here). The result is int64 `(batch, 1)`.
pub(super) fn multinomial_from_uniform(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let (prob, vocab) = host_tensor(name, args, 0, "prob", DataType::F32)?;
    if prob.ndim() != 2 {
        return Err(value_err(
            name,
            format!(
                "prob must be (batch, vocab) (TVM reads batch * vocab elements of it), found shape {}",
                prob.shape()
            ),
        ));
    }
    let (samples, _) = host_tensor(name, args, 1, "uniform_samples", DataType::F32)?;
    let batch = prob.shape()[0] as usize;
    if samples.numel() != batch {
        return Err(value_err(
            name,
            format!("uniform_samples must hold one sample per row of prob ({batch}), found shape {}", samples.shape()),
        ));
    }
    if vocab == 0 && batch > 0 {
        return Err(value_err(name, "cannot sample from an empty vocabulary (TVM returns index 0 of none)"));
    }
    let p = elements::<f32>(name, prob)?;
    let u = elements::<f32>(name, samples)?;
    let mut out: Vec<i64> = with_room(name, batch)?;
    out.extend(p.chunks(vocab.max(1)).zip(&u).map(|(row, &s)| sample_row(row, s)));
    Ok(Value::Tensor(Tensor::from_vec([batch as i64, 1], out).map_err(|e| args::in_builtin(name, e))?))
}

/// The first `j` whose running sum exceeds `sample`, else the last index.
fn sample_row(row: &[f32], sample: f32) -> i64 {
    let mut cum = 0.0f32;
    for (j, p) in row.iter().enumerate() {
        cum += p;
        if cum > sample {
            return j as i64;
        }
    }
    row.len() as i64 - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pick_the_first_index_past_the_sample() {
        assert_eq!(sample_row(&[0.25, 0.25, 0.5], 0.3), 1);
        assert_eq!(sample_row(&[0.25, 0.25, 0.5], 0.0), 0);
        assert_eq!(sample_row(&[0.25, 0.25, 0.25], 0.9), 2);
        assert_eq!(sample_row(&[f32::NAN, 1.0], 0.5), 1);
    }
}
