//! The instrument hook that records the steps of one traced run within its byte budget.

use super::copy::{copy_value, same_contents, value_bytes};
use super::{StepValues, Trace, TraceStep};
use crate::arc_string::ArcString;
use crate::value::Value;
use relaxvm_core::instrument::{InstrumentAction, InstrumentCall};
use std::collections::{HashMap, VecDeque};

/// What one step's record costs the budget besides its values.
const STEP_OVERHEAD: usize = std::mem::size_of::<TraceStep>();

/// A call that has started and not yet returned.
struct Open {
    index: usize,
    /// The copied arguments (`None` when they did not fit the budget or could not be copied).
    args: Option<Vec<Value>>,
    /// What `args` costs the budget.
    bytes: usize,
}

/// The state of a traced run.
pub struct TraceRecorder {
    max_bytes: usize,
    /// The bytes of steps and values currently held.
    bytes: usize,
    steps: VecDeque<TraceStep>,
    /// The index of `steps[0]`.
    first: usize,
    /// The number of steps started.
    started: usize,
    open: Vec<Open>,
    /// Indices of steps holding values, in the order they returned: the oldest values go first.
    returned: VecDeque<usize>,
    /// One shared string per function name.
    names: HashMap<String, ArcString>,
}

impl TraceRecorder {
    /// A recorder keeping at most `max_bytes` of steps and values.
    pub fn new(max_bytes: usize) -> Self {
        TraceRecorder {
            max_bytes,
            bytes: 0,
            steps: VecDeque::new(),
            first: 0,
            started: 0,
            open: Vec::new(),
            returned: VecDeque::new(),
            names: HashMap::new(),
        }
    }

    fn name(&mut self, s: &str) -> ArcString {
        if let Some(n) = self.names.get(s) {
            return n.clone();
        }
        let n = ArcString::from(s);
        self.names.insert(s.to_string(), n.clone());
        n
    }

    /// The hook's work for one call event.
    pub fn record(&mut self, call: &InstrumentCall<'_>) -> InstrumentAction {
        if call.before {
            self.start(call);
        } else {
            // An after-event without a result: the call raised.
            self.finish(call.args, call.ret.unwrap_or(&Value::Null), call.ret.is_none());
        }
        InstrumentAction::Continue
    }

    fn start(&mut self, call: &InstrumentCall<'_>) {
        let index = self.started;
        self.started += 1;
        let step = TraceStep {
            index,
            function: self.name(call.caller),
            pc: call.pc,
            callee: self.name(call.name),
            depth: self.open.len(),
            end: 0,
            failed: false,
            values: None,
        };
        self.steps.push_back(step);
        self.bytes = self.bytes.saturating_add(STEP_OVERHEAD);
        let wanted = call.args.iter().fold(0usize, |sum, a| sum.saturating_add(value_bytes(a)));
        // Arguments larger than the whole budget are not copied at all: copying them would
        // only allocate memory the trace must drop at once.
        let args = (wanted <= self.max_bytes)
            .then(|| call.args.iter().map(copy_value).collect::<crate::Result<Vec<_>>>().ok())
            .flatten();
        let bytes = if args.is_some() { wanted } else { 0 };
        self.bytes = self.bytes.saturating_add(bytes);
        self.open.push(Open { index, args, bytes });
        self.enforce_budget();
    }

    /// The innermost open call returned `ret` (or failed); `args` are its arguments now.
    fn finish(&mut self, args: &[Value], ret: &Value, failed: bool) {
        // The VM pairs after-events with before-events; an unpaired one is ignored rather
        // than failing the run.
        let Some(open) = self.open.pop() else { return };
        let end = self.started;
        let values = open.args.and_then(|copied| {
            let mut outputs = Vec::new();
            for (i, (before, now)) in copied.iter().zip(args).enumerate() {
                if let (Value::Tensor(b), Value::Tensor(n)) = (before, now) {
                    if !same_contents(b, n) {
                        outputs.push((i, copy_value(now).ok()?));
                    }
                }
            }
            Some(StepValues { args: copied, result: copy_value(ret).ok()?, outputs })
        });
        self.bytes = self.bytes.saturating_sub(open.bytes);
        let Some(pos) = open.index.checked_sub(self.first) else { return };
        let Some(step) = self.steps.get_mut(pos) else { return };
        step.end = end;
        step.failed = failed;
        let cost = values.as_ref().map_or(0, step_values_bytes);
        if cost <= self.max_bytes {
            step.values = values;
            if step.values.is_some() {
                self.bytes = self.bytes.saturating_add(cost);
                self.returned.push_back(open.index);
            }
        }
        self.enforce_budget();
    }

    /// Drops the oldest values, then the oldest steps, until the trace fits its budget.
    fn enforce_budget(&mut self) {
        while self.bytes > self.max_bytes {
            if let Some(index) = self.returned.pop_front() {
                let dropped =
                    index.checked_sub(self.first).and_then(|pos| self.steps.get_mut(pos)).and_then(|s| s.values.take());
                self.bytes = self.bytes.saturating_sub(dropped.as_ref().map_or(0, step_values_bytes));
            } else if self.steps.pop_front().is_some() {
                self.first += 1;
                self.bytes = self.bytes.saturating_sub(STEP_OVERHEAD);
            } else {
                // Only the open calls' argument copies are left; they are dropped when their
                // calls return.
                break;
            }
        }
    }

    /// The trace: calls still open (the run failed inside them) are closed as failed, with
    /// the arguments they were given.
    pub fn into_trace(mut self, function: &str, result: Value) -> Trace {
        while let Some(open) = self.open.last() {
            let args = open.args.clone().unwrap_or_default();
            self.finish(&args, &Value::Null, true);
        }
        Trace {
            function: function.to_string(),
            steps: self.steps.into(),
            skipped: self.first,
            max_bytes: self.max_bytes,
            result,
        }
    }
}

fn step_values_bytes(v: &StepValues) -> usize {
    v.args
        .iter()
        .chain(std::iter::once(&v.result))
        .chain(v.outputs.iter().map(|(_, o)| o))
        .fold(0usize, |sum, x| sum.saturating_add(value_bytes(x)))
}
