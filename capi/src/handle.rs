//! `rope_t`: the opaque handle, in caller storage (`rope_init`) or on the heap
//! (`rope_new`), and the calls that read its frequencies.

use core::mem::{align_of, needs_drop, offset_of, size_of};
use core::ptr::{addr_of, addr_of_mut};
use core::sync::atomic::{compiler_fence, Ordering};

use rope_kernels::Rope;

use crate::boundary::{disjoint, guard, required, rust, Buf, R};
use crate::config::{build, rope_config};
use crate::status::*;

/// A validated RoPE configuration with its frequencies (opaque). Made by `rope_init`
/// into caller storage or by `rope_new` on the heap. It owns no other resource: storage
/// given to `rope_init` may be reused or freed at any time after the last call that uses
/// the handle. Calls that take a `const rope_t *` may run concurrently on one handle.
pub struct rope_t {
    // Not `#[repr(C)]` itself, so that cbindgen declares it opaque.
    h: Handle,
}

/// The contents of a handle. `#[repr(C)]` fixes where `magic` sits: not in the first
/// bytes, where an allocator keeps its bookkeeping in a freed block (glibc: the free-list
/// links `fd`, `bk`, `fd_nextsize`, `bk_nextsize`, or tcache's `next` and `key`, 32 bytes
/// at most on 64-bit; jemalloc and mimalloc: one pointer), nor in the last ones (glibc:
/// the next chunk's `prev_size`). So the 0 that `rope_free` stores there stays, and a
/// stale pointer gets `ROPE_INVALID_HANDLE` until the memory is reused. Were the
/// allocator to write there anyway, it would write pointers or sizes, never a magic
/// value: the check would still fail.
#[repr(C)]
struct Handle {
    /// Never read or written by the library: room for the allocator's bookkeeping after
    /// `rope_free` (see above).
    _allocator: [usize; 4],
    /// `MAGIC_STORAGE` or `MAGIC_HEAP` while live; 0 after `rope_free`.
    magic: u32,
    rope: Rope,
}

impl rope_t {
    fn new(magic: u32, rope: Rope) -> Self {
        rope_t { h: Handle { _allocator: [0; 4], magic, rope } }
    }
}

const MAGIC_STORAGE: u32 = 0x524F_5045; // "ROPE"
const MAGIC_HEAP: u32 = 0x524F_5048; // "ROPH"

/// An upper bound of `rope_size()` on every target, for static storage:
/// `static unsigned char buf[ROPE_STORAGE_SIZE] _Alignas(ROPE_STORAGE_ALIGN);`.
pub const ROPE_STORAGE_SIZE: usize = 12288;
/// An upper bound of `rope_align()` on every target.
pub const ROPE_STORAGE_ALIGN: usize = 16;

const _: () = assert!(size_of::<rope_t>() <= ROPE_STORAGE_SIZE);
const _: () = assert!(align_of::<rope_t>() <= ROPE_STORAGE_ALIGN);
// Storage is handed back without running any destructor.
const _: () = assert!(!needs_drop::<rope_t>());
// `magic` lies past 4 pointers of allocator bookkeeping (see `rope_t`).
const _: () = assert!(offset_of!(rope_t, h.magic) >= 4 * size_of::<usize>());

/// The `Rope` of a live handle.
///
/// # Safety
/// `p` is NULL or points to readable memory of `size_of::<rope_t>()` bytes that, if it
/// holds a live magic, holds a handle made by `rope_init`/`rope_new`, not written during
/// the returned borrow.
pub(crate) unsafe fn rope_ref<'a>(p: *const rope_t) -> R<&'a Rope> {
    let p = required(p)?.as_ptr();
    // SAFETY: aligned, readable (the contract); a `u32` accepts any bits.
    let magic = unsafe { addr_of!((*p).h.magic).read() };
    if magic != MAGIC_STORAGE && magic != MAGIC_HEAP {
        return Err(ROPE_INVALID_HANDLE);
    }
    // SAFETY: a live magic means `rope_init`/`rope_new` wrote a valid `Rope` there.
    Ok(unsafe { &(*p).h.rope })
}

