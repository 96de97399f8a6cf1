//! How long a packed function may run, as its author declares it.

/// How long a packed function may run, as its author declares it: a caller that holds a lock
/// others wait for (Python's GIL) reads it to decide whether releasing the lock first is worth
/// its own cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Cost {
    /// Small work bounded independently of the arguments: no loops over tensor data, no
    /// allocation proportional to the input, no calls to other functions.
    Constant,
    /// Anything else (the default): may loop over data, allocate, block or call back.
    #[default]
    Unbounded,
}
