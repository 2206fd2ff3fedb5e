//! `rope_storage_size`: the bytes of caller storage a `rope_init` handle needs for one
//! configuration, for firmware that sizes its static storage to the model.

use crate::boundary::{guard, required};
use crate::config::{build, rope_config};
use crate::handle::rope_size;
use crate::status::*;

/// Validates `*cfg` as `rope_init` would and writes to `*size` the bytes of storage (aligned
/// to `rope_align()`) that `rope_init` needs for it: at most `ROPE_STORAGE_SIZE`, and no
/// more than `rope_size()`.
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
        unsafe { build(cfg) }?;
        // SAFETY: non-NULL, aligned (checked), writable (the contract).
        unsafe { out.as_ptr().write(rope_size()) };
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
