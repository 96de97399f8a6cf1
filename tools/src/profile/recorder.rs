//! The instrument hook that records the calls of one profiled run.
//!
//! Its work per call is what a profile needs and no more: two clock reads, a few table lookups
//! and one compact record pushed, with no allocation and no reference counting. Names, callers
//! and argument descriptions are interned once each in the log's text table, and a call's
//! arguments are described as text only when they differ in type or shape from the previous
//! call of the same callee.

use super::report::{CallLog, CallRecord, ProfileRow};
use crate::value::Value;
use relaxvm_core::dtype::DataType;
use relaxvm_core::instrument::{InstrumentAction, InstrumentCall};
use relaxvm_core::shape::Shape;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

/// How many distinct argument descriptions a row keeps (a loop over many shapes would
/// otherwise grow it without bound).
const MAX_SHAPES_PER_ROW: usize = 16;

/// A call that has started and not yet returned.
struct Open {
    /// Its callee, an index into [`Recorder::callees`].
    callee: u32,
    start: Instant,
    /// Inclusive time of the calls it made.
    children_ns: u64,
    /// The texts (see [`CallLog::text`]) of its argument description and of its caller.
    shapes: u32,
    caller: u32,
    pc: usize,
}

/// What the recorder knows of one callee name.
struct Callee {
    /// Its name, a text of the log.
    name: u32,
    bytecode: bool,
    /// Its row in [`Recorder::rows`], once a call of it returned.
    row: Option<usize>,
    /// The argument kinds of its last call and their description (see [`ArgLook`]).
    last_args: Vec<ArgLook>,
    last_shapes: u32,
    /// The descriptions its row lists (at most [`MAX_SHAPES_PER_ROW`]).
    row_shapes: Vec<u32>,
}

/// What [`describe_args`] writes of one argument, kept to compare with the next call's: a
/// tensor's dtype and shape (the shape shared, not copied), a scalar's type, anything else's
/// description.
enum ArgLook {
    Tensor(DataType, Shape),
    Scalar(&'static str),
    Other,
}

impl ArgLook {
    fn of(v: &Value) -> ArgLook {
        match v {
            Value::Tensor(t) => ArgLook::Tensor(t.dtype(), t.shape().clone()),
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => ArgLook::Scalar(v.type_name()),
            _ => ArgLook::Other,
        }
    }

    /// Whether `v` is described as this kind was (`Other` always describes afresh).
    fn matches(&self, v: &Value) -> bool {
        match (self, v) {
            (ArgLook::Tensor(d, s), Value::Tensor(t)) => *d == t.dtype() && s == t.shape(),
            (ArgLook::Scalar(n), Value::Int(_) | Value::Float(_) | Value::Bool(_)) => *n == v.type_name(),
            _ => false,
        }
    }
}

/// A hasher for addresses: one multiply spreads an address's bits (the default hasher, made to
/// resist chosen keys, costs as much as the rest of a call's recording).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 ^ self.0.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Texts by the address and length of the text the VM lends (its executable's, unchanged for
/// the run): a repeated name is found without reading its text (the text is compared too, as
/// an address names the same text only while it is lent).
type ByAddr = HashMap<(usize, usize), u32, BuildHasherDefault<AddrHasher>>;

/// What a profiled run records: one open call per nesting level, and the rows and the log of
/// the calls that returned.
pub struct Recorder {
    t0: Instant,
    open: Vec<Open>,
    callees: Vec<Callee>,
    callee_at: ByAddr,
    /// Callees by name text (a name lent from another address).
    callee_named: HashMap<u32, u32>,
    caller_at: ByAddr,
    /// The last callee and caller found, by the address of their name, each with its index:
    /// consecutive calls mostly have the same caller and often the same callee (a loop, a
    /// straight run of copies), which then costs a compare instead of a hash lookup.
    last_callee: Memo,
    last_caller: Memo,
    /// Texts by content, to intern each once.
    text_ids: HashMap<Box<str>, u32>,
    /// One row per callee, in the order of their first returns.
    rows: Vec<ProfileRow>,
    log: CallLog,
}

/// The address of a text the VM lent and what it was found to be (see
/// [`Recorder::last_callee`]); the text is compared before the index is used, as for [`ByAddr`].
#[derive(Clone, Copy)]
struct Memo {
    at: (usize, usize),
    index: u32,
}

impl Memo {
    /// A memo that matches no text (no text has length `usize::MAX`).
    const NONE: Memo = Memo { at: (0, usize::MAX), index: 0 };
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

/// The key of text lent by the VM: its address and length.
fn addr(s: &str) -> (usize, usize) {
    (s.as_ptr() as usize, s.len())
}

impl Recorder {
    /// A recorder whose times count from `t0`.
    pub fn new(t0: Instant) -> Self {
        Recorder {
            t0,
            open: Vec::new(),
            callees: Vec::new(),
            callee_at: ByAddr::default(),
            callee_named: HashMap::new(),
            caller_at: ByAddr::default(),
            last_callee: Memo::NONE,
            last_caller: Memo::NONE,
            text_ids: HashMap::new(),
            rows: Vec::new(),
            log: CallLog::default(),
        }
    }

