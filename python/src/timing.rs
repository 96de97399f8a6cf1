//! `time_evaluator`: repeated timed runs of a VM function and their statistics, like TVM's.

use crate::convert::Args;
use crate::vm_function::PyVmFunction;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use relaxvm::timing::{self, Summary, TimingOptions};

/// Timing of repeated runs (seconds), like TVM's `BenchmarkResult`.
#[pyclass(module = "relaxvm", name = "BenchmarkResult", frozen)]
pub struct BenchmarkResult {
    /// Mean seconds per run of each repeat.
    #[pyo3(get)]
    results: Vec<f64>,
    /// The mean of `results`.
    #[pyo3(get)]
    mean: f64,
    /// The median of `results`.
    #[pyo3(get)]
    median: f64,
    /// The smallest of `results`.
    #[pyo3(get)]
    min: f64,
    /// The largest of `results`.
    #[pyo3(get)]
    max: f64,
    /// The standard deviation of `results`.
    #[pyo3(get)]
    std: f64,
}

impl BenchmarkResult {
    fn new(results: Vec<f64>) -> Self {
        let Summary { results, mean, median, min, max, std } = Summary::of(results);
        BenchmarkResult { results, mean, median, min, max, std }
    }
}

#[pymethods]
impl BenchmarkResult {
    fn __repr__(&self) -> String {
        format!(
            "BenchmarkResult(mean={:.3e}, median={:.3e}, min={:.3e}, max={:.3e}, std={:.3e}, repeats={})",
            self.mean,
            self.median,
            self.min,
            self.max,
            self.std,
            self.results.len()
        )
    }
}

/// Runs a VM function `number` times per repeat and reports the mean time of each repeat.
#[pyclass(module = "relaxvm", name = "TimeEvaluator", frozen)]
pub struct TimeEvaluator {
    pub(crate) timed: Timed,
    pub(crate) number: usize,
    pub(crate) repeat: usize,
    pub(crate) min_repeat_ms: f64,
    pub(crate) cooldown: std::time::Duration,
    pub(crate) repeats_to_cooldown: usize,
}

/// What a `TimeEvaluator` runs.
pub(crate) enum Timed {
    /// A function of the VM, called with the evaluator's arguments.
    Function(Py<PyVmFunction>),
    /// TVM's `invoke_stateful`: the evaluator's one argument names the function, which runs on
    /// the inputs `set_input` gave it (as `vm.time_evaluator("invoke_stateful", dev)("main")`).
    Stateful(std::sync::Arc<crate::vm_lock::VmLock>),
}

#[pymethods]
impl TimeEvaluator {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<BenchmarkResult> {
        let (number, repeat, min_ms) = (self.number, self.repeat, self.min_repeat_ms);
        let (cooldown, every) = (self.cooldown, self.repeats_to_cooldown);
        let results = match &self.timed {
            Timed::Function(f) => {
                let f = f.get();
                let mut argv = Args::new();
                f.bind_args(args, kwargs, &mut argv)?;
                let func = f.value();
                f.shared().run(py, true, |vm| {
                    time_runs(vm, number, repeat, min_ms, cooldown, every, |vm| {
                        vm.invoke_closure(func, &argv).map(drop)
                    })
                })?
            }
            Timed::Stateful(shared) => {
                let name: String = match (args.len(), kwargs.map_or(0, |k| k.len())) {
                    (1, 0) => args.get_item(0)?.extract()?,
                    (n, k) => {
                        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                            "a time_evaluator of invoke_stateful takes one argument, the function's name; got {n} positional and {k} keyword arguments"
                        )))
                    }
                };
                shared.run(py, true, |vm| {
                    time_runs(vm, number, repeat, min_ms, cooldown, every, |vm| vm.invoke_stateful(&name))
                })?
            }
        };
        Ok(BenchmarkResult::new(results))
    }
}

/// Times `run` on `vm` as `time_evaluator` asks (`relaxvm::timing::time_runs`), polling the VM
/// after each run: a short function never reaches the interpreter's own checks.
fn time_runs(
    vm: &mut relaxvm::VirtualMachine,
    number: usize,
    repeat: usize,
    min_repeat_ms: f64,
    cooldown: std::time::Duration,
    repeats_to_cooldown: usize,
    mut run: impl FnMut(&mut relaxvm::VirtualMachine) -> relaxvm::Result<()>,
) -> relaxvm::Result<Vec<f64>> {
    let options = TimingOptions { number, repeat, min_repeat_ms, cooldown, repeats_to_cooldown };
    timing::time_runs(&options, || {
        run(vm)?;
        vm.poll()
    })
}
