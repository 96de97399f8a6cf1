//! The instrument hook's protocol: what the interpreter shows a hook of each `call` it makes,
//! and what the hook may answer. The profiler and the tracer are such hooks.

use crate::error::Result;
use crate::value::Value;

/// One `call` as the instrument hook sees it.
pub struct InstrumentCall<'a> {
    /// The called function as a value.
    pub func: &'a Value,
    /// Its name.
    pub name: &'a str,
    /// True before the call runs, false after.
    pub before: bool,
    /// The call's arguments.
    pub args: &'a [Value],
    /// The result, after the call; `None` before it, and after a call that raised (the hook
    /// sees every call that started end, so that it can pair its events; the error goes on).
    pub ret: Option<&'a Value>,
    /// The bytecode function making the call.
    pub caller: &'a str,
    /// The index of the `call` instruction within `caller`.
    pub pc: usize,
}

/// What the instrument hook asks the VM to do with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstrumentAction {
    /// Run the call (or, after it, go on).
    Continue,
    /// Skip the call; its destination receives null.
    Skip,
}

/// The instrument hook type.
pub type Instrument = Box<dyn FnMut(&InstrumentCall<'_>) -> Result<InstrumentAction> + Send>;
