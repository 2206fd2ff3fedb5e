//! `rope_storage_size`: the bytes of caller storage a `rope_init` handle needs for one
//! configuration, for firmware that sizes its static storage to the model.

use crate::boundary::{guard, required};
use crate::config::{rope_config, with_params};
use crate::handle::storage_for;
use crate::status::*;

/// Validates `*cfg` as `rope_init` would and writes to `*size` the bytes of storage (aligned
/// to `rope_align()`) that `rope_init` needs for it: a fixed header and 28 bytes per
/// rotated pair (`rotary_dim / 2`; twice for LongRoPE), at most `rope_size()`.
///
/// Errors (nothing is written): `ROPE_NULL_POINTER` (`cfg`, `size`),
/// `ROPE_MISALIGNED_POINTER`, and those of `rope_config_validate`.
///
/// # Safety
/// `cfg` as for `rope_config_validate`; `size` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_storage_size(cfg: *const rope_config, size: *mut usize) -> rope_status {
    #[cfg(rope_stack_hog_demo)]
    stack_hog_demo();
    guard(|| {
        let out = required(size)?;
        // SAFETY: the caller's contract, passed on.
        let (need, _, _) = unsafe { with_params(cfg, storage_for) }?;
        // SAFETY: non-NULL, aligned (checked), writable (the contract).
        unsafe { out.as_ptr().write(need) };
        Ok(())
    })
}

/// Test-only (`RUSTFLAGS=--cfg rope_stack_hog_demo`, never in a real build): 8 KB on the
/// stack of every `rope_storage_size` call, so that `.ci/stages/35-cortex-m.sh
/// --stack-hog-demo` can show that the Cortex-M stage fails when handle creation exceeds
/// its stack limit.
#[cfg(rope_stack_hog_demo)]
#[inline(never)]
fn stack_hog_demo() {
    let mut hog = [0u8; 8192];
    core::hint::black_box(&mut hog);
}
