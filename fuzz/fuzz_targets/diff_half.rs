//! Every available tier bit-identical to the scalar tier on f16 and bf16 (first byte picks), nothing written outside the views or on error.
//! The check lives in tests/fuzzing/ (shared with `cargo test`, which runs it on the seed
//! corpus and fixed-seed inputs).
#![no_main]

#[path = "../../tests/fuzzing/mod.rs"]
mod fuzzing;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = fuzzing::diff::check_half(data);
    // The same bytes as a multimodal case too (MRoPE, vision RoPE; issue 15).
    let _ = fuzzing::mrope::check_half(data);
});
