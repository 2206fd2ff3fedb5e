//! Random and mutated real config.json text: a usable configuration or an error.
//! The check lives in tests/fuzzing/ (shared with `cargo test`, which runs it on the seed
//! corpus and fixed-seed inputs).
#![no_main]

#[path = "../../tests/fuzzing/mod.rs"]
mod fuzzing;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = fuzzing::config_json::check(data);
});
