//! Integration tests of relaxvm-builtins: one binary, one module per concern.

mod builtin_errors;
mod common;
mod constants;
mod error_table;
mod interrupts;
mod kv_argument_errors;
mod kv_checkpoint_errors;
mod kv_decode_alloc;
mod kv_errors;
mod lm_errors;
mod numpy_tables;
mod pooled_views;
mod profile;
mod robustness;
mod trace;
mod vm_programs;
mod whole_messages;
