//! `rx.Trace`, `rx.TraceStep` and `rx.TraceDifference`: what `VirtualMachine.trace` returns.

use crate::convert::to_py;
use crate::errors::IntoPyResult;
use crate::int_arg::{extract_int, extract_opt};
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use relaxvm::trace::{Tolerance, Trace, TraceDifference, TraceStep};
use relaxvm::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// Every call of one traced run, in order, with copies of its values.
#[pyclass(module = "relaxvm", name = "Trace", frozen, sequence)]
pub struct PyTrace(Arc<Trace>);

impl PyTrace {
    /// Wraps a trace.
    pub fn new(trace: Trace) -> Self {
        PyTrace(Arc::new(trace))
    }

    fn step_at(&self, pos: usize) -> PyTraceStep {
        PyTraceStep { trace: Arc::clone(&self.0), pos }
    }
}

/// One call of a traced run.
#[pyclass(module = "relaxvm", name = "TraceStep", frozen)]
pub struct PyTraceStep {
    trace: Arc<Trace>,
    /// The step's position in `trace.steps`.
    pos: usize,
}

impl PyTraceStep {
    fn step(&self) -> &TraceStep {
        &self.trace.steps[self.pos]
    }
}

#[pymethods]
impl PyTraceStep {
    /// The step's number (calls are numbered from 0 in the order they start).
    #[getter]
    fn index(&self) -> usize {
        self.step().index
    }

    /// The bytecode function making the call.
    #[getter]
    fn function(&self) -> &str {
        &self.step().function
    }

    /// The index of the `call` instruction within `function`.
    #[getter]
    fn pc(&self) -> usize {
        self.step().pc
    }

    /// The called function's name.
    #[getter]
    fn callee(&self) -> &str {
        &self.step().callee
    }

    /// How many traced calls enclose this one.
    #[getter]
    fn depth(&self) -> usize {
        self.step().depth
    }

    /// How many steps had started when this one returned.
    #[getter]
    fn end(&self) -> usize {
        self.step().end
    }

    /// True when the call raised the run's error.
    #[getter]
    fn failed(&self) -> bool {
        self.step().failed
    }

    /// True when the step's values were dropped to stay within `max_bytes`.
    #[getter]
    fn dropped(&self) -> bool {
        self.step().values.is_none()
    }

    /// Copies of the arguments, taken before the call (None when dropped).
    #[getter]
    fn args<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(v) = &self.step().values else { return Ok(None) };
        let items = v.args.iter().map(|a| to_py(py, a)).collect::<PyResult<Vec<_>>>()?;
        Ok(Some(PyList::new(py, items)?))
    }

    /// A copy of the result (None when the call returns nothing, raised, or was dropped).
    #[getter]
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.step().values {
            Some(v) => to_py(py, &v.result),
            None => to_py(py, &Value::Null),
        }
    }

    /// The tensor arguments the call wrote, by argument index, copied after it (what a
    /// destination-passing kernel produced).
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        if let Some(v) = &self.step().values {
            for (i, o) in &v.outputs {
                d.set_item(i, to_py(py, o)?)?;
            }
        }
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let s = self.step();
        let mut text = format!(
            "TraceStep(index={}, function={:?}, pc={}, callee={:?}, depth={}",
            s.index, &*s.function, s.pc, &*s.callee, s.depth
        );
        if s.failed {
            text.push_str(", failed=True");
        }
        if s.values.is_none() {
            text.push_str(", dropped=True");
        }
        text.push(')');
        text
    }
}

/// The first step at which two traces differ.
#[pyclass(module = "relaxvm", name = "TraceDifference", frozen)]
pub struct PyTraceDifference {
    diff: TraceDifference,
    a: Arc<Trace>,
    b: Arc<Trace>,
}

fn step_of(trace: &Arc<Trace>, step: &Option<TraceStep>) -> Option<PyTraceStep> {
    let pos = step.as_ref()?.index.checked_sub(trace.skipped)?;
    (pos < trace.steps.len()).then(|| PyTraceStep { trace: Arc::clone(trace), pos })
}

#[pymethods]
impl PyTraceDifference {
    /// The step's number.
    #[getter]
    fn index(&self) -> usize {
        self.diff.index
    }

    /// The first trace's step (None when that trace has no step with this number).
    #[getter]
    fn a(&self) -> Option<PyTraceStep> {
        step_of(&self.a, &self.diff.a)
    }

    /// The second trace's step.
    #[getter]
    fn b(&self) -> Option<PyTraceStep> {
        step_of(&self.b, &self.diff.b)
    }

    /// What differs: `"step"` (the call itself), `"result"`, `"outputs"`, `"outputs[i]"`, or
    /// `"skipped"` (steps one trace kept and the other dropped, which were not compared).
    #[getter]
    fn what(&self) -> &str {
        &self.diff.what
    }

    /// How it differs.
    #[getter]
    fn detail(&self) -> &str {
        &self.diff.detail
    }

