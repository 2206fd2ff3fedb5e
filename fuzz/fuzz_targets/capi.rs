//! Random metadata over real, canary-padded buffers through the C entry points: a status of the header, nothing written on failure, the Rust API's bits on success.
//! The check lives in tests/fuzzing/ (shared with `cargo test`, which runs it on the seed
//! corpus and fixed-seed inputs).
#![no_main]

#[path = "../../tests/fuzzing/mod.rs"]
mod fuzzing;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = fuzzing::capi::check(data);
});
