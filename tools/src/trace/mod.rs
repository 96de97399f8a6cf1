//! The tracer: every call one run makes, in order, with copies of what it was given and what
//! it produced — to find which step produced a wrong value.
//!
//! `relaxvm::VirtualMachine::trace` runs a function once with a
//! recorder installed as the instrument hook (so, like the profiler, it costs nothing while
//! not asked for). Each `call` instruction that runs is one [`TraceStep`], numbered in the
//! order the calls start: its caller and pc, its callee, its nesting depth and copies of its
//! arguments, its result and the arguments it wrote (TVM kernels write their results into
//! their trailing arguments, destination-passing style, and return nothing).
//!
//! Copies are bounded by [`TraceOptions::max_bytes`]: over it, the values of the steps that
//! returned first are dropped (the step stays, with [`TraceStep::values`] `None` as the
//! marker), and when even the steps' own records exceed it, the oldest steps are dropped
//! whole ([`Trace::skipped`] counts them). Running out of the budget is never an error.
//!
//! [`Trace::first_difference`] compares two traces (two inputs, two builds, relaxvm against
//! a saved reference) and names the first step whose result differs; [`Trace::save`] and
//! [`Trace::load`] keep a trace in a numpy `.npz` file.

mod check;
mod compare;
mod copy;
mod file;
mod load;
mod recorder;
#[cfg(test)]
mod tests;

pub use compare::{Tolerance, TraceDifference};
pub use file::Opaque;
pub use load::{LOAD_LIMIT_BASE, LOAD_LIMIT_PER_FILE_BYTE, MAX_JSON_DEPTH};
pub use recorder::TraceRecorder;

use crate::arc_string::ArcString;
use crate::error::Error;
use crate::value::Value;
use std::fmt;

/// The default bound on the bytes of values a trace keeps: 256 MiB.
pub const DEFAULT_MAX_BYTES: usize = 256 << 20;

/// How to trace.
#[derive(Clone, Copy, Debug)]
pub struct TraceOptions {
    /// The most bytes of copied values (and step records) the trace keeps; older values are
    /// dropped past it.
    pub max_bytes: usize,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions { max_bytes: DEFAULT_MAX_BYTES }
    }
}

/// What a step's call was given and produced, as copies taken when it ran.
#[derive(Clone, Debug)]
pub struct StepValues {
    /// The arguments, copied before the call.
    pub args: Vec<Value>,
    /// The call's result (null when it failed or returns nothing).
    pub result: Value,
    /// The tensor arguments whose contents the call changed, by argument index, copied after
    /// it: the outputs of destination-passing kernels. An argument the call wrote with the
    /// bytes it already held is not among them.
    pub outputs: Vec<(usize, Value)>,
}

/// One call of a traced run.
#[derive(Clone, Debug)]
pub struct TraceStep {
    /// The step's number: calls are numbered from 0 in the order they start.
    pub index: usize,
    /// The bytecode function making the call.
    pub function: ArcString,
    /// The index of the `call` instruction within `function`.
    pub pc: usize,
    /// The called function's name.
    pub callee: ArcString,
    /// How many traced calls enclose this one (0 for calls of the entry function).
    pub depth: usize,
    /// How many steps had started when this one returned: a step returned before step `s`
    /// started exactly when `end <= s`.
    pub end: usize,
    /// True when the call raised the run's error (its result is null).
    pub failed: bool,
    /// The copies, or `None` when they were dropped to stay within the trace's budget (or a
    /// value could not be copied).
    pub values: Option<StepValues>,
}

impl TraceStep {
    /// `step 3 (main pc 2: vm.op.add)`.
    pub fn label(&self) -> String {
        format!("step {} ({} pc {}: {})", self.index, self.function, self.pc, self.callee)
    }
}

/// Every call of one run (`relaxvm::VirtualMachine::trace`).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The function that was run.
    pub function: String,
    /// The steps kept, in order of their index; the first is number [`skipped`](Self::skipped).
    pub steps: Vec<TraceStep>,
    /// How many of the first steps were dropped whole to stay within the budget.
    pub skipped: usize,
    /// The budget the trace was recorded with.
    pub max_bytes: usize,
    /// The run's result (not a copy; null when the run failed).
    pub result: Value,
}

