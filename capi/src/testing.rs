//! Fault injection, so that tests can observe the statuses that correct input never
//! produces (`ROPE_PANIC`, `ROPE_OUT_OF_MEMORY`).
//!
//! Test builds only: this module is compiled into the unit tests and into the packages
//! built with `--cfg rope_capi_testing` (set by their build scripts: capi/testing, the
//! C library `librope_kernels_testing` that capi/tests/test_capi.c links, and capi/rlib,
//! for the fuzz target and tests/fuzz_logic.rs). The shipped `librope_kernels` has no
//! `rope_test_fault`, and the header declares it only under `#if defined(ROPE_CAPI_TESTING)`.

use core::sync::atomic::{AtomicBool, Ordering};

use crate::boundary::guard;
use crate::status::*;

/// A fault for `rope_test_fault`.
pub type rope_test_fault_kind = u32;
/// Panic inside the boundary guard of this call.
pub const ROPE_TEST_FAULT_PANIC: rope_test_fault_kind = 1;
/// Make the next `rope_new` of the process fail as if the allocator had.
pub const ROPE_TEST_FAULT_ALLOC: rope_test_fault_kind = 2;

/// Set by `ROPE_TEST_FAULT_ALLOC`: the next `rope_new` fails.
static FAIL_NEXT_ALLOC: AtomicBool = AtomicBool::new(false);

/// Whether the allocation of this `rope_new` is to fail; consumes the fault.
#[cfg(feature = "std")]
pub(crate) fn take_alloc_fault() -> bool {
    FAIL_NEXT_ALLOC.swap(false, Ordering::Relaxed)
}

/// For tests of the boundary (test builds only; see the module). `ROPE_TEST_FAULT_PANIC`:
/// panics inside this call's guard and returns `ROPE_PANIC` where the library catches
/// panics (built with `std` and `panic = "unwind"`, the default); elsewhere it does not
/// panic and returns `ROPE_INVALID_ARGUMENT`. With `std` the panic message goes to stderr
/// through the process's panic hook. `ROPE_TEST_FAULT_ALLOC`: the next `rope_new` returns
/// `ROPE_OUT_OF_MEMORY`; returns `ROPE_OK`.
///
/// Errors: `ROPE_UNKNOWN_ENUM` for another `fault`.
#[no_mangle]
pub extern "C" fn rope_test_fault(fault: rope_test_fault_kind) -> rope_status {
    guard(|| match fault {
        ROPE_TEST_FAULT_PANIC => panic_now(),
        ROPE_TEST_FAULT_ALLOC => {
            FAIL_NEXT_ALLOC.store(true, Ordering::Relaxed);
            Ok(())
        }
        _ => Err(ROPE_UNKNOWN_ENUM),
    })
}

#[cfg(all(feature = "std", panic = "unwind"))]
fn panic_now() -> Result<(), rope_status> {
    panic!("rope_test_fault(ROPE_TEST_FAULT_PANIC)")
}

#[cfg(not(all(feature = "std", panic = "unwind")))]
fn panic_now() -> Result<(), rope_status> {
    Err(ROPE_INVALID_ARGUMENT)
}
