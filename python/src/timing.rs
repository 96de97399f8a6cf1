//! `time_evaluator`: repeated timed runs of a VM function and their statistics, like TVM's.

use crate::convert::Args;
use crate::vm_function::PyVmFunction;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::time::Instant;

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
        let n = results.len().max(1) as f64;
        let mean = results.iter().sum::<f64>() / n;
        let mut sorted = results.clone();
        sorted.sort_by(f64::total_cmp);
        let median = match sorted.len() {
            0 => 0.0,
            l if l % 2 == 1 => sorted[l / 2],
            l => (sorted[l / 2 - 1] + sorted[l / 2]) / 2.0,
        };
        let std = (results.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
        BenchmarkResult {
            min: sorted.first().copied().unwrap_or(0.0),
            max: sorted.last().copied().unwrap_or(0.0),
            results,
            mean,
            median,
            std,
        }
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
    Stateful(std::sync::Arc<crate::vm_lock::Shared>),
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

/// Runs `run` once to warm up, then `repeat` timed repeats of at least `min_ms` milliseconds
/// each (of `number` runs, doubled until long enough), sleeping `cooldown` every `every`
/// repeats: the seconds per run of each repeat.
fn time_runs(
    vm: &mut relaxvm::VirtualMachine,
    number: usize,
    repeat: usize,
    min_ms: f64,
    cooldown: std::time::Duration,
    every: usize,
    mut run: impl FnMut(&mut relaxvm::VirtualMachine) -> relaxvm::Result<()>,
) -> relaxvm::Result<Vec<f64>> {
    run(vm)?; // warm-up
              // Not preallocated: `repeat` is the caller's number (up to usize::MAX); the vector grows
              // with the repeats actually run.
    let mut results = Vec::new();
    let mut n = number.max(1);
    for r in 0..repeat.max(1) {
        if r > 0 && r % every == 0 && !cooldown.is_zero() {
            std::thread::sleep(cooldown);
        }
        loop {
            let t0 = Instant::now();
            for _ in 0..n {
                run(vm)?;
                // A short function never reaches the interpreter's own checks.
                vm.poll()?;
            }
            let dt = t0.elapsed().as_secs_f64();
            if dt * 1e3 >= min_ms || n >= 1 << 30 {
                results.push(dt / n as f64);
                break;
            }
            n = (n * 2).max((n as f64 * min_ms / (dt * 1e3).max(1e-6)) as usize);
        }
    }
    Ok(results)
}
