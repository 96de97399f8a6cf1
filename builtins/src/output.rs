//! Where `vm.builtin.print` and `relax.run.print` write their lines: standard output, unless a
//! sink is installed. The Python package installs one that writes to `sys.stdout` (so Jupyter,
//! `contextlib.redirect_stdout` and pytest's capture see the output); a test captures what the
//! calls on its thread print with [`capture`].

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, RwLock};

/// Receives each printed line (without its newline).
pub type Sink = Arc<dyn Fn(&str) -> std::io::Result<()> + Send + Sync>;

static GLOBAL: RwLock<Option<Sink>> = RwLock::new(None);

thread_local! {
    /// What [`capture`] collects on this thread, innermost last.
    static CAPTURED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Installs `sink` for every thread (`None`: standard output again) and returns the previous.
pub fn set_sink(sink: Option<Sink>) -> Option<Sink> {
    let mut global = GLOBAL.write().unwrap_or_else(|p| p.into_inner());
    std::mem::replace(&mut *global, sink)
}

/// Runs `f` and returns what the prints on this thread wrote meanwhile, instead of writing it.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, String) {
    CAPTURED.with(|c| c.borrow_mut().push(String::new()));
    // Pops the buffer also when `f` panics, so a later capture on this thread starts clean.
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            CAPTURED.with(|c| c.borrow_mut().pop());
        }
    }
    let pop = Pop;
    let r = f();
    let text = CAPTURED.with(|c| c.borrow_mut().last_mut().map(std::mem::take).unwrap_or_default());
    drop(pop);
    (r, text)
}

/// Writes one line where prints go: this thread's capture, else the sink, else standard output.
/// A closed standard output is an error for the caller to report, not a panic (`println!`'s).
pub(crate) fn write_line(line: &str) -> std::io::Result<()> {
    let captured = CAPTURED.with(|c| {
        let mut c = c.borrow_mut();
        let buf = c.last_mut()?;
        buf.push_str(line);
        buf.push('\n');
        Some(())
    });
    if captured.is_some() {
        return Ok(());
    }
    let sink = GLOBAL.read().unwrap_or_else(|p| p.into_inner()).clone();
    match sink {
        Some(sink) => sink(line),
        None => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").and_then(|()| out.flush())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_collects_this_threads_lines_and_nests() {
        let ((), outer) = capture(|| {
            write_line("a").unwrap();
            let ((), inner) = capture(|| write_line("b").unwrap());
            assert_eq!(inner, "b\n");
            write_line("c").unwrap();
        });
        assert_eq!(outer, "a\nc\n");
        let r = std::panic::catch_unwind(|| capture(|| panic!("boom")));
        assert_eq!(r.expect_err("the panic unwinds through capture").downcast_ref::<&str>(), Some(&"boom"));
        let ((), after) = capture(|| write_line("d").unwrap());
        assert_eq!(after, "d\n");
    }
}