/// The bytes of the handle at `p`, for [`disjoint`]: no buffer a call writes may overlap
/// them (`ROPE_OVERLAPPING_BUFFERS`), or the call would corrupt the handle it reads.
pub(crate) fn storage(p: *const rope_t) -> (usize, usize) {
    // A live handle lies inside the address space: `rope_init` wrote it there.
    (p as usize, (p as usize).saturating_add(size_of::<rope_t>()))
}

/// The size in bytes of the storage `rope_init` needs (at most `ROPE_STORAGE_SIZE`).
#[no_mangle]
pub extern "C" fn rope_size() -> usize {
    size_of::<rope_t>()
}

/// The alignment in bytes of the storage `rope_init` needs (at most
/// `ROPE_STORAGE_ALIGN`).
#[no_mangle]
pub extern "C" fn rope_align() -> usize {
    align_of::<rope_t>()
}

/// Validates `*cfg` and builds a handle in `storage` (`size` bytes, aligned to
/// `rope_align()`), without allocating; `*out` receives the handle (equal to `storage`).
/// Arrays in `cfg` are copied. Storage that already holds a handle may be reused.
///
/// Errors (nothing is written): `ROPE_NULL_POINTER` (`storage`, `cfg`, `out`),
/// `ROPE_MISALIGNED_POINTER`, `ROPE_BUFFER_TOO_SMALL` (`size < rope_size()`),
/// `ROPE_OVERLAPPING_BUFFERS` (`out` inside the storage), and those of
/// `rope_config_validate`.
///
/// # Safety
/// `storage` is NULL or writable for `size` bytes; `cfg` as for `rope_config_validate`;
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_init(
    storage: *mut core::ffi::c_void,
    size: usize,
    cfg: *const rope_config,
    out: *mut *mut rope_t,
) -> rope_status {
    guard(|| {
        let storage = required(storage.cast::<rope_t>())?.as_ptr();
        let out = required(out)?.as_ptr();
        if size < size_of::<rope_t>() {
            return Err(ROPE_BUFFER_TOO_SMALL);
        }
        let out_bytes = Buf::new(out.cast_const(), 1)?.bytes();
        disjoint(&[(storage as usize, storage as usize + size_of::<rope_t>())], &[out_bytes])?;
        // SAFETY: the caller's contract, passed on.
        let rope = unsafe { build(cfg) }?;
        // SAFETY: `storage` is aligned and writable for a `rope_t` (checked size, the
        // contract); the old contents need no drop; `out` is writable and outside it.
        unsafe {
            storage.write(rope_t::new(MAGIC_STORAGE, rope));
            out.write(storage);
        }
        Ok(())
    })
}

/// Like `rope_init`, into memory from the global allocator; release it with `rope_free`.
///
/// Errors: `ROPE_OUT_OF_MEMORY` (also: always in a build without `std`), and those of
/// `rope_init` except the storage ones. Nothing is allocated on error.
///
/// # Safety
/// As for `rope_init`.
#[no_mangle]
pub unsafe extern "C" fn rope_new(cfg: *const rope_config, out: *mut *mut rope_t) -> rope_status {
    guard(|| {
        let out = required(out)?.as_ptr();
        // SAFETY: the caller's contract, passed on.
        let rope = unsafe { build(cfg) }?;
        let p = alloc()?;
        // SAFETY: `p` is a fresh allocation of a `rope_t`'s layout; `out` is writable and
        // cannot lie inside memory the allocator just handed out.
        unsafe {
            p.write(rope_t::new(MAGIC_HEAP, rope));
            out.write(p);
        }
        Ok(())
    })
}

#[cfg(feature = "std")]
fn alloc() -> R<*mut rope_t> {
    // The test hook `ROPE_TEST_FAULT_ALLOC` (test builds only, src/testing.rs).
    #[cfg(any(test, rope_capi_testing))]
    if crate::testing::take_alloc_fault() {
        return Err(ROPE_OUT_OF_MEMORY);
    }
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc(std::alloc::Layout::new::<rope_t>()) };
    if p.is_null() {
        return Err(ROPE_OUT_OF_MEMORY);
    }
    Ok(p.cast())
}

