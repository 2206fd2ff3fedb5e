//! Every available tier bit-identical to the scalar tier on f32, nothing written outside the views or on error;
//! 1-D RoPE and, from the same bytes, MRoPE / 2-D vision RoPE and `MRopeIndex` (`tests/fuzzing/mrope.rs`).
//! The check lives in tests/fuzzing/ (shared with `cargo test`, which runs it on the seed
//! corpus and fixed-seed inputs).
#![no_main]

#[path = "../../tests/fuzzing/mod.rs"]
mod fuzzing;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = fuzzing::diff::check::<f32>(&fuzzing::diff::DiffCase::read(data));
    // The same bytes as a multimodal case (MRoPE, vision RoPE; issue 15).
    let _ = fuzzing::mrope::check::<f32>(data);
    // And as an `MRopeIndex` case (position streams, issue 15 review).
    let _ = fuzzing::mrope::check_index(data);
});
