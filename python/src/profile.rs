//! `rx.ProfileReport` and `rx.ProfileRow`: what `VirtualMachine.profile` returns.

use crate::int_arg::extract_opt;
use crate::registry::is_python_backed;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use relaxvm::profile::{CallKind, ProfileReport, ProfileRow, SortBy};

/// Where the time of one call went: one row per callee and the `(vm overhead)` row.
#[pyclass(module = "relaxvm", name = "ProfileReport", frozen)]
pub struct PyProfileReport(ProfileReport);

impl PyProfileReport {
    /// The report, with Python functions registered as packed functions marked as such.
    pub fn new(mut report: ProfileReport) -> Self {
        for row in report.rows.iter_mut().filter(|r| r.kind == CallKind::Builtin) {
            if is_python_backed(&row.name) {
                row.kind = CallKind::Python;
            }
        }
        PyProfileReport(report)
    }
}

/// One callee's calls, aggregated.
#[pyclass(module = "relaxvm", name = "ProfileRow", frozen, get_all)]
pub struct PyProfileRow {
    /// The callee's name.
    name: String,
    /// `"builtin"`, `"kernel"`, `"python"`, `"vm"` or `"overhead"`.
    kind: &'static str,
    /// How many calls returned.
    count: u64,
    /// Their time in nanoseconds: exclusive for leaf callees, inclusive for kind `"vm"`.
    total_ns: u64,
    /// The mean time per call.
    mean_ns: u64,
    /// The shortest call.
    min_ns: u64,
    /// The longest call.
    max_ns: u64,
    /// The share of the report's `total_ns`, in percent.
    percent: f64,
    /// The distinct argument types and shapes seen.
    shapes: Vec<String>,
}

fn row(report: &ProfileReport, r: &ProfileRow) -> PyProfileRow {
    PyProfileRow {
        name: r.name.clone(),
        kind: r.kind.name(),
        count: r.count,
        total_ns: r.total_ns,
        mean_ns: r.mean_ns(),
        min_ns: r.min_ns,
        max_ns: r.max_ns,
        percent: report.percent(r),
        shapes: r.shapes.clone(),
    }
}

#[pymethods]
impl PyProfileRow {
    fn __repr__(&self) -> String {
        format!(
            "ProfileRow(name={:?}, kind={:?}, count={}, total_ns={}, percent={:.2})",
            self.name, self.kind, self.count, self.total_ns, self.percent
        )
    }
}

#[pymethods]
impl PyProfileReport {
    /// The function that was run.
    #[getter]
    fn function(&self) -> &str {
        &self.0.function
    }

    /// The wall time of the whole call, in nanoseconds.
    #[getter]
    fn total_ns(&self) -> u64 {
        self.0.total_ns
    }

    /// The rows, in order of first return, the `(vm overhead)` row last.
    #[getter]
    fn rows(&self) -> Vec<PyProfileRow> {
        self.0.rows.iter().map(|r| row(&self.0, r)).collect()
    }

    /// A table sorted by `"total"`, `"count"`, `"mean"` or `"name"`, with at most `top` rows.
    #[pyo3(signature = (sort_by = "total", top = None))]
    fn table(&self, sort_by: &str, top: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
        let top = extract_opt::<u64>(top, &|| "Report.table top".to_string())?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let sort: SortBy = sort_by.parse().map_err(|e: relaxvm::Error| PyValueError::new_err(e.to_string()))?;
        Ok(self.0.table(sort, top))
    }

    /// CSV: a header and one row per callee (times in nanoseconds).
    fn csv(&self) -> String {
        self.0.csv()
    }

    /// JSON: `{"function": ..., "total_ns": ..., "calls": [...]}`.
    fn json(&self) -> String {
        self.0.json()
    }

    /// Writes the run in the Chrome trace event format (open it at ui.perfetto.dev).
    fn save_trace(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        let text = self.0.chrome_trace();
        py.detach(|| relaxvm::format::write_atomically::<std::io::Error>(&path, |w| w.write_all(text.as_bytes())))
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", path.display())))
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("<relaxvm.ProfileReport {:?} total_ns={} rows={}>", self.0.function, self.0.total_ns, self.0.rows.len())
    }
}
