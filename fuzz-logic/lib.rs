//! Empty: this package only has tests (`tests/fuzz_logic.rs`); see `Cargo.toml`.
#![no_std]