    /// The rows (one per callee, in the order of their first returns) and the log of the
    /// calls (in the order they returned).
    pub fn into_parts(self) -> (Vec<ProfileRow>, CallLog) {
        (self.rows, self.log)
    }

    /// The hook's work for one call event.
    pub fn record(&mut self, call: &InstrumentCall<'_>) -> InstrumentAction {
        let now = Instant::now();
        if call.before {
            let callee = self.callee(call);
            let shapes = self.shapes(callee, call.args);
            let caller = self.caller(call.caller);
            self.open.push(Open { callee, start: now, children_ns: 0, shapes, caller, pc: call.pc });
            return InstrumentAction::Continue;
        }
        // An after-event without its before-event cannot happen (the VM pairs them); ignore it
        // rather than fail a run.
        let Some(open) = self.open.pop() else { return InstrumentAction::Continue };
        let dur = nanos(now.duration_since(open.start));
        if let Some(parent) = self.open.last_mut() {
            parent.children_ns += dur;
        }
        let callee = &mut self.callees[open.callee as usize];
        let counted = if callee.bytecode { dur } else { dur.saturating_sub(open.children_ns) };
        let texts = &self.log.texts;
        let row = *callee.row.get_or_insert_with(|| {
            self.rows.push(ProfileRow::new(&texts[callee.name as usize], callee.bytecode));
            self.rows.len() - 1
        });
        let row = &mut self.rows[row];
        row.add(counted);
        if callee.row_shapes.len() < MAX_SHAPES_PER_ROW && !callee.row_shapes.contains(&open.shapes) {
            callee.row_shapes.push(open.shapes);
            row.shapes.push(texts[open.shapes as usize].to_string());
        }
        self.log.records.push(CallRecord {
            name: callee.name,
            caller: open.caller,
            shapes: open.shapes,
            depth: self.open.len(),
            start_ns: nanos(open.start.duration_since(self.t0)),
            dur_ns: dur,
            pc: open.pc,
        });
        InstrumentAction::Continue
    }

    /// `text`'s index in the log's text table, added if new.
    fn intern(&mut self, text: &str) -> u32 {
        if let Some(&i) = self.text_ids.get(text) {
            return i;
        }
        let i = u32::try_from(self.log.texts.len()).expect("fewer than 2^32 distinct texts");
        self.log.texts.push(text.into());
        self.text_ids.insert(text.into(), i);
        i
    }

    /// The callee of `call`, interned.
    fn callee(&mut self, call: &InstrumentCall<'_>) -> u32 {
        let at = addr(call.name);
        let memo = self.last_callee;
        if memo.at == at && *self.log.texts[self.callees[memo.index as usize].name as usize] == *call.name {
            return memo.index;
        }
        let i = self.callee_by_name(call);
        self.last_callee = Memo { at, index: i };
        i
    }

    /// [`Self::callee`] past its memo.
    fn callee_by_name(&mut self, call: &InstrumentCall<'_>) -> u32 {
        if let Some(&i) = self.callee_at.get(&addr(call.name)) {
            if *self.log.texts[self.callees[i as usize].name as usize] == *call.name {
                return i;
            }
        }
        let name = self.intern(call.name);
        let i = match self.callee_named.get(&name) {
            Some(&i) => i,
            None => {
                let bytecode = matches!(call.func, Value::Func(c) if matches!(c.callable, crate::value::Callable::Bytecode { .. }));
                let i = u32::try_from(self.callees.len()).expect("fewer callees than functions");
                self.callees.push(Callee {
                    name,
                    bytecode,
                    row: None,
                    last_args: Vec::new(),
                    last_shapes: u32::MAX,
                    row_shapes: Vec::new(),
                });
                self.callee_named.insert(name, i);
                i
            }
        };
        self.callee_at.insert(addr(call.name), i);
        i
    }

