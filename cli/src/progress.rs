//! Progress on a terminal where a person waits: a spinner while a large executable loads, a bar
//! over repeated runs. Drawn on standard error only when it is a terminal (indicatif hides them
//! otherwise), so pipes, files and tests see nothing.

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};
use std::path::Path;
use std::time::Duration;

/// Inputs at least this large get a spinner while they load.
pub const LARGE_INPUT: u64 = 64 << 20;

/// A spinner naming what is loading, when `path` is large; drop it (or call `finish_and_clear`)
/// when done.
pub fn loading(path: &Path) -> Option<ProgressBar> {
    let size = std::fs::metadata(path).ok()?.len();
    if size < LARGE_INPUT {
        return None;
    }
    let bar = ProgressBar::new_spinner()
        .with_message(format!("loading {} ({} MiB)", path.display(), size >> 20))
        .with_finish(ProgressFinish::AndClear);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    Some(bar)
}

/// A bar over `n` runs, when there is more than one.
pub fn runs(n: u64, what: &str) -> Option<ProgressBar> {
    if n < 2 {
        return None;
    }
    let bar = ProgressBar::new(n).with_message(what.to_string()).with_finish(ProgressFinish::AndClear);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(bar)
}
