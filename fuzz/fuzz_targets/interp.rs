//! Runs generated programs that pass the verifier, with random arguments, under a step budget
//! and a call-depth limit: any result or error is fine; a panic, an abort, a hang or a builtin
//! that panicked (`ErrorKind::Panic`) is a failure.
//!
//! The generator lives in `builtins/tests/support/gen_program.rs`, which
//! `builtins/tests/reliability_interp_replay.rs` shares to replay `corpus/interp/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../builtins/tests/support/gen_program.rs"]
#[allow(dead_code)]
mod gen_program;

fuzz_target!(|data: &[u8]| gen_program::run(data));