#[cfg(not(feature = "std"))]
fn alloc() -> R<*mut rope_t> {
    Err(ROPE_OUT_OF_MEMORY)
}

/// Releases a handle made by `rope_new`. NULL is a no-op (`ROPE_OK`), like `free(NULL)`.
///
/// Errors: `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_HANDLE` (not a live handle, or one
/// made by `rope_init`: caller storage is the caller's to release).
///
/// # Safety
/// `rope` is NULL or a pointer that `rope_new` returned or that is readable for
/// `rope_size()` bytes; not used by any other call meanwhile nor after success.
#[no_mangle]
pub unsafe extern "C" fn rope_free(rope: *mut rope_t) -> rope_status {
    guard(|| {
        if rope.is_null() {
            return Ok(());
        }
        let p = required(rope)?.as_ptr();
        // SAFETY: aligned and readable (the contract); a `u32` accepts any bits.
        if unsafe { addr_of!((*p).h.magic).read() } != MAGIC_HEAP {
            return Err(ROPE_INVALID_HANDLE);
        }
        // Clearing the magic makes a stale pointer fail with ROPE_INVALID_HANDLE (a second
        // `rope_free` included) until the memory is reused. A plain store just before
        // `dealloc` is dead to the optimizer, which removes it in release builds (issue
        // 16): the store is volatile, and the fence keeps `dealloc` after it.
        // SAFETY: a heap handle: aligned and writable.
        unsafe { core::ptr::write_volatile(addr_of_mut!((*p).h.magic), 0) };
        compiler_fence(Ordering::SeqCst);
        // SAFETY: a heap handle, released once (the contract).
        unsafe { dealloc(p) };
        Ok(())
    })
}

/// Returns a heap handle's memory.
///
/// # Safety
/// `p` came from [`alloc`] and is not used again.
#[cfg(feature = "std")]
unsafe fn dealloc(p: *mut rope_t) {
    // SAFETY: `p` came from `alloc` with this layout (the contract).
    unsafe { std::alloc::dealloc(p.cast(), std::alloc::Layout::new::<rope_t>()) }
}

/// # Safety
/// Any pointer: without `std` no handle is on the heap and nothing is freed.
#[cfg(not(feature = "std"))]
unsafe fn dealloc(_: *mut rope_t) {
    // Unreachable: without `std` no handle carries MAGIC_HEAP.
}

/// `*pairs = rotary_dim / 2`, the width of a cos/sin table row and of `inv_freq`.
///
/// Errors: `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_HANDLE`,
/// `ROPE_OVERLAPPING_BUFFERS` (`pairs` inside the handle's storage).
///
/// # Safety
/// `rope` as for every handle function (NULL, or `rope_size()` readable bytes holding a
/// handle); `pairs` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_pairs(rope: *const rope_t, pairs: *mut usize) -> rope_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { rope_ref(rope) }?;
        let out = required(pairs)?;
        disjoint(&[Buf::new(pairs.cast_const(), 1)?.bytes()], &[storage(rope)])?;
        // SAFETY: non-NULL, aligned, writable (the contract), outside the handle (checked).
        unsafe { out.as_ptr().write(r.config().pairs()) };
        Ok(())
    })
}

