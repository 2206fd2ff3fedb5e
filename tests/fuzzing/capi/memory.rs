//! The memory of the `capi` target: real allocations with canaries ([`Region`]), buffer
//! arguments passed as a pointer and a count ([`Arg`]), and the watch that checks every
//! byte a call could reach ([`Watch`]).

use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr;

use rope_kernels::{bf16, f16};
use rope_kernels_capi::{self as c, rope_status};

use super::status::Ctx;

/// Every byte of an allocation outside its payload (and a dead handle's storage). Not a
/// byte of a handle's magic, so canary bytes are never a live handle.
pub const CANARY: u8 = 0xA5;

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Chunk([u8; 16]);

/// How a pointer argument is passed (one input byte `p`): `p % 16` of 12 or 13 is NULL; 14
/// or 15 is a buffer `1 + (p >> 4) % (align - 1)` bytes past an aligned address (for
/// `align > 1`); anything else the buffer, aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    Real,
    Null,
    Misaligned(usize),
}

pub fn pass(p: u8, align: usize) -> Pass {
    match p % 16 {
        12 | 13 => Pass::Null,
        14 | 15 if align > 1 => Pass::Misaligned(1 + usize::from(p >> 4) % (align - 1)),
        _ => Pass::Real,
    }
}

/// [`pass`], except that NULL is passed as the buffer (for pointers whose NULL means
/// something else, like an absent k).
pub fn pass_non_null(p: u8, align: usize) -> Pass {
    match pass(p, align) {
        Pass::Null => Pass::Real,
        other => other,
    }
}

/// A real allocation: canary bytes, the payload (at an aligned address, or misaligned on
/// request), canary bytes. Accessed only through raw pointers, also by the callee.
pub struct Region {
    base: *mut Chunk,
    chunks: usize,
    offset: usize,
    bytes: usize,
    pass: Pass,
}

impl Region {
    pub fn new(bytes: usize, pass: Pass) -> Self {
        let misalign = match pass {
            Pass::Misaligned(k) => k,
            _ => 0,
        };
        let offset = 16 + misalign;
        let chunks = (offset + bytes + 16).div_ceil(16);
        let mem: Box<[Chunk]> = vec![Chunk([CANARY; 16]); chunks].into_boxed_slice();
        Region { base: Box::into_raw(mem).cast(), chunks, offset, bytes, pass }
    }

    /// The payload's address (also when NULL is passed).
    pub fn addr(&self) -> *mut u8 {
        // SAFETY: `offset` is inside the allocation of `chunks * 16` bytes.
        unsafe { self.base.cast::<u8>().add(self.offset) }
    }

    /// The pointer handed to the callee.
    pub fn ptr<T>(&self) -> *mut T {
        if self.pass == Pass::Null {
            ptr::null_mut()
        } else {
            self.addr().cast()
        }
    }

    pub fn pass(&self) -> Pass {
        self.pass
    }

    /// Payload bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Writes element `i` of the payload.
    pub fn put<T: Plain>(&mut self, i: usize, v: T) {
        assert!((i + 1) * size_of::<T>() <= self.bytes, "harness: write past the payload");
        // SAFETY: inside the payload (checked); unaligned writes are allowed anywhere.
        unsafe { self.addr().cast::<T>().add(i).write_unaligned(v) }
    }

    /// Reads element `i` of the payload.
    pub fn get<T: Plain>(&self, i: usize) -> T {
        assert!((i + 1) * size_of::<T>() <= self.bytes, "harness: read past the payload");
        // SAFETY: inside the payload (checked), initialized; any bits are a valid `T`.
        unsafe { self.addr().cast::<T>().add(i).read_unaligned() }
    }

    /// A struct of plain fields (no padding) as the payload.
    pub fn with_struct<T: Copy>(value: T, size: usize, pass: Pass) -> Self {
        let mut r = Region::new(size.max(size_of::<T>()), pass);
        r.zero();
        // SAFETY: the payload holds at least `size_of::<T>()` bytes; unaligned write.
        unsafe { r.addr().cast::<T>().write_unaligned(value) };
        r
    }

    pub fn zero(&mut self) {
        // SAFETY: the payload is inside the allocation.
        unsafe { self.addr().write_bytes(0, self.bytes) }
    }

    /// Every byte of the allocation.
    pub fn snapshot(&self) -> Vec<u8> {
        // SAFETY: the whole allocation is initialized (canaries, payload); no call is running.
        unsafe { std::slice::from_raw_parts(self.base.cast::<u8>(), self.chunks * 16) }.to_vec()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `base`/`chunks` came from `Box::into_raw` of a boxed slice of that length.
        drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(self.base, self.chunks)) });
    }
}

/// Element types of C buffers: plain numbers without padding, any bits valid.
pub trait Plain: Copy + std::fmt::Debug + 'static {}
impl Plain for u8 {}
impl Plain for f32 {}
impl Plain for f64 {}
impl Plain for u16 {}
impl Plain for u32 {}
impl Plain for i32 {}
impl Plain for i64 {}
impl Plain for usize {}
impl Plain for f16 {}
impl Plain for bf16 {}

