//! The decoding of a `capi` input: fields read in declaration order by [`Field::read`] and
//! written back the same way by [`Field::write`] for the seeds, and the value choices
//! shared by the calls (parameters, enum values, positions, struct sizes, counts).

use super::super::frequencies::{WILD, WILD_U64};
use super::super::input::{Input, Seed};

/// A field of a case: read from the input, written back by the seed generator.
pub trait Field: Sized {
    fn read(r: &mut Input<'_>) -> Self;
    fn write(&self, s: &mut Seed);
}

macro_rules! int_field {
    ($($t:ident),*) => {$(
        impl Field for $t {
            fn read(r: &mut Input<'_>) -> Self {
                r.$t()
            }
            fn write(&self, s: &mut Seed) {
                s.$t(*self);
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64);

/// Declares a struct of input fields and its [`Field`] impl, which reads and writes the
/// fields in declaration order: a case type and its seed writer cannot disagree.
macro_rules! raw {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name { $($(#[$fm])* pub $f: $t,)* }
        impl Field for $name {
            fn read(r: &mut Input<'_>) -> Self {
                $name { $($f: Field::read(r),)* }
            }
            fn write(&self, s: &mut Seed) {
                $(self.$f.write(s);)*
            }
        }
    };
}
pub(crate) use raw;

raw! {
    /// An f64 parameter: a typical value of the field (`sel < 0xA0`), a value of
    /// [`WILD`] (`sel < 0xE0`: extreme, subnormal, infinite, NaN), or the bits `raw`.
    pub struct F64Raw {
        pub sel: u8,
        pub raw: u64,
    }
}

impl F64Raw {
    pub fn get(&self, typical: &[f64]) -> f64 {
        match self.sel {
            s if s < 0xA0 => typical[usize::from(s) % typical.len()],
            s if s < 0xE0 => WILD[usize::from(s) % WILD.len()],
            _ => f64::from_bits(self.raw),
        }
    }

    /// Exactly `v`.
    pub fn exact(v: f64) -> Self {
        F64Raw { sel: 0xFF, raw: v.to_bits() }
    }
}

raw! {
    /// A u64 parameter: typical (`sel < 0xA0`), from [`WILD_U64`] (`< 0xE0`), or `raw`.
    pub struct U64Raw {
        pub sel: u8,
        pub raw: u64,
    }
}

impl U64Raw {
    pub fn get(&self, typical: &[u64]) -> u64 {
        match self.sel {
            s if s < 0xA0 => typical[usize::from(s) % typical.len()],
            s if s < 0xE0 => WILD_U64[usize::from(s) % WILD_U64.len()],
            _ => self.raw,
        }
    }

    pub fn exact(v: u64) -> Self {
        U64Raw { sel: 0xFF, raw: v }
    }
}

raw! {
    /// An enum-typed `uint32_t`: `sel % n` (the valid values `0..n`) for `sel < 0xF0`, else
    /// any `u32` (`raw`).
    pub struct EnumRaw {
        pub sel: u8,
        pub raw: u32,
    }
}

impl EnumRaw {
    pub fn get(&self, n: u32) -> u32 {
        if self.sel < 0xF0 {
            u32::from(self.sel) % n
        } else {
            self.raw
        }
    }

    /// The valid value `v` (< 0xF0).
    pub fn valid(v: u32) -> Self {
        EnumRaw { sel: v as u8, raw: 0 }
    }

    /// Any `u32`.
    pub fn any(v: u32) -> Self {
        EnumRaw { sel: 0xFF, raw: v }
    }
}

raw! {
    /// A start position for `tokens` rows: `sel % 6` picks 0, `raw % 256`, `2^24 + raw %
    /// 256`, `2^31 + raw % 2^31`, `u32::MAX - tokens + 1 + raw % 4` (past `u32::MAX` unless
    /// `raw % 4` is 0), or `raw`.
    pub struct StartRaw {
        pub sel: u8,
        pub raw: u32,
    }
}

impl StartRaw {
    pub fn get(&self, tokens: usize) -> u32 {
        match self.sel % 6 {
            0 => 0,
            1 => self.raw % 256,
            2 => (1 << 24) + self.raw % 256,
            3 => (1 << 31) + self.raw % (1 << 31),
            4 => {
                (u32::MAX - (tokens.min(u32::MAX as usize) as u32)).wrapping_add(1).wrapping_add(self.raw % 4)
            }
            _ => self.raw,
        }
    }

    /// Exactly `v`.
    pub fn exact(v: u32) -> Self {
        StartRaw { sel: 5, raw: v }
    }

    /// Whether it is the overflow choice (kept out of range in table mode).
    pub fn near_end(&self) -> bool {
        self.sel % 6 == 4
    }
}

/// A `flag` field (`truncate`, `has_*`): `v & 1`, or `v` itself (2..=255 are invalid) for
/// `v >= 0xF0`.
pub fn flag(v: u8) -> u8 {
    if v >= 0xF0 {
        v
    } else {
        v & 1
    }
}

/// `struct_size` of a versioned struct of `real` bytes: right for `sel < 0xF0`, else one
/// of 0, `real - 8`, `real + 8`, `real - 1`, `real + 1`, 8, `2 * real`, `real / 2`.
pub fn struct_size(sel: u8, real: usize) -> usize {
    if sel < 0xF0 {
        return real;
    }
    [0, real - 8, real + 8, real - 1, real + 1, 8, 2 * real, real / 2][usize::from(sel & 7)]
}

/// The count passed for a buffer of `real` elements of `size` bytes: `0xF0..0xF8` one to
/// eight fewer (the rest stays canary); `0xF8..` a count whose byte size exceeds
/// `PTRDIFF_MAX`; else `real`.
pub fn count(sel: u8, real: usize, size: usize) -> usize {
    match sel {
        0xF0..=0xF7 => real.saturating_sub(1 + usize::from(sel & 7)),
        0xF8..=0xFF => [
            usize::MAX,
            isize::MAX as usize / size + 1,
            usize::MAX / 2 + 1 + usize::from(sel & 4),
            (isize::MAX as usize / size) * 2,
        ][usize::from(sel & 3)],
        _ => real,
    }
}
