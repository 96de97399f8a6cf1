//! The profiler: where the time of one call goes, per callee, in every build.
//!
//! `relaxvm::VirtualMachine::profile` runs a function once with a
//! recorder installed as the instrument hook, so it costs nothing while profiling is off (the
//! interpreter's uninstrumented path is unchanged). Each call a `call` instruction makes is
//! timed: leaf callees (builtins, kernels, Python functions) count their exclusive time,
//! bytecode functions called from bytecode count their inclusive time, and the time spent in
//! no callee is the `(vm overhead)` row. The entry function is not a row: its time is
//! [`ProfileReport::total_ns`]. Every call is also an event of the Chrome trace format
//! ([`ProfileReport::chrome_trace`]), nested by depth.

mod recorder;
mod report;

pub use recorder::Recorder;
pub use report::{CallKind, CallLog, ProfileReport, ProfileRow, SortBy, TraceEvent};
