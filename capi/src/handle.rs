//! `rope_t`: the opaque handle, in caller storage (`rope_init`) or on the heap
//! (`rope_new`), and the calls that read its frequencies.

use core::mem::{align_of, needs_drop, offset_of, size_of};
use core::ptr::{addr_of, addr_of_mut};
use core::sync::atomic::{compiler_fence, Ordering};

use rope_kernels::{Rope, RopeParams, RopeState, ScalingRef, MAX_PAIRS};

use crate::boundary::{disjoint, guard, required, rust, Buf, R};
use crate::config::{rope_config, with_params};
use crate::status::*;

/// A validated RoPE configuration with its frequencies (opaque). Made by `rope_init`
/// into caller storage or by `rope_new` on the heap. It owns no other resource: storage
/// given to `rope_init` may be reused or freed at any time after the last call that uses
/// the handle. Calls that take a `const rope_t *` may run concurrently on one handle.
// Layout: this header, then the frequency tables sized to the configuration
// (`Rope::table_lens`: f64s, then f32s), `rope_storage_size` bytes in all.
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
    state: RopeState,
}

impl rope_t {
    fn new(magic: u32, state: RopeState) -> Self {
        rope_t { h: Handle { _allocator: [0; 4], magic, state } }
    }
}

const MAGIC_STORAGE: u32 = 0x524F_5045; // "ROPE"
const MAGIC_HEAP: u32 = 0x524F_5048; // "ROPH"

/// An upper bound of `rope_size()` on every target, for static storage:
/// `static _Alignas(ROPE_STORAGE_ALIGN) unsigned char buf[ROPE_STORAGE_SIZE];`.
pub const ROPE_STORAGE_SIZE: usize = 16384;
/// An upper bound of `rope_align()` on every target.
pub const ROPE_STORAGE_ALIGN: usize = 16;

/// The most storage any configuration needs: LongRoPE (two frequency sets) at the largest
/// `rotary_dim`.
const MAX_STORAGE: usize = storage_bytes(2 * 3 * MAX_PAIRS, 2 * MAX_PAIRS);

const _: () = assert!(MAX_STORAGE <= ROPE_STORAGE_SIZE);
const _: () = assert!(align_of::<rope_t>() <= ROPE_STORAGE_ALIGN);
// Storage is handed back without running any destructor.
const _: () = assert!(!needs_drop::<rope_t>());
// `magic` lies past 4 pointers of allocator bookkeeping (see `rope_t`).
const _: () = assert!(offset_of!(rope_t, h.magic) >= 4 * size_of::<usize>());

/// The bytes of a handle whose tables have `n64` f64 and `n32` f32 elements.
const fn storage_bytes(n64: usize, n32: usize) -> usize {
    size_of::<rope_t>() + n64 * size_of::<f64>() + n32 * size_of::<f32>()
}

/// The tables of the handle at `p`: `n64` f64s right after the header, then the f32s.
///
/// # Safety
/// `p` is aligned and valid (for reads, or writes with `mut`) for `storage_bytes(n64, n32)`
/// bytes.
unsafe fn tables(p: *mut rope_t, n64: usize) -> (*mut f64, *mut f32) {
    // SAFETY: within the storage (the contract); `size_of::<rope_t>()` is a multiple of its
    // alignment, 8, so the f64s and then the f32s are aligned.
    unsafe {
        let f64s = p.cast::<u8>().add(size_of::<rope_t>()).cast::<f64>();
        (f64s, f64s.add(n64).cast::<f32>())
    }
}

/// The RoPE of a live handle, its tables borrowed from the handle's storage.
///
/// # Safety
/// `p` is NULL or points to readable memory, the fixed header at least, that, if it holds
/// a live magic, holds a handle made by `rope_init`/`rope_new`, not written during the
/// returned borrow.
#[inline(always)]
pub(crate) unsafe fn rope_ref<'a>(p: *const rope_t) -> R<Rope<'a>> {
    let p = required(p)?.as_ptr();
    // SAFETY: aligned, readable (the contract); a `u32` accepts any bits.
    let magic = unsafe { addr_of!((*p).h.magic).read() };
    if magic != MAGIC_STORAGE && magic != MAGIC_HEAP {
        return Err(ROPE_INVALID_HANDLE);
    }
    // SAFETY: a live magic means `rope_init`/`rope_new` wrote a valid `RopeState` there.
    let state: &'a RopeState = unsafe { &(*p).h.state };
    let (n64, n32) = state.lens();
    if storage_bytes(n64, n32) > MAX_STORAGE {
        return Err(ROPE_INVALID_HANDLE);
    }
    // SAFETY: the handle's tables, within its readable storage (the contract; at most
    // MAX_STORAGE, just checked),
    // written by `rope_init`/`rope_new`, not written during the borrow (the contract).
    let (f64s, f32s): (&'a [f64], &'a [f32]) = unsafe {
        let (a, b) = tables(p, n64);
        (core::slice::from_raw_parts(a, n64), core::slice::from_raw_parts(b, n32))
    };
    state.rope(f64s, f32s).ok_or(ROPE_INVALID_HANDLE)
}

