//! Where two traces first differ.
//!
//! Steps are paired by number. The first step whose place in the run differs (another
//! function, pc, callee or depth, or a step one trace lacks) is where control flow diverged.
//! Before it, the results are compared in the order the calls returned — so that a wrong
//! kernel is found before the bytecode function that called it — and the first step whose
//! result, or whose written arguments, differ is the answer. Arguments are not compared: two
//! runs on different inputs differ in their first step's arguments by design.
//!
//! Floats agree as in numpy's `isclose` with `equal_nan=True`: finite values when
//! `|a - b| <= atol + rtol * |b|`, an infinity only with the same infinity, NaN only with NaN;
//! everything else must be equal. Steps whose values were dropped are compared by place only.

use super::copy::MAX_COPY_DEPTH;
use super::{Trace, TraceStep};
use crate::dispatch_dtype;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::value::Value;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

/// How close two floats must be to agree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Tolerance {
    /// A tolerance; both must be non-negative numbers (NaN is not).
    pub fn new(rtol: f64, atol: f64) -> crate::error::Result<Tolerance> {
        if rtol >= 0.0 && atol >= 0.0 {
            Ok(Tolerance { rtol, atol })
        } else {
            Err(crate::error::Error::value(format!(
                "rtol and atol must be non-negative numbers, found rtol={rtol}, atol={atol}"
            )))
        }
    }
}

impl Default for Tolerance {
    /// numpy's `isclose` defaults: `rtol=1e-5`, `atol=1e-8`.
    fn default() -> Self {
        Tolerance { rtol: 1e-5, atol: 1e-8 }
    }
}

/// The first step at which two traces differ.
#[derive(Clone, Debug)]
pub struct TraceDifference {
    /// The step's number.
    pub index: usize,
    /// The first trace's step (`None` when that trace has no step with this number).
    pub a: Option<TraceStep>,
    /// The second trace's step.
    pub b: Option<TraceStep>,
    /// What differs: `"step"` (the call itself), `"result"` or `"outputs[i]"`.
    pub what: String,
    /// How it differs, e.g. `1 of 6 elements differ; the largest difference is 0.5 at (1, 2)`.
    pub detail: String,
}

impl fmt::Display for TraceDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.what == "skipped" {
            return write!(f, "step {}: not compared: {}", self.index, self.detail);
        }
        let step = self.a.as_ref().or(self.b.as_ref());
        match step {
            Some(s) => write!(f, "{}: {} differs: {}", s.label(), self.what, self.detail),
            None => write!(f, "step {}: {} differs: {}", self.index, self.what, self.detail),
        }
    }
}

pub(super) fn first_difference(a: &Trace, b: &Trace, tol: Tolerance) -> Option<TraceDifference> {
    // Steps numbered below `from` are missing from at least one trace. The loop runs once per
    // kept step (`to - from` is at most the longer `steps`), whatever the counts claim.
    let from = a.skipped.max(b.skipped);
    let to = a.total_steps().max(b.total_steps());
    let diverged = (from..to).find_map(|i| place_difference(i, a.step(i), b.step(i)));
    let limit = diverged.as_ref().map_or(to, |d| d.index);
    // The steps that returned before the divergence started, in the order they returned.
    let mut returned: Vec<&TraceStep> =
        a.steps.iter().filter(|s| s.index >= from && s.index < limit && s.end <= limit).collect();
    returned.sort_by_key(|s| (s.end, std::cmp::Reverse(s.depth)));
    for sa in returned {
        let Some(sb) = b.step(sa.index) else { continue };
        if let Some((what, detail)) = values_difference(sa, sb, tol) {
            return Some(TraceDifference { index: sa.index, a: Some(sa.clone()), b: Some(sb.clone()), what, detail });
        }
    }
    diverged.or_else(|| skipped_difference(a, b))
}

/// When the traces dropped different numbers of their first steps, the steps one of them kept
/// and the other dropped were compared with nothing: that is reported rather than "no
/// difference", which would claim agreement about steps never compared.
fn skipped_difference(a: &Trace, b: &Trace) -> Option<TraceDifference> {
    if a.skipped == b.skipped {
        return None;
    }
    let index = a.skipped.min(b.skipped);
    let (which, other) = if a.skipped > b.skipped { ("first", "second") } else { ("second", "first") };
    Some(TraceDifference {
        index,
        a: a.step(index).cloned(),
        b: b.step(index).cloned(),
        what: "skipped".into(),
        detail: format!(
            "the {which} trace dropped steps {index} to {} (skipped = {}), which the {other} kept: they were not \
             compared (record both within the same max_bytes)",
            a.skipped.max(b.skipped) - 1,
            a.skipped.max(b.skipped)
        ),
    })
}

