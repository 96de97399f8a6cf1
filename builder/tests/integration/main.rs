//! Integration tests of relaxvm-builder: one binary, one module per concern.

mod asm;
mod builder;
mod check;
mod common;
mod formalize;
mod golden;
mod link;
mod run;
