//! The logic of the fuzz targets in `fuzz/`, shared with the normal test suite.
//!
//! Each fuzz target is a thin `fuzz_target!` wrapper that `#[path]`-includes this module and
//! calls one `check` function; `workspace-tests/tests/fuzz_logic.rs` includes the same module and runs every
//! check on the committed seed corpora and on fixed-seed random inputs, so the targets are
//! compiled and exercised by `cargo test` and cannot rot. No dependency beyond the crate and
//! `serde_json`: inputs are decoded by a small hand-written reader ([`input::Input`]) whose
//! inverse ([`input::Seed`]) writes the committed seeds, so each seed is an exact encoding of
//! a chosen case.
#![allow(dead_code)]

pub mod capi;
pub mod config_json;
pub mod corpus;
pub mod diff;
/// The element trait of every test (`tests/support/elem.rs`, no `rand`).
#[path = "../support/elem.rs"]
pub mod elem;
pub mod frequencies;
pub mod input;
pub mod mrope;
/// Canary-padded buffers (`tests/support/padded.rs`).
#[path = "../support/padded.rs"]
pub mod padded;
