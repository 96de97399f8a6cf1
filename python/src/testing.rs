//! Test aids: native functions that misbehave on purpose, so that the Python test suite can
//! show how the runtime contains them (`relaxvm._relaxvm._register_panicking_func`), and hooks
//! that tell and set which way a call goes for the GIL, or show the direct read of ints
//! (`small_int`) on hand-made words. Private.

use crate::convert::{args_to_values, Args, PyClosure};
use crate::int_arg::extract_int;
use crate::vm_function::PyVmFunction;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use relaxvm::short_calls::{args_key, ShortRecord};
use relaxvm::{registry, PackedFunc};
use std::time::Duration;

/// Registers, process-wide under `name`, a Rust packed function that panics with `message`
/// whenever it is called (as a buggy native extension would).
#[pyfunction]
pub fn _register_panicking_func(name: &str, message: String) -> PyResult<()> {
    let f = PackedFunc::from_fn(name, move |_| panic!("{message}"));
    registry::register_global(f, true).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The record of short calls a function object keeps, the arguments `args` bound as a call
/// would bind them, and whether its calls keep the GIL whatever the record says.
fn short_record<'a>(f: &'a Bound<'_, PyAny>, args: &Bound<'_, PyTuple>) -> PyResult<(&'a ShortRecord, Args, bool)> {
    if let Ok(vf) = f.cast::<PyVmFunction>() {
        let vf = vf.get();
        let mut argv = Args::new();
        vf.bind_args(args, None, &mut argv)?;
        return Ok((&vf.short, argv, !vf.release));
    }
    if let Ok(c) = f.cast::<PyClosure>() {
        let c = c.get();
        let argv = args_to_values(args, c.0.name())?;
        return Ok((&c.1, argv, c.keeps_gil_always()));
    }
    Err(PyTypeError::new_err(format!(
        "expected a relaxvm.VMFunction or relaxvm.Closure, found {}",
        f.get_type().name()?
    )))
}

/// Whether the next call of `f` (a `VMFunction` or a global function's `Closure`) with `args`
/// keeps the GIL: always for a call that never releases it, else when the last call with
/// arguments of the same shapes ran short (`relaxvm::short_calls`). Private
/// (`relaxvm._relaxvm._keeps_gil_next`): tests assert with it which way a call goes, instead
/// of relying on how long the last one took.
#[pyfunction]
#[pyo3(signature = (f, *args))]
pub fn _keeps_gil_next(f: &Bound<'_, PyAny>, args: &Bound<'_, PyTuple>) -> PyResult<bool> {
    let (record, argv, always) = short_record(f, args)?;
    Ok(always || args_key(&argv).is_some_and(|k| record.ran_short(k)))
}

/// Records, for `f`, that its last call with `args` ran short, so that the next such call
/// keeps the GIL (whatever wall time the machine's load made earlier calls take). Private
/// (`relaxvm._relaxvm._note_short_call`); a `ValueError` for arguments without a key (strings,
/// tuples...), whose calls always release the GIL.
#[pyfunction]
#[pyo3(signature = (f, *args))]
pub fn _note_short_call(f: &Bound<'_, PyAny>, args: &Bound<'_, PyTuple>) -> PyResult<()> {
    let (record, argv, _) = short_record(f, args)?;
    let key = args_key(&argv).ok_or_else(|| {
        PyValueError::new_err(
            "expected arguments of kinds a call is keyed by (tensors, shapes, scalars), found another kind",
        )
    })?;
    record.note(key, Duration::ZERO);
    Ok(())
}

/// What the direct read of an int (`small_int::decode`) makes of the size word `word` and the
/// first digit `digit`, `tagged` saying which CPython layout the word is in, and whether it
/// read the digit. Private (`relaxvm._relaxvm._small_int_decode`): the tests try both layouts
/// with hand-made words, whichever one this build reads.
#[pyfunction]
pub fn _small_int_decode(
    word: &Bound<'_, PyAny>,
    digit: &Bound<'_, PyAny>,
    tagged: bool,
) -> PyResult<(Option<i64>, bool)> {
    // A size word is pointer-sized: 64 bits wherever ints are read directly.
    let word = extract_int::<i64>(word, &|| "_small_int_decode word".to_string())? as isize;
    let digit = extract_int::<u32>(digit, &|| "_small_int_decode digit".to_string())?;
    let mut read = false;
    let value = crate::small_int::decode(word, tagged, || {
        read = true;
        digit
    });
    Ok((value, read))
}

/// The ints the import-time check reads wrongly when it takes the size word as `tagged` says
/// (empty: it reads them right), and whether ints are read directly in this process. Private
/// (`relaxvm._relaxvm._small_int_self_check`): the tests show the check passes for this
/// build's layout and fails for the other one.
#[pyfunction]
pub fn _small_int_self_check(py: Python<'_>, tagged: bool) -> PyResult<(Vec<i64>, bool)> {
    Ok((crate::small_int::self_check(py, tagged)?, crate::small_int::direct()))
}