impl Trace {
    /// The number of steps the run made, including skipped ones.
    pub fn total_steps(&self) -> usize {
        // Saturating: the fields are public, and a trace built with a wild `skipped` must not
        // wrap around (a loaded trace is checked, see `check`).
        self.skipped.saturating_add(self.steps.len())
    }

    /// The step numbered `index`, unless it was skipped or the run made fewer steps.
    pub fn step(&self, index: usize) -> Option<&TraceStep> {
        index.checked_sub(self.skipped).and_then(|i| self.steps.get(i))
    }

    /// The steps whose callee is `callee`, in order.
    pub fn find<'a>(&'a self, callee: &'a str) -> impl Iterator<Item = &'a TraceStep> + 'a {
        self.steps.iter().filter(move |s| &*s.callee == callee)
    }

    /// How many kept steps lost their values to the budget.
    pub fn dropped(&self) -> usize {
        self.steps.iter().filter(|s| s.values.is_none()).count()
    }

    /// The first step at which `self` and `other` differ (see [`compare`](self) for the rules),
    /// or `None` when every result agrees within `tolerance`.
    pub fn first_difference(&self, other: &Trace, tolerance: Tolerance) -> Option<TraceDifference> {
        compare::first_difference(self, other, tolerance)
    }
}

/// The deepest nesting the listing shows by indentation; deeper steps are indented this far
/// and labelled with their depth.
const MAX_INDENT: usize = 32;

/// One line per step: its number, its place (indented by depth), the call with its argument
/// types and shapes, what it returned and which arguments it wrote.
impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trace of {:?}: {} steps", self.function, self.total_steps())?;
        if self.skipped > 0 {
            write!(f, " (the first {} dropped)", self.skipped)?;
        }
        let dropped = self.dropped();
        if dropped > 0 {
            write!(f, ", values of {dropped} dropped")?;
        }
        for s in &self.steps {
            write!(f, "\n{:>6}  ", s.index)?;
            // Deep recursion is indented to a bounded width and says its depth: an indent as
            // wide as a 40,000-deep call would make the listing quadratic in size (and format
            // widths past 65,535 panic).
            for _ in 0..s.depth.min(MAX_INDENT) {
                f.write_str("  ")?;
            }
            if s.depth > MAX_INDENT {
                write!(f, "[depth {}] ", s.depth)?;
            }
            write!(f, "{} pc {}: {}", s.function, s.pc, s.callee)?;
            match &s.values {
                Some(v) => {
                    let args: Vec<String> = v.args.iter().map(brief).collect();
                    write!(f, "({})", args.join(", "))?;
                    if !matches!(v.result, Value::Null) {
                        write!(f, " -> {}", brief(&v.result))?;
                    }
                    for (i, o) in &v.outputs {
                        write!(f, " writes [{i}] {}", brief(o))?;
                    }
                }
                None => write!(f, "(values dropped)")?,
            }
            if s.failed {
                write!(f, " raised")?;
            }
        }
        Ok(())
    }
}

/// A value in a listing: tensors by dtype and shape, scalars and shapes by value, other values
/// by kind.
fn brief(v: &Value) -> String {
    match v {
        Value::Tensor(t) => format!("{}{}", t.dtype(), t.shape()),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::Shape(_) | Value::DType(_) => v.to_string(),
        Value::Str(s) if s.len() <= 40 => format!("{:?}", s.as_str()),
        other => other.type_name().to_string(),
    }
}

/// A traced run that raised: the error, and the trace up to it (the failing calls are its
/// last steps, marked [`failed`](TraceStep::failed)).
#[derive(Debug)]
pub struct TracedError {
    /// The run's error.
    pub error: Error,
    /// What was traced before and up to it.
    pub trace: Box<Trace>,
}

impl fmt::Display for TracedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for TracedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<TracedError> for Error {
    fn from(e: TracedError) -> Self {
        e.error
    }
}
