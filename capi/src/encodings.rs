//! Placeholder for the C entry points of the sibling positional encodings (sinusoidal,
//! learned absolute, relative (DeBERTa, T5 buckets), ALiBi), added once they are merged
//! into the Rust crate. Conventions to keep:
//!
//! - names `rope_<encoding>_<verb>[_<dtype>]`, e.g. `rope_alibi_slopes`,
//!   `rope_sinusoidal_fill_f32`; `#[repr(C)]` parameter structs that start with
//!   `size_t struct_size`; enums as fixed-width integers with `ROPE_*` constants;
//! - every fallible function returns `rope_status` through `boundary::guard`, checks each
//!   pointer with `boundary::Buf`/`required` before making a slice, and writes nothing on
//!   error;
//! - the encodings' `RopeError` kinds get status values 60..=79 in `status.rs` (until then
//!   `status::from_error` reports them as `ROPE_INVALID_ARGUMENT`), each with a name and
//!   message in `status::describe` and an exercise in `tests/test_capi.c`.