/// The frequencies a call whose largest position is `seq_len - 1` uses: `rotary_dim / 2`
/// values of `inv_freq` (radians per position, f64) into `inv_freq[0..rotary_dim / 2]`,
/// and the factor that multiplies cos and sin into `*attention_factor` (may be NULL when
/// not wanted). `seq_len` matters only for `ROPE_SCALING_DYNAMIC` and
/// `ROPE_SCALING_LONGROPE`; 0 gives their original (short) frequencies. A caller f32
/// table (`rope_config.inv_freq`) is not reflected here: these are the f64 values.
///
/// Errors: `ROPE_NULL_POINTER` (`rope`, `inv_freq`), `ROPE_MISALIGNED_POINTER`,
/// `ROPE_INVALID_HANDLE`, `ROPE_BUFFER_TOO_SMALL` (`inv_freq_len < rotary_dim / 2`),
/// `ROPE_OVERLAPPING_BUFFERS` (`inv_freq` or `attention_factor` overlaps the handle's
/// storage; they may overlap each other), `ROPE_INVALID_SCALING_PARAMETER` (dynamic NTK
/// whose frequencies at `seq_len` are not finite).
///
/// # Safety
/// `rope` a handle; `inv_freq` NULL or writable for `inv_freq_len` doubles;
/// `attention_factor` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_frequencies(
    rope: *const rope_t,
    seq_len: u64,
    inv_freq: *mut f64,
    inv_freq_len: usize,
    attention_factor: *mut f64,
) -> rope_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { rope_ref(rope) }?;
        let pairs = r.config().pairs();
        let out = Buf::new(inv_freq.cast_const(), inv_freq_len)?;
        if out.len() < pairs {
            return Err(ROPE_BUFFER_TOO_SMALL);
        }
        let af = if attention_factor.is_null() { None } else { Some(required(attention_factor)?) };
        // `attention_factor` may point into `inv_freq`, but neither into the handle.
        let af_bytes = Buf::new(attention_factor.cast_const(), usize::from(af.is_some()))?.bytes();
        disjoint(&[out.bytes()], &[storage(rope)])?;
        disjoint(&[af_bytes], &[storage(rope)])?;
        let freqs = rust(r.frequencies_at(seq_len))?;
        // Raw writes, no references: `attention_factor` may even point into `inv_freq`.
        // SAFETY: `inv_freq` is writable for `inv_freq_len >= pairs` doubles (checked,
        // the contract); the source is a Rust array, disjoint from C memory; the handle
        // is not written (checked).
        unsafe { core::ptr::copy_nonoverlapping(freqs.inv_freq().as_ptr(), inv_freq, pairs) };
        if let Some(af) = af {
            // SAFETY: non-NULL, aligned, writable (the contract), outside the handle.
            unsafe { af.as_ptr().write(freqs.attention_factor()) };
        }
        Ok(())
    })
}

/// Fills a cos/sin table with the rows of positions `start..start + rows`, where
/// `rows = len / (rotary_dim / 2)`: row `r` is `cos[r * pairs .. (r + 1) * pairs]` (and
/// the same range of `sin`) for position `start + r`, holding `attention_factor *
/// cos(position * inv_freq[i])`, the values the on-the-fly path uses. With `start = 0`
/// and `rows = max_positions` this builds a cache in caller memory for
/// `ROPE_COS_SIN_TABLE`. For dynamic NTK and LongRoPE the whole table uses the
/// frequencies of a call of length `start + rows`.
///
/// Errors: `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_HANDLE`,
/// `ROPE_INVALID_ARGUMENT` (byte size), `ROPE_OVERLAPPING_BUFFERS` (`cos`, `sin`, the
/// handle's storage: none may overlap another),
/// `ROPE_TABLE_SHAPE` (`len` not a multiple of `rotary_dim / 2`),
/// `ROPE_POSITION_OVERFLOW`, `ROPE_INVALID_SCALING_PARAMETER` (dynamic NTK).
///
/// # Safety
/// `rope` a handle; `cos` and `sin` NULL or writable for `len` floats each.
#[no_mangle]
pub unsafe extern "C" fn rope_fill_table(
    rope: *const rope_t,
    start: u32,
    cos: *mut f32,
    sin: *mut f32,
    len: usize,
) -> rope_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { rope_ref(rope) }?;
        let c = Buf::new(cos.cast_const(), len)?;
        let s = Buf::new(sin.cast_const(), len)?;
        disjoint(&[c.bytes(), s.bytes()], &[storage(rope)])?;
        // SAFETY: checked by `Buf::new`, disjoint from each other and from the handle
        // (checked), writable (the contract).
        let (c, s) = unsafe { (c.slice_mut(), s.slice_mut()) };
        rust(r.fill_table(start, c, s))
    })
}
