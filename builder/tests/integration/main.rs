//! Integration tests of relaxvm-builder: one binary, one module per concern.

mod asm;
mod asm_errors;
mod builder;
mod builder_errors;
mod check;
mod common;
mod golden;
mod isa_fields;
mod link;
mod renumber;
mod run;
