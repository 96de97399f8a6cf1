//! The binary format: round trips, versions, debug stripping, zero-copy mapping, skipped
//! sections, and hand-crafted malformed files (each must be an error, never a panic).

mod common;
mod crafted;
mod errors;
mod field_refusals;
mod golden;
mod libraries;
mod messages;
mod round_trip;
mod verifier;
