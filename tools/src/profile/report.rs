//! What a profiled run reports: rows per callee, the overhead row, trace events, and their
//! table, CSV, JSON and Chrome-trace forms.

#[cfg(feature = "tooling")]
use serde_json::{json, Value as Json};
use std::fmt::Write;

/// What kind of function a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// A builtin of the registry.
    Builtin,
    /// A kernel of a native library (a TVM model's `.so`).
    Kernel,
    /// A Python function registered as a packed function.
    Python,
    /// A bytecode function called from bytecode (inclusive time).
    Vm,
    /// Time spent in the interpreter itself, in no callee.
    Overhead,
}

impl CallKind {
    /// `"builtin"`, `"kernel"`, `"python"`, `"vm"` or `"overhead"`.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Builtin => "builtin",
            CallKind::Kernel => "kernel",
            CallKind::Python => "python",
            CallKind::Vm => "vm",
            CallKind::Overhead => "overhead",
        }
    }
}

/// One callee's calls, aggregated.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRow {
    /// The callee's name.
    pub name: String,
    /// What it is.
    pub kind: CallKind,
    /// How many calls returned.
    pub count: u64,
    /// Their time: exclusive for leaf callees, inclusive for [`CallKind::Vm`].
    pub total_ns: u64,
    /// The shortest call.
    pub min_ns: u64,
    /// The longest call.
    pub max_ns: u64,
    /// The distinct argument types and shapes seen, e.g. `float32(2, 3), float32(2, 3)`.
    pub shapes: Vec<String>,
}

impl ProfileRow {
    pub(super) fn new(name: &str, bytecode: bool) -> Self {
        let kind = if bytecode { CallKind::Vm } else { CallKind::Builtin };
        ProfileRow {
            name: name.to_string(),
            kind,
            count: 0,
            total_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            shapes: Vec::new(),
        }
    }

    pub(super) fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// The mean time per call (0 without calls).
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// One call, as the Chrome trace format shows it (what [`CallLog::iter`] gives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent<'a> {
    /// The callee.
    pub name: &'a str,
    /// When it started, from the start of the run.
    pub start_ns: u64,
    /// How long it took (inclusive).
    pub dur_ns: u64,
    /// How many calls enclose it.
    pub depth: usize,
    /// The `call` instruction's index within `caller`.
    pub pc: usize,
    /// The calling bytecode function.
    pub caller: &'a str,
    /// The argument types and shapes.
    pub shapes: &'a str,
}

/// Every call of a profiled run, in the order they returned: one compact record per call,
/// whose texts (callee, caller, argument description) are interned once each in a table, so
/// that recording a call allocates nothing and counts no references.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallLog {
    pub(super) records: Vec<CallRecord>,
    pub(super) texts: Vec<Box<str>>,
}

/// One call of a [`CallLog`]: its texts as indices into the log's table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct CallRecord {
    pub(super) name: u32,
    pub(super) caller: u32,
    pub(super) shapes: u32,
    pub(super) depth: usize,
    pub(super) start_ns: u64,
    pub(super) dur_ns: u64,
    pub(super) pc: usize,
}

impl CallLog {
    /// How many calls it holds.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it holds no call.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The calls, in the order they returned.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = TraceEvent<'_>> + '_ {
        self.records.iter().map(|r| TraceEvent {
            name: &self.texts[r.name as usize],
            start_ns: r.start_ns,
            dur_ns: r.dur_ns,
            depth: r.depth,
            pc: r.pc,
            caller: &self.texts[r.caller as usize],
            shapes: &self.texts[r.shapes as usize],
        })
    }
}

/// How [`ProfileReport::table`] orders rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// Most time first.
    Total,
    /// Most calls first.
    Count,
    /// Longest mean first.
    Mean,
    /// By name.
    Name,
}

impl std::str::FromStr for SortBy {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> crate::error::Result<SortBy> {
        match s {
            "total" => Ok(SortBy::Total),
            "count" => Ok(SortBy::Count),
            "mean" => Ok(SortBy::Mean),
            "name" => Ok(SortBy::Name),
            other => Err(crate::error::Error::value(format!(
                "sort_by must be one of \"total\", \"count\", \"mean\", \"name\", found {other:?}"
            ))),
        }
    }
}

/// Where the time of one call went.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileReport {
    /// The function that was run.
    pub function: String,
    /// The wall time of the whole call.
    pub total_ns: u64,
    /// One row per callee, in order of first return, then the `(vm overhead)` row.
    pub rows: Vec<ProfileRow>,
    /// Every call, in order of return.
    pub events: CallLog,
}

/// The name of the row holding the interpreter's own time.
pub const OVERHEAD_ROW: &str = "(vm overhead)";

impl ProfileReport {
    /// A report from the recorded rows and events: the overhead row is the time of the run
    /// that no leaf callee accounts for.
    pub fn new(function: &str, total_ns: u64, mut rows: Vec<ProfileRow>, events: CallLog) -> Self {
        let leaves: u64 = rows.iter().filter(|r| r.kind != CallKind::Vm).map(|r| r.total_ns).sum();
        let overhead = total_ns.saturating_sub(leaves);
        rows.push(ProfileRow {
            name: OVERHEAD_ROW.to_string(),
            kind: CallKind::Overhead,
            count: 1,
            total_ns: overhead,
            min_ns: overhead,
            max_ns: overhead,
            shapes: Vec::new(),
        });
        ProfileReport { function: function.to_string(), total_ns, rows, events }
    }

