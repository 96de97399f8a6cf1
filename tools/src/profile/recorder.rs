//! The instrument hook that records the calls of one profiled run.

use super::report::{ProfileRow, TraceEvent};
use crate::value::Value;
use indexmap::IndexMap;
use relaxvm_core::instrument::{InstrumentAction, InstrumentCall};
use std::time::Instant;

/// How many distinct argument descriptions a row keeps (a loop over many shapes would
/// otherwise grow it without bound).
const MAX_SHAPES_PER_ROW: usize = 16;

/// A call that has started and not yet returned.
struct Open {
    name: String,
    bytecode: bool,
    start: Instant,
    /// Inclusive time of the calls it made.
    children_ns: u64,
    shapes: String,
    pc: usize,
    caller: String,
}

/// What a profiled run records: one open call per nesting level, and the rows and events of
/// the calls that returned.
pub struct Recorder {
    t0: Instant,
    open: Vec<Open>,
    /// One row per callee, in the order of their first calls.
    pub rows: IndexMap<String, ProfileRow>,
    /// The Chrome-trace events, in the order the calls started.
    pub events: Vec<TraceEvent>,
}

/// `float32(2, 3), int 4`: the argument types and shapes of a call.
pub(crate) fn describe_args(args: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match a {
            // Written in place: a `format!` per tensor was an allocation per call profiled.
            Value::Tensor(t) => {
                let _ = write!(out, "{}{}", t.dtype(), t.shape());
            }
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => out.push_str(a.type_name()),
            other => out.push_str(&other.describe()),
        }
    }
    out
}

impl Recorder {
    /// A recorder whose times count from `t0`.
    pub fn new(t0: Instant) -> Self {
        Recorder { t0, open: Vec::new(), rows: IndexMap::new(), events: Vec::new() }
    }

    /// The hook's work for one call event.
    pub fn record(&mut self, call: &InstrumentCall<'_>) -> InstrumentAction {
        let now = Instant::now();
        if call.before {
            let bytecode =
                matches!(call.func, Value::Func(c) if matches!(c.callable, crate::value::Callable::Bytecode { .. }));
            self.open.push(Open {
                name: call.name.to_string(),
                bytecode,
                start: now,
                children_ns: 0,
                shapes: describe_args(call.args),
                pc: call.pc,
                caller: call.caller.to_string(),
            });
            return InstrumentAction::Continue;
        }
        // An after-event without its before-event cannot happen (the VM pairs them); ignore it
        // rather than fail a run.
        let Some(open) = self.open.pop() else { return InstrumentAction::Continue };
        let dur = nanos(now.duration_since(open.start));
        if let Some(parent) = self.open.last_mut() {
            parent.children_ns += dur;
        }
        let counted = if open.bytecode { dur } else { dur.saturating_sub(open.children_ns) };
        // Looked up by reference first: the name is copied only for a new row.
        let row = match self.rows.get_index_of(open.name.as_str()) {
            Some(i) => &mut self.rows[i],
            None => self.rows.entry(open.name.clone()).or_insert_with(|| ProfileRow::new(&open.name, open.bytecode)),
        };
        row.add(counted);
        if row.shapes.len() < MAX_SHAPES_PER_ROW && !row.shapes.contains(&open.shapes) {
            row.shapes.push(open.shapes.clone());
        }
        self.events.push(TraceEvent {
            name: open.name,
            start_ns: nanos(open.start.duration_since(self.t0)),
            dur_ns: dur,
            depth: self.open.len(),
            pc: open.pc,
            caller: open.caller,
            shapes: open.shapes,
        });
        InstrumentAction::Continue
    }
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
