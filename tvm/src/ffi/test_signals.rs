//! This thread's signal mask, for the tests that check a kernel's fault leaves it as it was.
//! Test code only: the guard's unit tests declare it (`#[cfg(test)]`), and the integration tests
//! include it by path from `tests/common` (they cannot use the library's test modules), so the
//! tests depend on the source tree and not the other way round (review R-mlp-1).

/// This thread's blocked signals, as a list of numbers.
pub fn blocked() -> Vec<i32> {
    // SAFETY: an all-zero `sigset_t` is a valid (empty) set; with a null new set,
    // `pthread_sigmask` only writes this thread's mask into `set`.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        assert_eq!(libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set), 0);
        set
    };
    // SAFETY: `set` is initialised; every number asked is a valid signal number.
    (1..=64).filter(|s| unsafe { libc::sigismember(&set, *s) } == 1).collect()
}
