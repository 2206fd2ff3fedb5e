//! Empty: this package only has tests (`tests/`); see `Cargo.toml`.
#![no_std]
