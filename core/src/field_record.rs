//! A per-thread record of the fields a binary reader reads, for tests that derive crafted files
//! from a valid one (cut each field, overflow each count, break each string) and check that
//! each break's error names that field: the table of fields follows the reader instead of a
//! hand-kept offset table that could drift. Each reader keeps its own kind of record (what it
//! knows about a field differs), so this is a macro that defines the record for one type.

/// Defines, in the invoking module, a per-thread record of `$read` values:
/// `pub fn record_fields(f)` (runs `f`, returns its result and the values noted meanwhile on
/// this thread, in order; recordings nest, the inner one taking what is noted while it runs),
/// `note(read)` (adds `read()` when a recording runs; `read` is not called otherwise, so a
/// plain load pays one thread-local check per field) and `with_last(change)` (changes the
/// last noted value).
#[macro_export]
macro_rules! field_recorder {
    ($read:ty) => {
        thread_local! {
            /// The fields read on this thread while [`record_fields`] runs.
            static RECORDED: ::std::cell::RefCell<Option<Vec<$read>>> = const { ::std::cell::RefCell::new(None) };
        }

        /// Runs `f` and returns, beside its result, the fields this module's readers read on
        /// this thread meanwhile, in reading order.
        pub fn record_fields<R>(f: impl FnOnce() -> R) -> (R, Vec<$read>) {
            let outer = RECORDED.with(|r| r.borrow_mut().replace(Vec::new()));
            let out = f();
            let fields = RECORDED.with(|r| ::std::mem::replace(&mut *r.borrow_mut(), outer)).unwrap_or_default();
            (out, fields)
        }

        /// Records a field when a recording runs.
        #[allow(dead_code)]
        pub(crate) fn note(read: impl FnOnce() -> $read) {
            RECORDED.with(|r| {
                if let Some(fields) = r.borrow_mut().as_mut() {
                    fields.push(read());
                }
            });
        }

        /// Changes the last recorded field, when a recording runs.
        #[allow(dead_code)]
        pub(crate) fn with_last(change: impl FnOnce(&mut $read)) {
            RECORDED.with(|r| {
                if let Some(last) = r.borrow_mut().as_mut().and_then(|f| f.last_mut()) {
                    change(last);
                }
            });
        }
    };
}

#[cfg(test)]
mod tests {
    mod numbers {
        crate::field_recorder!(u32);
    }

    #[test]
    fn recordings_nest_and_take_only_what_is_noted_while_they_run() {
        numbers::note(|| unreachable!("nothing is built while no recording runs"));
        let ((), outer) = numbers::record_fields(|| {
            numbers::note(|| 1);
            let ((), inner) = numbers::record_fields(|| {
                numbers::note(|| 2);
                numbers::with_last(|v| *v += 10);
            });
            assert_eq!(inner, [12]);
            numbers::note(|| 3);
        });
        assert_eq!(outer, [1, 3]);
    }
}
