//! Random parameters of every scaling method: finite frequencies and cos/sin, or an error.
//! The check lives in tests/fuzzing/ (shared with `cargo test`, which runs it on the seed
//! corpus and fixed-seed inputs).
#![no_main]

#[path = "../../tests/fuzzing/mod.rs"]
mod fuzzing;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = fuzzing::frequencies::check(data);
});
