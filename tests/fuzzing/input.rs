//! The byte stream a fuzz input is read from, and its inverse for writing seeds.
//!
//! Every read takes a fixed number of bytes (little endian) and yields 0 past the end of the
//! input, so every byte string decodes to some case and a truncated seed still decodes.
//! [`Seed`] writes the same fields in the same order, so a chosen case (a real model shape,
//! a test shape) becomes an exact corpus entry; the decoders map each field into its range
//! with `%`, so a writer stores the wanted value itself.

/// A reader over fuzz input.
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }

    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        for x in b.iter_mut() {
            if let Some(&v) = self.data.get(self.pos) {
                *x = v;
            }
            self.pos += 1;
        }
        b
    }

    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A value in `0..n` from one byte (`n <= 256`).
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!((1..=256).contains(&n));
        usize::from(self.u8()) % n
    }

    /// The bytes not read yet (empty past the end).
    pub fn rest(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }
}

/// Writes the fields an [`Input`] reads, in the same order.
#[derive(Default)]
pub struct Seed(pub Vec<u8>);

impl Seed {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }

    /// The byte [`Input::below`] maps to `v`.
    pub fn below(&mut self, v: usize) -> &mut Self {
        self.u8(u8::try_from(v).expect("below() takes one byte"))
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): the data generator, seeded from the input, so a
/// few bytes of input describe a whole tensor.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