/// Runs `f` on the RoPE of a live handle, built in this frame and borrowed (no copy of it on
/// the way: the C apply calls' stack).
///
/// # Safety
/// As for [`rope_ref`], for the duration of `f`.
#[inline(always)]
pub(crate) unsafe fn with_rope<'a, T>(p: *const rope_t, f: impl FnOnce(&Rope<'a>) -> R<T>) -> R<T> {
    // SAFETY: the caller's contract, passed on.
    let r = unsafe { rope_ref(p) }?;
    f(&r)
}

/// The bytes of the handle at `p`, for [`disjoint`]: no buffer a call writes may overlap
/// them (`ROPE_OVERLAPPING_BUFFERS`), or the call would corrupt the handle it reads.
///
/// # Safety
/// `p` passed [`rope_ref`] (a live handle, readable).
pub(crate) unsafe fn storage(p: *const rope_t) -> (usize, usize) {
    // SAFETY: a live handle (the contract): its header is readable.
    let (n64, n32) = unsafe { (*p).h.state.lens() };
    // A live handle lies inside the address space: `rope_init` wrote it there.
    (p as usize, (p as usize).saturating_add(storage_bytes(n64, n32)))
}

/// The size in bytes of the storage `rope_init` needs for the largest configuration (at
/// most `ROPE_STORAGE_SIZE`); `rope_storage_size` gives the size for one configuration.
#[no_mangle]
pub extern "C" fn rope_size() -> usize {
    MAX_STORAGE
}

/// The alignment in bytes of the storage `rope_init` needs (at most
/// `ROPE_STORAGE_ALIGN`).
#[no_mangle]
pub extern "C" fn rope_align() -> usize {
    align_of::<rope_t>()
}

/// The storage bytes of the handle of `params` (validated as `rope_init` validates them),
/// and its table lengths.
pub(crate) fn storage_for(params: &RopeParams<'_>, inv_freq: Option<&[f32]>) -> R<(usize, usize, usize)> {
    let (n64, n32) = rust(Rope::check_in(params, inv_freq))?;
    Ok((storage_bytes(n64, n32), n64, n32))
}

/// Builds the handle of `params` into `p`, `magic` its kind.
///
/// # Safety
/// `p` is aligned and writable for `storage_bytes(n64, n32)` bytes (from [`storage_for`] of
/// the same arguments), none of which any other live borrow covers.
unsafe fn init_at(
    p: *mut rope_t,
    magic: u32,
    params: &RopeParams<'_>,
    inv_freq: Option<&[f32]>,
    (n64, n32): (usize, usize),
) -> R<()> {
    // SAFETY: the tables lie in the storage (the contract); `new_in` writes every element
    // before it reads it back, and any bits are valid f64/f32 values, so it may see the
    // storage's old bytes.
    let (f64s, f32s) = unsafe {
        let (a, b) = tables(p, n64);
        a.write_bytes(0, n64);
        b.write_bytes(0, n32);
        (core::slice::from_raw_parts_mut(a, n64), core::slice::from_raw_parts_mut(b, n32))
    };
    let state = match rust(Rope::new_in(params, inv_freq, f64s, f32s)) {
        // The fixed part; the tables stay where `new_in` computed them, after the header.
        Ok(rope) => rope.state(),
        Err(status) => {
            // Never taken: `storage_for` ran `Rope::check_in` (the frequencies too) on the
            // same parameters. Should it be, a handle the storage held has lost its tables:
            // make it invalid rather than leave it to compute garbage.
            // SAFETY: the header lies in the storage (the contract).
            unsafe { core::ptr::write_volatile(addr_of_mut!((*p).h.magic), 0) };
            return Err(status);
        }
    };
    // SAFETY: `p` is aligned and writable for the header (the contract); the old contents
    // need no drop.
    unsafe { p.write(rope_t::new(magic, state)) };
    Ok(())
}

