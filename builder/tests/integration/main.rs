//! Integration tests of relaxvm-builder: one binary, one module per concern.

mod asm;
mod asm_errors;
mod builder;
mod builder_errors;
mod check;
mod cli;
mod cli_errors;
mod cli_io;
mod cli_tvm;
mod common;
mod formalize;
mod golden;
mod link;
mod run;
