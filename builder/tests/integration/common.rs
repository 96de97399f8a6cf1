//! Helpers shared by the integration tests.

use relaxvm::{Executable, Tensor, Value};
use relaxvm_builder::{assemble, BuildError, ExecBuilder};

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

/// Builds, expecting success, checks that the text form round-trips, and returns the
/// executable.
pub fn build(ib: &mut ExecBuilder) -> Executable {
    let exe = ib.get().unwrap_or_else(|e| panic!("build failed: {e}")).executable;
    assert_round_trip(&exe);
    exe
}

/// `assemble(exe.as_text())` prints the same text and has the same parts (the builder lays
/// functions out in table order, so the parts are canonical too).
pub fn assert_round_trip(exe: &Executable) {
    let text = exe.as_text();
    let back = assemble(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.as_text(), text);
    let (a, b) = (exe.to_parts(), back.to_parts());
    assert_eq!(a.funcs, b.funcs);
    assert_eq!(a.entry, b.entry);
    assert_eq!(a.instrs, b.instrs);
    assert_eq!(a.locations, b.locations);
    assert_eq!(a.constants.len(), b.constants.len());
    for (x, y) in a.constants.iter().zip(&b.constants) {
        assert!(x.content_eq(y) || x.to_string() == y.to_string(), "{x:?} vs {y:?}");
    }
    // and through the binary format
    let bytes = exe.save_to_bytes();
    let loaded = relaxvm::format::load_bytes(&bytes).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(loaded.as_text(), text);
    // binary -> text -> binary is the identity
    assert_eq!(assemble(&loaded.as_text()).unwrap().save_to_bytes(), bytes, "{text}");
}

/// A float32 tensor constant.
pub fn f32_tensor(dims: &[i64], data: Vec<f32>) -> Value {
    Value::Tensor(Tensor::from_vec(dims.to_vec(), data).unwrap())
}