    fn __str__(&self) -> String {
        self.diff.to_string()
    }

    fn __repr__(&self) -> String {
        format!("<relaxvm.TraceDifference {}>", self.diff)
    }
}

#[pymethods]
impl PyTrace {
    /// The function that was run.
    #[getter]
    fn function(&self) -> &str {
        &self.0.function
    }

    /// How many of the first steps were dropped whole to stay within `max_bytes`.
    #[getter]
    fn skipped(&self) -> usize {
        self.0.skipped
    }

    /// How many kept steps lost their values to `max_bytes`.
    #[getter]
    fn dropped(&self) -> usize {
        self.0.dropped()
    }

    /// The number of steps the run made, including skipped ones.
    #[getter]
    fn total_steps(&self) -> usize {
        self.0.total_steps()
    }

    /// The budget the trace was recorded with.
    #[getter]
    fn max_bytes(&self) -> usize {
        self.0.max_bytes
    }

    /// The run's result.
    #[getter]
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.result)
    }

    fn __len__(&self) -> usize {
        self.0.steps.len()
    }

    fn __getitem__(&self, i: &Bound<'_, PyAny>) -> PyResult<PyTraceStep> {
        let i = extract_int::<i64>(i, &|| "trace step position".to_string())?;
        let n = self.0.steps.len() as i64;
        let pos = if i < 0 { i + n } else { i };
        if !(0..n).contains(&pos) {
            return Err(PyIndexError::new_err(format!("step position {i} out of range for a trace of {n} kept steps")));
        }
        Ok(self.step_at(pos as usize))
    }

    fn __iter__(&self) -> PyTraceIter {
        PyTraceIter { trace: Arc::clone(&self.0), pos: 0 }
    }

    /// The steps calling `callee` (and made by `function`, when given), in order.
    #[pyo3(signature = (callee = None, function = None))]
    fn find(&self, callee: Option<&str>, function: Option<&str>) -> Vec<PyTraceStep> {
        (0..self.0.steps.len())
            .filter(|&p| {
                let s = &self.0.steps[p];
                callee.is_none_or(|c| *s.callee == *c) && function.is_none_or(|f| *s.function == *f)
            })
            .map(|p| self.step_at(p))
            .collect()
    }

    /// Writes the trace as a numpy `.npz` file: one array per copied tensor (`step3.result`,
    /// `step3.args.0`, `step3.outputs.1`) and the steps as JSON in the array `__trace__`.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let trace = Arc::clone(&self.0);
        py.detach(move || trace.save(path)).py_err(py)
    }

    /// Reads a trace written by `save`. Loading decompresses and parses at most `limit` bytes
    /// (None: 256 MiB plus 16 bytes per byte of the file); a file needing more, or whose counts
    /// and indices are inconsistent, raises VMValueError naming the member and the field.
    #[staticmethod]
    #[pyo3(signature = (path, limit = None))]
    fn load(py: Python<'_>, path: PathBuf, limit: Option<&Bound<'_, PyAny>>) -> PyResult<PyTrace> {
        let limit = extract_opt::<u64>(limit, &|| "Trace.load limit".to_string())?;
        py.detach(move || Trace::load_within(path, limit)).py_err(py).map(PyTrace::new)
    }

    /// The first step at which traces `a` and `b` differ — the first step whose result or
    /// written arguments differ (in the order calls returned), or where the calls themselves
    /// differ, or steps one trace kept and the other dropped (`what == "skipped"`) — or None
    /// when every step was compared and agrees. Floats agree when `|a - b| <= atol + rtol * |b|`
    /// or both are NaN.
    #[staticmethod]
    #[pyo3(signature = (a, b, rtol = 1e-5, atol = 1e-8))]
    fn first_difference(
        py: Python<'_>,
        a: &PyTrace,
        b: &PyTrace,
        rtol: f64,
        atol: f64,
    ) -> PyResult<Option<PyTraceDifference>> {
        let tolerance = Tolerance::new(rtol, atol).py_err(py)?;
        let (ta, tb) = (Arc::clone(&a.0), Arc::clone(&b.0));
        let diff = py.detach(|| ta.first_difference(&tb, tolerance));
        Ok(diff.map(|diff| PyTraceDifference { diff, a: ta, b: tb }))
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "<relaxvm.Trace {:?} steps={} skipped={} dropped={}>",
            self.0.function,
            self.0.total_steps(),
            self.0.skipped,
            self.0.dropped()
        )
    }
}

/// Iterates a trace's kept steps.
#[pyclass(module = "relaxvm", name = "_TraceIterator")]
pub struct PyTraceIter {
    trace: Arc<Trace>,
    pos: usize,
}

#[pymethods]
impl PyTraceIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self) -> Option<PyTraceStep> {
        let pos = self.pos;
        (pos < self.trace.steps.len()).then(|| {
            self.pos += 1;
            PyTraceStep { trace: Arc::clone(&self.trace), pos }
        })
    }
}
