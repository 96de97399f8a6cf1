//! Integration tests of relaxvm-builtins: one binary, one module per concern.

mod common;
mod constants;
mod error_table;
mod interrupts;
mod numpy_tables;
mod pooled_views;
mod profile;
mod robustness;
mod trace;
mod vm_programs;
