//! The process's thread pool: the crate `relaxvm-threads`, at the path it had in this crate,
//! with its thread-count functions returning this crate's [`Error`] (the same messages, as
//! value errors). Everything else is the pool crate's own: see its documentation.

use crate::{Error, Result};
// By name, not a glob: an item the pool crate adds later is not part of this path's API
// until it is listed here, and the three thread-count functions below (returning this crate's
// error) are the only ones of their names.
pub use relaxvm_threads::{
    chunks, describe, global, is_me_or_my_launcher, launcher, panic_message, thread_key, Barrier, Broken, Failure,
    Failures, FillError, Pool, Sink, Task, TaskFailure, ThreadsError, MAX_THREADS, NUM_THREADS_VAR, POLL_EVERY,
    POLL_WAIT,
};

impl From<ThreadsError> for Error {
    fn from(e: ThreadsError) -> Self {
        Error::value(e.to_string())
    }
}

/// [`relaxvm_threads::configured_threads`], its error as an [`Error`].
pub fn configured_threads() -> Result<usize> {
    Ok(relaxvm_threads::configured_threads()?)
}

/// [`relaxvm_threads::parse_threads`], its error as an [`Error`].
pub fn parse_threads(v: &str) -> Result<usize> {
    Ok(relaxvm_threads::parse_threads(v)?)
}

/// [`relaxvm_threads::init_global`], its error as an [`Error`].
pub fn init_global(threads: usize) -> Result<&'static Pool> {
    Ok(relaxvm_threads::init_global(threads)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn thread_count_errors_are_value_errors_with_the_pools_message() {
        let e = parse_threads("0").unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Value(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("{NUM_THREADS_VAR}=\"0\": expected a positive integer (at most {MAX_THREADS})")
        );
        let Err(e) = init_global(MAX_THREADS + 1) else { panic!("an error") };
        assert_eq!(e.to_string(), format!("thread count {}: expected 1 to {MAX_THREADS}", MAX_THREADS + 1));
    }
}
