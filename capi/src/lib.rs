//! The C ABI of rope-kernels: `librope_kernels.a`, `librope_kernels.so` and the header
//! `include/rope_kernels.h` (generated from this crate by cbindgen, `capi/cbindgen.toml`).
//!
//! Conventions, the same for every function:
//! - Every fallible function returns a `rope_status` (`ROPE_OK` = 0, fixed error numbers,
//!   `rope_status_str`). Functions that cannot fail (`rope_version`, `rope_size`, ...)
//!   return their value.
//! - Whatever it is given, a function neither unwinds nor aborts: pointers are checked
//!   for NULL and alignment, enum-typed fields are read as integers and checked, sizes
//!   and strides are checked for overflow, buffers against their views (every buffer
//!   comes with its element count), and with `std` any panic (a bug) is caught and
//!   reported as `ROPE_PANIC`.
//! - A function that fails has written nothing: every check runs before the first write.
//! - A buffer is a pointer and an element count. A count of 0 allows any pointer, NULL
//!   included; it is never dereferenced. A count larger than the real buffer, or a handle
//!   pointer that is not one, cannot be detected and is undefined behaviour, as in C.
//! - Versioned structs (`rope_config`, `rope_apply_opts`, `rope_relative`, `rope_layer_args`) start with
//!   `size_t struct_size = sizeof(the struct)`, so later versions can append fields.
//! - Thread safety: calls on a `const rope_t *` may run concurrently; the tier functions
//!   change process-wide state (atomics) and are safe to call from any thread.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]
// The exported names are C names: `rope_config`, `ROPE_OK`.
#![allow(non_camel_case_types)]

#[cfg(any(feature = "std", test))]
extern crate std;

mod apply;
mod boundary;
mod config;
mod encodings;
mod handle;
mod layer;
mod mrope;
#[cfg(all(feature = "panic-handler", not(feature = "std"), not(test)))]
mod panic;
mod qknorm;
mod status;
mod storage;
// The test hook `rope_test_fault`: in test builds only (see src/testing.rs).
#[cfg(any(test, rope_capi_testing))]
mod testing;
mod tier;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_layer;

pub use apply::*;
pub use config::*;
pub use encodings::*;
pub use handle::*;
pub use layer::*;
pub use mrope::*;
pub use qknorm::*;
pub use status::*;
pub use storage::*;
#[cfg(any(test, rope_capi_testing))]
pub use testing::*;
pub use tier::*;

use core::ffi::c_char;

/// The version of the ABI this header describes. `rope_abi_version()` returns the
/// library's; they differ when a program runs with a library it was not compiled for.
/// Incremented on any incompatible change.
pub const ROPE_ABI_VERSION: u32 = 1;

/// The library version (`"0.1.0"`), a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn rope_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The ABI version of the library (compare with `ROPE_ABI_VERSION`).
#[no_mangle]
pub extern "C" fn rope_abi_version() -> u32 {
    ROPE_ABI_VERSION
}

/// A static NUL-terminated message for `status` (e.g. `"a required pointer is NULL"`);
/// `"unknown rope_status"` for a value that is no status.
#[no_mangle]
pub extern "C" fn rope_status_str(status: rope_status) -> *const c_char {
    describe(status).map_or("unknown rope_status\0", |(_, msg)| msg).as_ptr().cast()
}

/// The static NUL-terminated name of `status` (e.g. `"ROPE_NULL_POINTER"`);
/// `"ROPE_UNKNOWN_STATUS"` for a value that is no status.
#[no_mangle]
pub extern "C" fn rope_status_name(status: rope_status) -> *const c_char {
    describe(status).map_or("ROPE_UNKNOWN_STATUS\0", |(name, _)| name).as_ptr().cast()
}