/// The difference in place (the call itself) between the steps numbered `index`.
fn place_difference(index: usize, a: Option<&TraceStep>, b: Option<&TraceStep>) -> Option<TraceDifference> {
    let detail = match (a, b) {
        (Some(x), Some(y)) => {
            let place = |s: &TraceStep| format!("{} pc {} calls {} at depth {}", s.function, s.pc, s.callee, s.depth);
            if (&x.function, x.pc, &x.callee, x.depth) == (&y.function, y.pc, &y.callee, y.depth) {
                return None;
            }
            format!("{} in the first trace, {} in the second", place(x), place(y))
        }
        (Some(_), None) => format!("the second trace ends before step {index}"),
        (None, Some(_)) => format!("the first trace ends before step {index}"),
        (None, None) => return None,
    };
    Some(TraceDifference { index, a: a.cloned(), b: b.cloned(), what: "step".into(), detail })
}

/// The first difference between the results and written arguments of two steps.
fn values_difference(a: &TraceStep, b: &TraceStep, tol: Tolerance) -> Option<(String, String)> {
    let (Some(va), Some(vb)) = (&a.values, &b.values) else { return None };
    if a.failed != b.failed {
        let which = if a.failed { "first" } else { "second" };
        return Some(("result".into(), format!("the call raised in the {which} trace only")));
    }
    let mut equal = Equal::new();
    if let Some(d) = value_difference(&va.result, &vb.result, tol, 0, &mut equal) {
        return Some(("result".into(), d));
    }
    let indices = |v: &super::StepValues| v.outputs.iter().map(|(i, _)| *i).collect::<Vec<_>>();
    if indices(va) != indices(vb) {
        return Some((
            "outputs".into(),
            format!("the call wrote arguments {:?} in the first trace, {:?} in the second", indices(va), indices(vb)),
        ));
    }
    va.outputs
        .iter()
        .zip(&vb.outputs)
        .find_map(|((i, x), (_, y))| value_difference(x, y, tol, 0, &mut equal).map(|d| (format!("outputs[{i}]"), d)))
}

/// Pairs of tuples (by the addresses of their items) already found to agree: a tuple shared in
/// several places is compared once, so comparing costs time linear in distinct tuples.
type Equal = HashSet<(*const Vec<Value>, *const Vec<Value>)>;

/// How `a` and `b` differ, or `None` when they agree.
fn value_difference(a: &Value, b: &Value, tol: Tolerance, depth: usize, equal: &mut Equal) -> Option<String> {
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) => tensor_difference(x, y, tol),
        (Value::Float(x), Value::Float(y)) => (!close(*x, *y, tol)).then(|| format!("{x} vs {y}")),
        (Value::Tuple(x), Value::Tuple(y)) if depth < MAX_COPY_DEPTH => {
            if x.len() != y.len() {
                return Some(format!("a tuple of {} vs a tuple of {}", x.len(), y.len()));
            }
            let pair = (Arc::as_ptr(x), Arc::as_ptr(y));
            if equal.contains(&pair) {
                return None;
            }
            let d =
                x.iter().zip(y.iter()).enumerate().find_map(|(i, (p, q))| {
                    value_difference(p, q, tol, depth + 1, equal).map(|d| format!("[{i}]: {d}"))
                });
            if d.is_none() {
                equal.insert(pair);
            }
            d
        }
        (Value::Tuple(_), Value::Tuple(_)) => deep_difference(a, b, tol, equal),
        // A file stores tuples nested deeper than that as descriptions: their kinds must agree.
        (Value::Tuple(_), Value::Object(_)) | (Value::Object(_), Value::Tuple(_)) if depth >= MAX_COPY_DEPTH => {
            (opaque_kind(a) != opaque_kind(b)).then(|| format!("{} vs {}", a.describe(), b.describe()))
        }
        // Functions, storage and other objects cannot be compared across runs: their kind
        // must agree (a loaded trace holds descriptions of them).
        (Value::Func(_) | Value::Storage(_) | Value::Object(_) | Value::VmState, _) => {
            (opaque_kind(a) != opaque_kind(b)).then(|| format!("{} vs {}", a.describe(), b.describe()))
        }
        _ => (!a.content_eq(b)).then(|| format!("{} vs {}", a.describe(), b.describe())),
    }
}