/// The byte ranges of the arrays a configuration borrows: the f32 `inv_freq` table, the
/// LongRoPE factors, the per-pair `freq_factors` (empty ranges where it has none).
fn borrowed_arrays(params: &RopeParams<'_>, inv_freq: Option<&[f32]>) -> [(usize, usize); 3] {
    fn range<T>(s: &[T]) -> (usize, usize) {
        let start = s.as_ptr() as usize;
        (start, start + core::mem::size_of_val(s))
    }
    let mut r = [(0, 0); 3];
    if let Some(t) = inv_freq {
        r[0] = range(t);
    }
    match params.scaling {
        ScalingRef::LongRope(l) => (r[1], r[2]) = (range(l.short_factor), range(l.long_factor)),
        ScalingRef::FreqFactors(f) => r[1] = range(f),
        _ => {}
    }
    r
}

/// Validates `*cfg` and builds a handle in `storage` (`size` bytes, aligned to
/// `rope_align()`), without allocating; `*out` receives the handle (equal to `storage`).
/// The frequencies are computed into the storage, sized to the configuration
/// (`rope_storage_size`); arrays in `cfg` need not outlive the call. Storage that already
/// holds a handle may be reused.
///
/// Errors (nothing is written): `ROPE_NULL_POINTER` (`storage`, `cfg`, `out`),
/// `ROPE_MISALIGNED_POINTER`, `ROPE_BUFFER_TOO_SMALL` (`size` below the fixed header, or,
/// once the configuration is valid, below `rope_storage_size`),
/// `ROPE_OVERLAPPING_BUFFERS` (`out`, or an array the configuration points to, inside the
/// storage), and those of `rope_config_validate` (which include frequencies that leave
/// the accepted range once computed, checked before anything is written).
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
        // SAFETY: the caller's contract, passed on.
        unsafe {
            with_params(cfg, |params, inv_freq| {
                let (need, n64, n32) = storage_for(params, inv_freq)?;
                if size < need {
                    return Err(ROPE_BUFFER_TOO_SMALL);
                }
                let out_bytes = Buf::new(out.cast_const(), 1)?.bytes();
                let [a, b, c] = borrowed_arrays(params, inv_freq);
                disjoint(&[(storage as usize, storage as usize + need)], &[out_bytes, a, b, c])?;
                // SAFETY: `storage` is aligned and writable for `need <= size` bytes (checked,
                // the contract); the configuration's arrays are the caller's, outside it.
                init_at(storage, MAGIC_STORAGE, params, inv_freq, (n64, n32))?;
                // SAFETY: `out` is writable and outside the storage (checked).
                out.write(storage);
                Ok(())
            })
        }
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
        unsafe {
            with_params(cfg, |params, inv_freq| {
                let (need, n64, n32) = storage_for(params, inv_freq)?;
                let p = alloc(need)?;
                // SAFETY: `p` is a fresh allocation of `need` bytes, aligned for `rope_t`.
                if let Err(e) = init_at(p, MAGIC_HEAP, params, inv_freq, (n64, n32)) {
                    // SAFETY: just allocated with this size, never handed out.
                    dealloc_bytes(p, need);
                    return Err(e);
                }
                // SAFETY: `out` is writable and cannot lie inside memory the allocator
                // just handed out.
                out.write(p);
                Ok(())
            })
        }
    })
}

/// The heap layout of a handle of `bytes` bytes.
#[cfg(feature = "std")]
fn heap_layout(bytes: usize) -> R<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(bytes, align_of::<rope_t>()).map_err(|_| ROPE_OUT_OF_MEMORY)
}

#[cfg(feature = "std")]
fn alloc(bytes: usize) -> R<*mut rope_t> {
    // The test hook `ROPE_TEST_FAULT_ALLOC` (test builds only, src/testing.rs).
    #[cfg(any(test, rope_capi_testing))]
    if crate::testing::take_alloc_fault() {
        return Err(ROPE_OUT_OF_MEMORY);
    }
    let layout = heap_layout(bytes)?;
    // SAFETY: the layout has a non-zero size (at least the header).
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return Err(ROPE_OUT_OF_MEMORY);
    }
    Ok(p.cast())
}

#[cfg(not(feature = "std"))]
fn alloc(_: usize) -> R<*mut rope_t> {
    Err(ROPE_OUT_OF_MEMORY)
}

