//! The pool's own errors: a thread count that cannot be used, a parallel fill that failed, and
//! the message of a task's panic. The crates above turn them into their error type
//! (`relaxvm-core`: `relaxvm::Error`, a value error with the same message).

use crate::{TaskFailure, MAX_THREADS, NUM_THREADS_VAR};

/// A thread count the pool cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThreadsError {
    /// `RELAXVM_NUM_THREADS` is set but not readable (not Unicode); why.
    #[error("{NUM_THREADS_VAR}: {0}")]
    Unreadable(String),
    /// `RELAXVM_NUM_THREADS` holds this, which is not a count of 1 to [`MAX_THREADS`].
    #[error("{NUM_THREADS_VAR}={0:?}: expected a positive integer (at most {MAX_THREADS})")]
    NotACount(String),
    /// [`init_global`](crate::init_global) was asked for this many threads, not 1 to
    /// [`MAX_THREADS`].
    #[error("thread count {0}: expected 1 to {MAX_THREADS}")]
    OutOfRange(usize),
    /// [`init_global`](crate::init_global) was asked for `asked` threads once the pool ran
    /// `running`.
    #[error(
        "the thread pool already runs {running} threads (it is created once per process, on first use); \
         {asked} were asked for"
    )]
    AlreadyRunning {
        /// The size of the running pool.
        running: usize,
        /// The size asked for.
        asked: usize,
    },
}

/// Why [`Pool::fill`](crate::Pool::fill) appended nothing; `E` is its poll's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FillError<E> {
    /// The vector's spare capacity holds fewer elements than the fill writes.
    #[error("pool fill: expected room for {needed} more elements, found room for {room}")]
    NoRoom {
        /// The elements the fill writes.
        needed: usize,
        /// The room the vector had.
        room: usize,
    },
    /// A poll failed with this error, returned as it is.
    #[error("{0}")]
    Poll(E),
    /// Pieces failed (wrote too few or too many elements, or panicked), in task order.
    #[error("pool fill: {}", crate::describe(.0))]
    Pieces(Vec<TaskFailure<String>>),
}

/// The message of a panic payload: the text of `panic!("...")` (a `&str` or a `String`), or
/// a note that the payload is something else.
#[cold]
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}
