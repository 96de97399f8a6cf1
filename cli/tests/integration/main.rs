//! Integration tests of relaxvm-cli: the `relaxvm` command line run as a process.

mod cli;
mod cli_errors;
mod cli_io;
mod cli_tvm;
