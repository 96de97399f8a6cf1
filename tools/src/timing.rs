//! Timing repeated runs, as TVM's `time_evaluator` does: a warm-up run, then repeats of at
//! least a minimum duration, each reporting its mean seconds per run, and their statistics.

use relaxvm_core::Result;
use std::time::{Duration, Instant};

/// How runs are repeated and timed (TVM's `time_evaluator` arguments).
#[derive(Clone, Debug, PartialEq)]
pub struct TimingOptions {
    /// Runs per repeat to start with (doubled until a repeat lasts `min_repeat_ms`).
    pub number: usize,
    /// Timed repeats.
    pub repeat: usize,
    /// The shortest a repeat may last, in milliseconds.
    pub min_repeat_ms: f64,
    /// A pause before every `repeats_to_cooldown`-th repeat.
    pub cooldown: Duration,
    /// How many repeats run between pauses.
    pub repeats_to_cooldown: usize,
}

/// Runs `run` once to warm up, then `options.repeat` timed repeats of at least
/// `options.min_repeat_ms` milliseconds each (of `options.number` runs, doubled until long
/// enough), pausing `options.cooldown` every `options.repeats_to_cooldown` repeats: the seconds
/// per run of each repeat. The first error of a run ends the timing.
pub fn time_runs(options: &TimingOptions, mut run: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    let (min_ms, every) = (options.min_repeat_ms, options.repeats_to_cooldown.max(1));
    run()?; // warm-up
            // Not preallocated: `repeat` is the caller's number (up to usize::MAX); the vector grows
            // with the repeats actually run.
    let mut results = Vec::new();
    let mut n = options.number.max(1);
    for r in 0..options.repeat.max(1) {
        if r > 0 && r % every == 0 && !options.cooldown.is_zero() {
            std::thread::sleep(options.cooldown);
        }
        loop {
            let t0 = Instant::now();
            for _ in 0..n {
                run()?;
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

/// The statistics of timed repeats (TVM's `BenchmarkResult`), in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Mean seconds per run of each repeat.
    pub results: Vec<f64>,
    /// The mean of `results`.
    pub mean: f64,
    /// The median of `results`.
    pub median: f64,
    /// The smallest of `results`.
    pub min: f64,
    /// The largest of `results`.
    pub max: f64,
    /// The (population) standard deviation of `results`.
    pub std: f64,
}

impl Summary {
    /// The statistics of `results` (all zero when there are none).
    pub fn of(results: Vec<f64>) -> Self {
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
        Summary {
            min: sorted.first().copied().unwrap_or(0.0),
            max: sorted.last().copied().unwrap_or(0.0),
            results,
            mean,
            median,
            std,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm_core::Error;

    fn options(number: usize, repeat: usize) -> TimingOptions {
        TimingOptions { number, repeat, min_repeat_ms: 0.0, cooldown: Duration::ZERO, repeats_to_cooldown: 1 }
    }

    #[test]
    fn one_warm_up_then_number_runs_per_repeat() {
        let mut calls = 0;
        let results = time_runs(&options(3, 4), || {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((results.len(), calls), (4, 1 + 3 * 4));
        // Zero counts mean one.
        let mut calls = 0;
        let once = time_runs(&options(0, 0), || {
            calls += 1;
            Ok(())
        });
        assert_eq!(once.unwrap().len(), 1);
        assert_eq!(calls, 2);
    }

    #[test]
    fn the_first_error_ends_the_timing() {
        let mut calls = 0;
        let err = time_runs(&options(2, 3), || {
            calls += 1;
            if calls == 3 {
                Err(Error::value("third run"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!((err.to_string(), calls), ("third run".to_string(), 3));
    }

    #[test]
    fn statistics_of_repeats() {
        let s = Summary::of(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.mean, s.median, s.min, s.max), (2.5, 2.5, 1.0, 4.0));
        assert!((s.std - 1.25f64.sqrt()).abs() < 1e-12);
        assert_eq!(Summary::of(vec![5.0, 1.0, 3.0]).median, 3.0);
        let empty = Summary::of(vec![]);
        assert_eq!((empty.mean, empty.median, empty.min, empty.max, empty.std), (0.0, 0.0, 0.0, 0.0, 0.0));
    }
}