    /// The description of `args` for a call of `callee`: the previous call's when the types
    /// and shapes are the same.
    fn shapes(&mut self, callee: u32, args: &[Value]) -> u32 {
        let c = &self.callees[callee as usize];
        let same = c.last_shapes != u32::MAX
            && c.last_args.len() == args.len()
            && c.last_args.iter().zip(args).all(|(k, v)| k.matches(v));
        if same {
            return c.last_shapes;
        }
        let shapes = self.intern(&describe_args(args));
        let c = &mut self.callees[callee as usize];
        c.last_args = args.iter().map(ArgLook::of).collect();
        c.last_shapes = shapes;
        shapes
    }

    /// The calling function's name, interned.
    fn caller(&mut self, caller: &str) -> u32 {
        let at = addr(caller);
        let memo = self.last_caller;
        if memo.at == at && *self.log.texts[memo.index as usize] == *caller {
            return memo.index;
        }
        let i = match self.caller_at.get(&at) {
            Some(&i) if *self.log.texts[i as usize] == *caller => i,
            _ => {
                let i = self.intern(caller);
                self.caller_at.insert(at, i);
                i
            }
        };
        self.last_caller = Memo { at, index: i };
        i
    }
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use relaxvm_core::tensor::Tensor;

    fn call<'a>(name: &'a str, before: bool, args: &'a [Value], caller: &'a str) -> InstrumentCall<'a> {
        const NULL: &Value = &Value::Null;
        InstrumentCall { func: NULL, name, before, args, ret: None, caller, pc: 3 }
    }

    fn tensor(dims: &[i64]) -> Value {
        let n = dims.iter().product::<i64>() as usize;
        Value::Tensor(Tensor::from_vec(dims.to_vec(), vec![0f32; n]).unwrap())
    }

    /// Runs the calls `(name, args)` one after the other through `rec`.
    fn run(rec: &mut Recorder, calls: &[(&str, Vec<Value>)]) {
        for (name, args) in calls {
            rec.record(&call(name, true, args, "main"));
            rec.record(&call(name, false, args, "main"));
        }
    }

    #[test]
    fn a_new_shape_type_or_arity_is_described_afresh() {
        let mut rec = Recorder::new(Instant::now());
        let calls = [
            ("f", vec![tensor(&[2, 3])]),
            ("f", vec![tensor(&[2, 3])]),
            ("f", vec![tensor(&[4])]),
            ("f", vec![Value::Int(1)]),
            ("f", vec![Value::Float(1.0)]),
            ("f", vec![Value::Int(1), Value::Int(2)]),
            ("f", vec![Value::Str("s".into())]),
        ];
        run(&mut rec, &calls);
        let (rows, events) = rec.into_parts();
        let shapes: Vec<&str> = events.iter().map(|e| e.shapes).collect();
        let want: Vec<String> = calls.iter().map(|(_, a)| describe_args(a)).collect();
        assert_eq!(shapes, want);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].count, 7);
        // The distinct descriptions, each once.
        assert_eq!(rows[0].shapes.len(), 6, "{:?}", rows[0].shapes);
    }

    #[test]
    fn a_name_lent_from_another_address_finds_its_row_and_a_reused_address_its_own() {
        let mut rec = Recorder::new(Instant::now());
        let (a, b) = (String::from("same"), String::from("same"));
        run(&mut rec, &[(a.as_str(), vec![]), (b.as_str(), vec![])]);
        // The same address, later holding another name.
        let mut c = String::from("one");
        run(&mut rec, &[(c.as_str(), vec![])]);
        c.replace_range(.., "two");
        run(&mut rec, &[(c.as_str(), vec![])]);
        let (rows, events) = rec.into_parts();
        let rows: Vec<(&str, u64)> = rows.iter().map(|r| (r.name.as_str(), r.count)).collect();
        assert_eq!(rows, [("same", 2), ("one", 1), ("two", 1)]);
        assert!(events.iter().all(|e| e.caller == "main" && e.pc == 3));
        assert_eq!(events.len(), 4);
    }

    #[test]
    fn a_callers_reused_address_names_its_own_caller() {
        // Consecutive calls from one address: the memo of the last caller must still compare
        // the text, as the hash lookup does.
        let mut rec = Recorder::new(Instant::now());
        let mut caller = String::from("outer");
        for name in ["f", "f"] {
            rec.record(&call(name, true, &[], &caller));
            rec.record(&call(name, false, &[], &caller));
        }
        caller.replace_range(.., "inner");
        rec.record(&call("f", true, &[], &caller));
        rec.record(&call("f", false, &[], &caller));
        let (_, events) = rec.into_parts();
        let callers: Vec<&str> = events.iter().map(|e| e.caller).collect();
        assert_eq!(callers, ["outer", "outer", "inner"]);
    }
}