/// Releases a handle made by `rope_new`. NULL is a no-op (`ROPE_OK`), like `free(NULL)`.
///
/// Errors: `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_HANDLE` (not a live handle, or one
/// made by `rope_init`: caller storage is the caller's to release).
///
/// # Safety
/// `rope` is NULL or a pointer that `rope_new` returned or that is readable for
/// the fixed header (`rope_storage_size` of the configuration it was built from); not used by any other call meanwhile nor after success.
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
    // SAFETY: a heap handle (the contract): its header is readable.
    let (n64, n32) = unsafe { (*p).h.state.lens() };
    // SAFETY: `p` came from `alloc` with the size of these tables (the contract).
    unsafe { dealloc_bytes(p, storage_bytes(n64, n32)) }
}

/// Returns `bytes` bytes of heap memory at `p`.
///
/// # Safety
/// `p` came from `alloc(bytes)` and is not used again.
#[cfg(feature = "std")]
unsafe fn dealloc_bytes(p: *mut rope_t, bytes: usize) {
    // `alloc(bytes)` succeeded with this layout.
    if let Ok(layout) = heap_layout(bytes) {
        // SAFETY: `p` came from `alloc` with this layout (the contract).
        unsafe { std::alloc::dealloc(p.cast(), layout) }
    }
}

/// # Safety
/// Any pointer: without `std` no handle is on the heap and nothing is freed.
#[cfg(not(feature = "std"))]
unsafe fn dealloc(_: *mut rope_t) {
    // Unreachable: without `std` no handle carries MAGIC_HEAP.
}

/// # Safety
/// Any pointer: without `std` nothing is allocated.
#[cfg(not(feature = "std"))]
unsafe fn dealloc_bytes(_: *mut rope_t, _: usize) {}

/// `*pairs = rotary_dim / 2`, the width of a cos/sin table row and of `inv_freq`.
///
/// Errors: `ROPE_NULL_POINTER`, `ROPE_MISALIGNED_POINTER`, `ROPE_INVALID_HANDLE`,
/// `ROPE_OVERLAPPING_BUFFERS` (`pairs` inside the handle's storage).
///
/// # Safety
/// `rope` as for every handle function (NULL, or readable for the handle's storage, `rope_storage_size`
/// of its configuration, holding a handle); `pairs` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rope_pairs(rope: *const rope_t, pairs: *mut usize) -> rope_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = unsafe { rope_ref(rope) }?;
        let out = required(pairs)?;
        // SAFETY: `rope` passed `rope_ref`.
        disjoint(&[Buf::new(pairs.cast_const(), 1)?.bytes()], &[unsafe { storage(rope) }])?;
        // SAFETY: non-NULL, aligned, writable (the contract), outside the handle (checked).
        unsafe { out.as_ptr().write(r.pairs()) };
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
        let pairs = r.pairs();
        let out = Buf::new(inv_freq.cast_const(), inv_freq_len)?;
        if out.len() < pairs {
            return Err(ROPE_BUFFER_TOO_SMALL);
        }
        let af = if attention_factor.is_null() { None } else { Some(required(attention_factor)?) };
        // `attention_factor` may point into `inv_freq`, but neither into the handle.
        let af_bytes = Buf::new(attention_factor.cast_const(), usize::from(af.is_some()))?.bytes();
        // SAFETY: `rope` passed `rope_ref`.
        let handle = unsafe { storage(rope) };
        disjoint(&[out.bytes()], &[handle])?;
        disjoint(&[af_bytes], &[handle])?;
        // `attention_factor` may even point into `inv_freq`: the slice of the first `pairs`
        // doubles ends before the attention factor is written (raw). The handle's tables are
        // the library's, and `inv_freq` lies outside them (checked).
        // SAFETY: `inv_freq` is writable for `inv_freq_len >= pairs` doubles (checked, the
        // contract).
        let out = unsafe { core::slice::from_raw_parts_mut(inv_freq, pairs) };
        let value = rust(r.inv_freq_at(seq_len, out))?;
        if let Some(af) = af {
            // SAFETY: non-NULL, aligned, writable (the contract).
            unsafe { af.as_ptr().write(value) };
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
        // SAFETY: `rope` passed `rope_ref`.
        disjoint(&[c.bytes(), s.bytes()], &[unsafe { storage(rope) }])?;
        // SAFETY: checked by `Buf::new`, disjoint from each other and from the handle
        // (checked), writable (the contract).
        let (c, s) = unsafe { (c.slice_mut(), s.slice_mut()) };
        rust(r.fill_table(start, c, s))
    })
}
