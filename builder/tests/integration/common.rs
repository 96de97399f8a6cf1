//! Helpers shared by the integration tests.

use relaxvm::{Executable, Tensor, Value};
use relaxvm_builder::{BuildError, ExecBuilder};

/// Runs `body` inside `function(name, num_inputs)` ... `end_function()`.
pub fn func(
    ib: &mut ExecBuilder,
    name: &str,
    num_inputs: u32,
    body: impl FnOnce(&mut ExecBuilder) -> Result<(), BuildError>,
) -> Result<(), BuildError> {
    ib.function(name, num_inputs, None)?;
    body(ib)?;
    ib.end_function()
}

/// Builds, expecting success, and returns the executable.
pub fn build(ib: &mut ExecBuilder) -> Executable {
    ib.get().unwrap_or_else(|e| panic!("build failed: {e}")).executable
}

/// A float32 tensor constant.
pub fn f32_tensor(dims: &[i64], data: Vec<f32>) -> Value {
    Value::Tensor(Tensor::from_vec(dims.to_vec(), data).unwrap())
}