/// The bytes of plain values.
pub fn bytes_of<T: Plain>(v: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; std::mem::size_of_val(v)];
    // SAFETY: `T: Plain` has no padding, so every byte of `v` is initialized.
    unsafe { ptr::copy_nonoverlapping(v.as_ptr().cast::<u8>(), out.as_mut_ptr(), out.len()) };
    out
}

/// A buffer argument: `real` elements of `T` in a [`Region`], passed as `(ptr, len)`.
pub struct Arg<T> {
    pub region: Region,
    real: usize,
    pub len: usize,
    _t: PhantomData<T>,
}

impl<T: Plain> Arg<T> {
    /// `values` in a fresh region, pointer passed as the byte `p` says, count `len` (at
    /// most `values.len()`, or one the callee must reject before reading).
    pub fn new(values: &[T], p: u8, len: usize) -> Self {
        Self::with_pass(values, pass(p, align_of::<T>()), len)
    }

    pub fn with_pass(values: &[T], pass: Pass, len: usize) -> Self {
        let mut region = Region::new(std::mem::size_of_val(values), pass);
        for (i, v) in values.iter().enumerate() {
            region.put(i, *v);
        }
        Arg { region, real: values.len(), len, _t: PhantomData }
    }

    pub fn ptr(&self) -> *mut T {
        self.region.ptr()
    }

    /// The elements the callee may touch: the first `len` (of the real ones).
    pub fn passed(&self) -> Vec<T> {
        (0..self.len.min(self.real)).map(|i| self.region.get(i)).collect()
    }

    /// Whether the byte size of `len` elements exceeds `PTRDIFF_MAX`.
    pub fn huge(&self) -> bool {
        self.len.checked_mul(size_of::<T>()).is_none_or(|b| b > isize::MAX as usize)
    }

    /// The defects of `(ptr, len)` as a buffer: none for a zero count; else NULL,
    /// misaligned, and a byte size past `PTRDIFF_MAX`.
    pub fn defects(&self, d: &mut Vec<rope_status>) {
        if self.len == 0 {
            return;
        }
        match self.region.pass() {
            Pass::Null => d.push(c::ROPE_NULL_POINTER),
            Pass::Misaligned(_) => d.push(c::ROPE_MISALIGNED_POINTER),
            Pass::Real => {}
        }
        if self.huge() {
            d.push(c::ROPE_INVALID_ARGUMENT);
        }
    }

    /// The payload bytes after a call that wrote `values` over the first elements.
    pub fn written(&self, values: &[T]) -> (&Region, Vec<u8>) {
        assert!(values.len() <= self.real);
        (&self.region, bytes_of(values))
    }
}

/// The defects of a required pointer (a struct, a handle, an out-parameter).
pub fn required(pass: Pass, d: &mut Vec<rope_status>) {
    match pass {
        Pass::Null => d.push(c::ROPE_NULL_POINTER),
        Pass::Misaligned(_) => d.push(c::ROPE_MISALIGNED_POINTER),
        Pass::Real => {}
    }
}

/// The memory one call can reach, with every byte as it was before the call.
pub struct Watch<'a> {
    seen: Vec<(&'a Region, Vec<u8>)>,
}

impl<'a> Watch<'a> {
    pub fn new(regions: impl IntoIterator<Item = &'a Region>) -> Self {
        let mut seen: Vec<(&Region, Vec<u8>)> = Vec::new();
        for r in regions {
            if !seen.iter().any(|(s, _)| ptr::eq(*s, r)) {
                seen.push((r, r.snapshot()));
            }
        }
        Watch { seen }
    }

    /// After the call: if it succeeded (`ok`), each `written` region holds its bytes at the
    /// start of its payload; every other byte of every region is as before.
    pub fn verify(&self, ctx: &Ctx<'_>, call: &str, ok: bool, written: &[(&Region, Vec<u8>)]) {
        for (i, (r, before)) in self.seen.iter().enumerate() {
            let mut want = before.clone();
            if ok {
                for (w, b) in written.iter().filter(|(w, _)| ptr::eq(*w, *r)) {
                    assert!(b.len() <= w.bytes, "harness: expected bytes past the payload");
                    want[w.offset..w.offset + b.len()].copy_from_slice(b);
                }
            }
            let now = r.snapshot();
            if let Some(j) = now.iter().zip(&want).position(|(a, b)| a != b) {
                let place = if j < r.offset || j >= r.offset + r.bytes { "canary" } else { "payload" };
                panic!(
                    "{call}: region {i} byte {j} ({place}, payload at {}..{}) is {:#04x}, want {:#04x} \
                     (the call {})\n{}",
                    r.offset,
                    r.offset + r.bytes,
                    now[j],
                    want[j],
                    if ok { "succeeded" } else { "failed" },
                    ctx.describe()
                );
            }
        }
    }
}