    /// `row`'s share of [`total_ns`](Self::total_ns), in percent.
    pub fn percent(&self, row: &ProfileRow) -> f64 {
        if self.total_ns == 0 {
            0.0
        } else {
            row.total_ns as f64 * 100.0 / self.total_ns as f64
        }
    }

    /// The rows in `sort_by` order, at most `top` of them.
    pub fn sorted(&self, sort_by: SortBy, top: Option<usize>) -> Vec<&ProfileRow> {
        let mut rows: Vec<&ProfileRow> = self.rows.iter().collect();
        match sort_by {
            SortBy::Total => rows.sort_by_key(|r| std::cmp::Reverse(r.total_ns)),
            SortBy::Count => rows.sort_by_key(|r| std::cmp::Reverse(r.count)),
            SortBy::Mean => rows.sort_by_key(|r| std::cmp::Reverse(r.mean_ns())),
            SortBy::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
        }
        rows.truncate(top.unwrap_or(usize::MAX));
        rows
    }

    /// A fixed-width table: name, kind, calls, total, mean, min, max (µs) and percent.
    pub fn table(&self, sort_by: SortBy, top: Option<usize>) -> String {
        let rows = self.sorted(sort_by, top);
        let width = rows.iter().map(|r| r.name.chars().count()).max().unwrap_or(4).max(4);
        let mut out = format!(
            "profile of {:?}: {:.3} ms\n{:<width$}  {:<8}  {:>8}  {:>12}  {:>10}  {:>10}  {:>10}  {:>6}\n",
            self.function,
            self.total_ns as f64 / 1e6,
            "name",
            "kind",
            "calls",
            "total (us)",
            "mean (us)",
            "min (us)",
            "max (us)",
            "%",
        );
        let us = |ns: u64| ns as f64 / 1e3;
        for r in rows {
            writeln!(
                out,
                "{:<width$}  {:<8}  {:>8}  {:>12.3}  {:>10.3}  {:>10.3}  {:>10.3}  {:>6.2}",
                r.name,
                r.kind.name(),
                r.count,
                us(r.total_ns),
                us(r.mean_ns()),
                us(r.min_ns),
                us(r.max_ns),
                self.percent(r),
            )
            .expect("writing to a String");
        }
        out
    }

    /// CSV: a header and one row per callee, times in nanoseconds.
    #[cfg(feature = "tooling")]
    pub fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let header = ["name", "kind", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "percent", "shapes"];
        // Writing records into memory cannot fail.
        w.write_record(header).expect("writing CSV into memory");
        for r in &self.rows {
            w.write_record([
                r.name.clone(),
                r.kind.name().to_string(),
                r.count.to_string(),
                r.total_ns.to_string(),
                r.mean_ns().to_string(),
                r.min_ns.to_string(),
                r.max_ns.to_string(),
                format!("{:.4}", self.percent(r)),
                r.shapes.join("; "),
            ])
            .expect("writing CSV into memory");
        }
        String::from_utf8(w.into_inner().expect("flushing CSV into memory")).expect("CSV of UTF-8 fields is UTF-8")
    }

    /// `{"function": ..., "total_ns": ..., "calls": [row, ...]}`.
    #[cfg(feature = "tooling")]
    pub fn json(&self) -> String {
        let calls: Vec<Json> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "name": r.name, "kind": r.kind.name(), "count": r.count, "total_ns": r.total_ns,
                    "mean_ns": r.mean_ns(), "min_ns": r.min_ns, "max_ns": r.max_ns,
                    "percent": self.percent(r), "shapes": r.shapes,
                })
            })
            .collect();
        json!({"function": self.function, "total_ns": self.total_ns, "calls": calls}).to_string()
    }

    /// The run in the Chrome trace event format (open it at ui.perfetto.dev or
    /// chrome://tracing): one complete event (`"ph": "X"`) per call, times in microseconds,
    /// the entry function as the outermost event.
    #[cfg(feature = "tooling")]
    pub fn chrome_trace(&self) -> String {
        let us = |ns: u64| ns as f64 / 1e3;
        let mut events = vec![json!({
            "name": self.function, "cat": "vm", "ph": "X", "ts": 0.0, "dur": us(self.total_ns),
            "pid": 1, "tid": 1, "args": {"depth": 0},
        })];
        let kinds: std::collections::HashMap<&str, CallKind> =
            self.rows.iter().map(|r| (r.name.as_str(), r.kind)).collect();
        events.extend(self.events.iter().map(|e| {
            json!({
                "name": e.name,
                "cat": kinds.get(e.name).map_or("builtin", |k| k.name()),
                "ph": "X", "ts": us(e.start_ns), "dur": us(e.dur_ns), "pid": 1, "tid": 1,
                "args": {"shapes": e.shapes, "caller": e.caller, "pc": e.pc, "depth": e.depth + 1},
            })
        }));
        json!({"traceEvents": events, "displayTimeUnit": "ns"}).to_string()
    }
}

impl std::fmt::Display for ProfileReport {
    /// [`ProfileReport::table`] by total time.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.table(SortBy::Total, None))
    }
}