/// How tuples nested deeper than [`MAX_COPY_DEPTH`] (kept by reference, not copied) differ:
/// with a heap stack instead of recursion, each pair of tuples once.
fn deep_difference(a: &Value, b: &Value, tol: Tolerance, equal: &mut Equal) -> Option<String> {
    let mut pending = vec![(a, b)];
    let mut seen: Equal = HashSet::new();
    while let Some((x, y)) = pending.pop() {
        match (x, y) {
            (Value::Tuple(p), Value::Tuple(q)) => {
                if p.len() != q.len() {
                    return Some(format!(
                        "a tuple of {} vs a tuple of {} (nested deeper than {MAX_COPY_DEPTH})",
                        p.len(),
                        q.len()
                    ));
                }
                // A pair seen before is compared already or waiting on the stack.
                if !Arc::ptr_eq(p, q) && seen.insert((Arc::as_ptr(p), Arc::as_ptr(q))) {
                    pending.extend(p.iter().zip(q.iter()).rev());
                }
            }
            // Not two tuples: `value_difference` does not recurse.
            _ => {
                if let Some(d) = value_difference(x, y, tol, 0, equal) {
                    return Some(format!("{d} (nested deeper than {MAX_COPY_DEPTH})"));
                }
            }
        }
    }
    None
}

/// The kind of an opaque value, also for the descriptions a loaded trace holds.
fn opaque_kind(v: &Value) -> String {
    match v {
        Value::Object(o) => match o.downcast_ref::<super::Opaque>() {
            Some(d) => d.kind.clone(),
            None => v.type_name().to_string(),
        },
        _ => v.type_name().to_string(),
    }
}

/// numpy's `isclose(a, b, rtol, atol, equal_nan=True)`, on the elements widened to f64 (exact
/// for every float dtype): an infinity is close only to the same infinity (the formula alone
/// says `inf <= inf` for `+inf` against `-inf`, or a finite value against an infinity), NaN only
/// to NaN, and finite values when `|a - b| <= atol + rtol * |b|`.
pub(super) fn close(a: f64, b: f64, tol: Tolerance) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= tol.atol + tol.rtol * b.abs()
}

pub(super) fn tensor_difference(a: &Tensor, b: &Tensor, tol: Tolerance) -> Option<String> {
    if a.dtype() != b.dtype() {
        return Some(format!("dtype {} vs {}", a.dtype(), b.dtype()));
    }
    if a.shape() != b.shape() {
        return Some(format!("shape {} vs {}", a.shape(), b.shape()));
    }
    let exact = !a.dtype().is_float();
    let (mut count, mut worst) = (0usize, None::<(f64, usize, String, String)>);
    let same = dispatch_dtype!(a.dtype(), T => {
        let (Ok(x), Ok(y)) = (a.view::<T>(), b.view::<T>()) else {
            return Some("the tensors could not be read".into());
        };
        for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
            let (pf, qf) = (Element::to_f64(*p), Element::to_f64(*q));
            // Integers compare exactly (as f64, int64 values past 2**53 would not).
            let agree = if exact { p == q } else { close(pf, qf, tol) };
            if !agree {
                count += 1;
                let diff = if (pf - qf).is_nan() { f64::INFINITY } else { (pf - qf).abs() };
                if worst.as_ref().is_none_or(|(w, ..)| diff > *w) {
                    worst = Some((diff, i, p.to_string(), q.to_string()));
                }
            }
        }
        count == 0
    });
    if same {
        return None;
    }
    let (diff, flat, p, q) = worst.expect("a differing element");
    Some(format!(
        "{count} of {} elements differ; the largest difference is {diff} at {} ({p} vs {q})",
        a.numel(),
        position(flat, a.shape().dims())
    ))
}

/// The multi-index of flat (C-order) element `flat` in a tensor of shape `dims`.
fn position(mut flat: usize, dims: &[i64]) -> String {
    let mut at = vec![0usize; dims.len()];
    for (slot, d) in at.iter_mut().zip(dims).rev() {
        let d = (*d).max(1) as usize;
        *slot = flat % d;
        flat /= d;
    }
    let parts: Vec<String> = at.iter().map(usize::to_string).collect();
    format!("({})", parts.join(", "))
}

#[cfg(test)]
#[path = "close_tests.rs"]
mod close_tests;
