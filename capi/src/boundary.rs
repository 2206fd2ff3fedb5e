//! Checks every pointer, length and integer that comes from C before any Rust reference
//! is made from it, and keeps panics from unwinding into C.

use core::mem::{align_of, size_of};
use core::ptr::NonNull;

use rope_kernels::{bf16, f16, Element};

use crate::status::*;

/// The result of a boundary check.
pub(crate) type R<T> = Result<T, rope_status>;

/// Runs `body`, turning its result into a status. With `std` a panic inside is caught
/// and reported as `ROPE_PANIC`; nothing unwinds into C. Without `std` the library is
/// built with `panic = "abort"` and is written not to panic (every input is checked
/// before use); a panic would reach the handler in `panic.rs`.
#[inline]
pub(crate) fn guard(body: impl FnOnce() -> R<()>) -> rope_status {
    #[cfg(feature = "std")]
    let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(_) => Err(ROPE_PANIC),
    };
    #[cfg(not(feature = "std"))]
    let result = body();
    match result {
        Ok(()) => ROPE_OK,
        Err(s) => s,
    }
}

/// Maps a Rust error to its status.
pub(crate) fn rust<T>(r: Result<T, rope_kernels::RopeError>) -> R<T> {
    r.map_err(from_error)
}

/// A required pointer: non-NULL and aligned for `T`.
pub(crate) fn required<T>(p: *const T) -> R<NonNull<T>> {
    let nn = NonNull::new(p.cast_mut()).ok_or(ROPE_NULL_POINTER)?;
    if !(p as usize).is_multiple_of(align_of::<T>()) {
        return Err(ROPE_MISALIGNED_POINTER);
    }
    Ok(nn)
}

/// Reads a `#[repr(C)]` struct of plain integers, floats and raw pointers (every bit
/// pattern valid) from a required pointer.
///
/// # Safety
/// A non-NULL, aligned `p` must be valid for reads of `size_of::<T>()` bytes, and `T`
/// must have no invalid bit patterns.
pub(crate) unsafe fn read<T: Copy>(p: *const T) -> R<T> {
    let p = required(p)?;
    // SAFETY: non-NULL and aligned (checked), valid for reads (the caller's contract),
    // and any bits are a valid `T` (the caller's contract).
    Ok(unsafe { p.as_ptr().read() })
}

/// Reads a versioned struct, whose first field is `size_t struct_size`: the pointer is
/// checked, then `struct_size` must equal `size_of::<T>()` (the only version so far; a
/// later version accepts the sizes of earlier ones and defaults their missing fields).
///
/// # Safety
/// As [`read`], except that only `struct_size` bytes need to be readable.
pub(crate) unsafe fn read_versioned<T: Copy>(p: *const T) -> R<T> {
    let nn = required(p)?;
    // SAFETY: aligned for `T`, hence for its first field, a `usize`; every struct of
    // every version starts with it.
    let size = unsafe { nn.as_ptr().cast::<usize>().read() };
    if size != size_of::<T>() {
        return Err(ROPE_UNSUPPORTED_STRUCT_SIZE);
    }
    // SAFETY: `struct_size` says the caller's struct is a whole `T`.
    unsafe { read(p) }
}

/// A flag of a C struct: 0 or 1.
pub(crate) fn flag(v: u8) -> R<bool> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(ROPE_INVALID_ARGUMENT),
    }
}

/// A C buffer of `len` elements of `T` that passed the checks: non-NULL and aligned
/// unless `len` is 0 (then `ptr` is dangling and never dereferenced), at most
/// `PTRDIFF_MAX` bytes, and not wrapping the address space.
#[derive(Clone, Copy)]
pub(crate) struct Buf<T> {
    ptr: *mut T,
    len: usize,
}

impl<T> Buf<T> {
    /// Checks `(p, len)`. A zero-length buffer may have any pointer, NULL included.
    pub(crate) fn new(p: *const T, len: usize) -> R<Self> {
        if len == 0 {
            return Ok(Buf { ptr: NonNull::dangling().as_ptr(), len: 0 });
        }
        let ptr = required(p)?.as_ptr();
        let bytes = len.checked_mul(size_of::<T>()).filter(|b| *b <= isize::MAX as usize);
        match bytes {
            Some(b) if (ptr as usize).checked_add(b).is_some() => Ok(Buf { ptr, len }),
            _ => Err(ROPE_INVALID_ARGUMENT),
        }
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The byte range `[start, end)`, for [`disjoint`]; empty for a zero-length buffer.
    /// Cannot overflow: checked in [`Buf::new`].
    pub(crate) fn bytes(&self) -> (usize, usize) {
        let start = self.ptr as usize;
        (start, start + self.len * size_of::<T>())
    }

    /// The buffer as a shared slice.
    ///
    /// # Safety
    /// The caller's promise for the C argument: `len` initialized elements, readable,
    /// and not written by anyone while the slice lives.
    pub(crate) unsafe fn slice<'a>(self) -> &'a [T] {
        // SAFETY: non-NULL, aligned, at most isize::MAX bytes (checked in `new`; dangling
        // and aligned for len 0); initialized and not written meanwhile (the contract).
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The buffer as a mutable slice.
    ///
    /// # Safety
    /// As [`Buf::slice`], plus writable and accessed through no other pointer (including
    /// the other buffers of the call, which the callers check with [`disjoint`])
    /// while the slice lives.
    pub(crate) unsafe fn slice_mut<'a>(self) -> &'a mut [T] {
        // SAFETY: as in `slice`, plus exclusive (the contract).
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// An element type and the C type of its buffers: `float` for `f32`, the `uint16_t` bit
/// pattern for `f16` and `bf16`. The `_f32`, `_f16` and `_bf16` shims of an entry point take
/// `T::C` pointers and hand them, with `T`, to one generic body, which checks them with
/// [`Buf::from_c`].
///
/// # Safety
/// `Self` and `C` have the same size and alignment, and every bit pattern of a `C` is a
/// valid `Self`: `len` initialized `C`s may be read and written as `len` `Self`s.
pub(crate) unsafe trait CElement: Element {
    /// The C element type.
    type C;
}

// SAFETY: the same type.
unsafe impl CElement for f32 {
    type C = f32;
}

// SAFETY: `half::f16` is `#[repr(transparent)]` over a `u16`, and every `u16` is an `f16`.
unsafe impl CElement for f16 {
    type C = u16;
}

// SAFETY: `half::bf16` is `#[repr(transparent)]` over a `u16`, and every `u16` is a `bf16`.
unsafe impl CElement for bf16 {
    type C = u16;
}

impl<T: CElement> Buf<T> {
    /// [`Buf::new`] for a C buffer of `len` `T::C`s, seen as `T`s (see [`CElement`]).
    pub(crate) fn from_c(p: *const T::C, len: usize) -> R<Self> {
        Self::new(p.cast(), len)
    }
}

/// Fails with `ROPE_OVERLAPPING_BUFFERS` if any written buffer shares a byte with any
/// other buffer of the call.
pub(crate) fn disjoint(written: &[(usize, usize)], read: &[(usize, usize)]) -> R<()> {
    let overlap =
        |(a0, a1): (usize, usize), (b0, b1): (usize, usize)| a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
    for (i, w) in written.iter().enumerate() {
        let others = written.iter().skip(i + 1).chain(read.iter());
        if others.into_iter().any(|o| overlap(*w, *o)) {
            return Err(ROPE_OVERLAPPING_BUFFERS);
        }
    }
    Ok(())
}
