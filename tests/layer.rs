//! The attention-layer call (`Rope::apply_layer`, issue 17) against a straightforward
//! reference built from the existing calls: each token's rows converted to f32 (exact),
//! rotated with `apply_into` in f32 at the token's position, then rounded once to the
//! destination type (`Element::from_f32`, or `quantize_row_q8_0` for q8_0 rows) and placed
//! where the destination says; `InPlace` against `apply` on the set's view. Every buffer
//! (the fused input and every destination, filled with canaries) is compared whole, by bits.
//! Every error variant leaves every buffer untouched; the overlap rule of head sets is checked
//! against brute force on random sets.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rope_kernels::{
    bf16, f16, quantize_row_q8_0, Apply, Batch, BlockQ8_0, CacheElement, CacheLayout, CosSin, CosSinTable,
    Dest, Element, HeadSet, Heads, HeadsMut, LayerApply, Layout, Operand, Positions, Qkv, Rope, RopeConfig,
    RopeError, Scaling, Slots, View,
};

const CASES: usize = if cfg!(miri) { 2 } else { 40 };

/// Test-side access to an input element type.
trait In: Element {
    fn pick(rng: &mut SmallRng) -> Self;
}

impl In for f32 {
    fn pick(rng: &mut SmallRng) -> Self {
        if rng.random_range(0..50) == 0 {
            return [f32::NAN, f32::INFINITY, -0.0, 1e-40][rng.random_range(0..4)];
        }
        rng.random_range(-4.0f32..4.0)
    }
}
impl In for f16 {
    fn pick(rng: &mut SmallRng) -> Self {
        f16::from_f32(f32::pick(rng))
    }
}
impl In for bf16 {
    fn pick(rng: &mut SmallRng) -> Self {
        bf16::from_f32(f32::pick(rng))
    }
}

/// Test-side access to a destination type: a canary, bits, and a row from f32 values.
trait Out: CacheElement {
    fn canary() -> Self;
    fn key(&self) -> Vec<u32>;
    fn row(x: &[f32]) -> Vec<Self>;
}

impl Out for f32 {
    fn canary() -> Self {
        f32::from_bits(0xDEAD_BEEF)
    }
    fn key(&self) -> Vec<u32> {
        vec![self.to_bits()]
    }
    fn row(x: &[f32]) -> Vec<Self> {
        x.iter().map(|&v| <f32 as Element>::from_f32(v)).collect()
    }
}
impl Out for f16 {
    fn canary() -> Self {
        f16::from_bits(0xBEEF)
    }
    fn key(&self) -> Vec<u32> {
        vec![u32::from(self.to_bits())]
    }
    fn row(x: &[f32]) -> Vec<Self> {
        x.iter().map(|&v| <f16 as Element>::from_f32(v)).collect()
    }
}
impl Out for bf16 {
    fn canary() -> Self {
        bf16::from_bits(0xBEEF)
    }
    fn key(&self) -> Vec<u32> {
        vec![u32::from(self.to_bits())]
    }
    fn row(x: &[f32]) -> Vec<Self> {
        x.iter().map(|&v| <bf16 as Element>::from_f32(v)).collect()
    }
}
impl Out for BlockQ8_0 {
    fn canary() -> Self {
        BlockQ8_0 { d: f16::from_bits(0xBEEF), qs: [0x5A; 32] }
    }
    fn key(&self) -> Vec<u32> {
        let mut v = vec![u32::from(self.d.to_bits())];
        v.extend(self.qs.iter().map(|&q| q as u8 as u32));
        v
    }
    fn row(x: &[f32]) -> Vec<Self> {
        let mut out = vec![BlockQ8_0::default(); x.len() / 32];
        quantize_row_q8_0(x, &mut out).unwrap();
        out
    }
}

fn keys<T: Out>(v: &[T]) -> Vec<u32> {
    v.iter().flat_map(Out::key).collect()
}

fn in_bits<T: Element>(v: &[T]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits_u32()).collect()
}

/// The tokens of a batch: `(token, sequence, position)`.
fn walk(batch: &Batch<'_>, tokens: usize) -> Vec<(usize, usize, u32)> {
    match *batch {
        Batch::Single(Positions::Start(s)) => (0..tokens).map(|t| (t, 0, s + t as u32)).collect(),
        Batch::Single(Positions::Ids(ids)) => (0..tokens).map(|t| (t, 0, ids[t])).collect(),
        Batch::Ragged { indptr, start } => (0..indptr.len() - 1)
            .flat_map(|i| (indptr[i]..indptr[i + 1]).map(move |t| (t as usize, i, start[i] + t - indptr[i])))
            .collect(),
        Batch::RaggedIds { indptr, position_ids } => (0..indptr.len() - 1)
            .flat_map(|i| (indptr[i]..indptr[i + 1]).map(move |t| (t as usize, i, position_ids[t as usize])))
            .collect(),
    }
}

/// The reference rows of token `t` of `set`: `[heads][head_dim]` f32 values, rotated at `pos`
/// (with `apply_into` in f32) unless `rotate` is false.
#[allow(clippy::too_many_arguments)]
fn ref_rows<I: Element>(
    rope: &Rope,
    qkv: &[I],
    set: &HeadSet,
    t: usize,
    pos: u32,
    cos_sin: CosSin<'_>,
    inverse: bool,
    rotate: bool,
) -> Vec<f32> {
    let hd = rope.config().head_dim;
    let mut x = Vec::with_capacity(set.heads * hd);
    for h in 0..set.heads {
        let o = set.offset + t * set.token_stride + h * set.head_stride;
        x.extend(qkv[o..o + hd].iter().map(|v| v.to_f32()));
    }
    if !rotate {
        return x;
    }
    let mut y = vec![0.0f32; x.len()];
    let view = View::bshd(1, set.heads, hd);
    let ids = [pos];
    let mut opts = Apply { positions: Positions::Ids(&ids), cos_sin, ..Apply::default() };
    if inverse {
        opts = opts.inverse();
    }
    rope.apply_into(Heads::new(&x, view), HeadsMut::new(&mut y, view), &opts).unwrap();
    y
}

/// The destination forms of one case.
#[derive(Clone, Copy, Debug)]
enum Form {
    Skip,
    InPlace,
    Tensor,
    Mapping,
    BlockNhd,
    BlockHnd,
    Positions,
}

/// A destination buffer and how to address it (built before the call, checked after).
struct Target<O> {
    form: Form,
    data: Vec<O>,
    view: View,
    layout: CacheLayout,
    mapping: Vec<i64>,
    table: Vec<u32>,
    blocks_per_seq: usize,
}

impl<O: Out> Target<O> {
    /// A destination of `form` for `heads` heads of `tokens` tokens in `sequences` sequences
    /// with positions below `max_pos + 1`.
    fn new(
        rng: &mut SmallRng,
        form: Form,
        walk: &[(usize, usize, u32)],
        sequences: usize,
        heads: usize,
        head_dim: usize,
    ) -> Self {
        let tokens = walk.len();
        let hl = head_dim / O::ELEMENTS_PER_UNIT;
        let max_pos = walk.iter().map(|w| w.2 as usize).max().unwrap_or(0);
        let mut t = Target {
            form,
            data: Vec::new(),
            view: View::bshd(tokens, heads, hl),
            layout: CacheLayout::default(),
            mapping: Vec::new(),
            table: Vec::new(),
            blocks_per_seq: 0,
        };
        match form {
            Form::Skip | Form::InPlace => {}
            Form::Tensor => {
                // Gaps between rows (canaries) and sometimes head-major.
                let gap = rng.random_range(0..3);
                t.view = if rng.random_bool(0.5) {
                    View { tokens, heads, token_stride: heads * (hl + gap), head_stride: hl + gap }
                } else {
                    View { tokens, heads, token_stride: hl + gap, head_stride: tokens * (hl + gap) }
                };
                t.data = vec![O::canary(); tokens * heads * (hl + 3) + 2];
            }
            Form::Mapping => {
                let slots = tokens * 2 + 3;
                t.layout = CacheLayout::contiguous(slots, heads, hl);
                let mut free: Vec<i64> = (0..slots as i64).collect();
                for _ in 0..tokens {
                    if rng.random_range(0..5) == 0 {
                        t.mapping.push(-1);
                    } else {
                        let i = rng.random_range(0..free.len());
                        t.mapping.push(free.swap_remove(i));
                    }
                }
                if rng.random_bool(0.5) {
                    // Increasing slots (the one-pass duplicate check).
                    let mut m: Vec<i64> = t.mapping.iter().copied().filter(|&s| s >= 0).collect();
                    m.sort();
                    let mut it = m.into_iter();
                    for s in t.mapping.iter_mut().filter(|s| **s >= 0) {
                        *s = it.next().unwrap();
                    }
                }
                t.data = vec![O::canary(); slots * heads * hl];
            }
            Form::BlockNhd | Form::BlockHnd => {
                let bs = [1, 2, 4, 16][rng.random_range(0..4)];
                t.blocks_per_seq = max_pos / bs + 1 + rng.random_range(0..2);
                let num_blocks = sequences * t.blocks_per_seq + 2;
                let mut free: Vec<u32> = (0..num_blocks as u32).collect();
                for _ in 0..sequences * t.blocks_per_seq {
                    let i = rng.random_range(0..free.len());
                    t.table.push(free.swap_remove(i));
                }
                t.layout = if matches!(form, Form::BlockNhd) {
                    CacheLayout::nhd(num_blocks, bs, heads, hl)
                } else {
                    CacheLayout::hnd(num_blocks, bs, heads, hl)
                };
                t.data = vec![O::canary(); num_blocks * bs * heads * hl];
            }
            Form::Positions => {
                t.layout = CacheLayout::contiguous(max_pos + 1 + rng.random_range(0..3), heads, hl);
                t.data = vec![O::canary(); t.layout.slots() * heads * hl];
            }
        }
        t
    }

    fn dest(&mut self) -> Dest<'_, O> {
        let slots = match self.form {
            Form::Mapping => Slots::Mapping(&self.mapping),
            Form::BlockNhd | Form::BlockHnd => {
                Slots::BlockTable { block_table: &self.table, blocks_per_seq: self.blocks_per_seq }
            }
            _ => Slots::Positions,
        };
        match self.form {
            Form::Skip => Dest::Skip,
            Form::InPlace => Dest::InPlace,
            Form::Tensor => Dest::Tensor { data: &mut self.data, view: self.view },
            _ => Dest::Cache { data: &mut self.data, layout: self.layout, slots },
        }
    }

    /// Where row `h` of token `t` (sequence `seq`, position `pos`) goes, or `None`.
    fn place(&self, t: usize, seq: usize, pos: u32, h: usize) -> Option<usize> {
        let bs = self.layout.block_size;
        let slot = match self.form {
            Form::Skip | Form::InPlace => return None,
            Form::Tensor => return Some(t * self.view.token_stride + h * self.view.head_stride),
            Form::Mapping => usize::try_from(self.mapping[t]).ok()?,
            Form::BlockNhd | Form::BlockHnd => {
                let p = pos as usize;
                self.table[seq * self.blocks_per_seq + p / bs] as usize * bs + p % bs
            }
            Form::Positions => pos as usize,
        };
        Some(self.layout.row(slot, h))
    }

    /// The expected buffer: the canaried one with every written row replaced.
    fn expected(&self, rows: &[(usize, usize, u32, Vec<f32>)], heads: usize, head_dim: usize) -> Vec<O> {
        let hl = head_dim / O::ELEMENTS_PER_UNIT;
        let mut e = self.data.clone();
        for (t, seq, pos, x) in rows {
            for h in 0..heads {
                if let Some(at) = self.place(*t, *seq, *pos, h) {
                    e[at..at + hl].copy_from_slice(&O::row(&x[h * head_dim..(h + 1) * head_dim]));
                }
            }
        }
        e
    }
}

/// A random batch of `tokens` tokens: `(batch arrays, kind)`.
struct BatchData {
    kind: u8,
    start: u32,
    indptr: Vec<u32>,
    starts: Vec<u32>,
    ids: Vec<u32>,
}

impl BatchData {
    fn new(rng: &mut SmallRng, tokens: usize, kind: u8) -> Self {
        let sequences = rng.random_range(1..4);
        let mut cuts: Vec<u32> = (0..sequences - 1).map(|_| rng.random_range(0..=tokens as u32)).collect();
        cuts.sort();
        let mut indptr = vec![0];
        indptr.extend(cuts);
        indptr.push(tokens as u32);
        let starts = (0..sequences).map(|_| rng.random_range(0..40)).collect();
        // Distinct positions (distinct slots for `Slots::Positions` and block tables).
        let mut free: Vec<u32> = (0..60).collect();
        let ids = (0..tokens).map(|_| free.swap_remove(rng.random_range(0..free.len()))).collect();
        BatchData { kind, start: rng.random_range(0..30), indptr, starts, ids }
    }

    fn batch(&self) -> Batch<'_> {
        match self.kind {
            0 => Batch::Single(Positions::Start(self.start)),
            1 => Batch::Single(Positions::Ids(&self.ids)),
            2 => Batch::Ragged { indptr: &self.indptr, start: &self.starts },
            _ => Batch::RaggedIds { indptr: &self.indptr, position_ids: &self.ids },
        }
    }

    fn sequences(&self) -> usize {
        if self.kind < 2 {
            1
        } else {
            self.indptr.len() - 1
        }
    }
}

/// Random Rope: head_dim 64 (q8_0 needs whole blocks), full or partial rotary_dim, either
/// layout, plain or Llama 3 scaling.
fn random_rope(rng: &mut SmallRng) -> Rope<'static> {
    let hd = 64;
    let mut c = RopeConfig::new(hd, 10_000.0)
        .with_rotary_dim([64, 32, 16][rng.random_range(0..3)])
        .with_layout(if rng.random_bool(0.5) { Layout::HalfSplit } else { Layout::Interleaved });
    if rng.random_bool(0.3) {
        c = c.with_scaling(Scaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 32,
        });
    }
    Rope::new(c).unwrap()
}

/// One random call: q, k, v to destinations of `forms` and types `Q`, `K`, `V`, checked
/// against the reference, every buffer whole, by bits.
fn case<I: In + Out, Q: Out, K: Out, V: Out>(rng: &mut SmallRng, forms: [Form; 3]) {
    let rope = random_rope(rng);
    let hd = rope.config().head_dim;
    let tokens = rng.random_range(0..6);
    let (qh, kvh) = (rng.random_range(1..5), rng.random_range(1..3));
    let sets = if rng.random_bool(0.3) { HeadSet::neox_qkv(qh, hd) } else { HeadSet::qkv_rows(qh, kvh, hd) };
    let width = sets[0].token_stride;
    let qkv0: Vec<I> = (0..tokens * width + rng.random_range(0..5)).map(|_| I::pick(rng)).collect();
    // Positions stay within 64 for a table.
    let mut kind = rng.random_range(0..4);
    if kind == 2 && forms.iter().any(|f| matches!(f, Form::Positions)) {
        // Sequences from their own starts would share position slots.
        kind = 3;
    }
    let bd = BatchData::new(rng, tokens, kind);
    let batch = bd.batch();
    let w = walk(&batch, tokens);
    let (mut cos, mut sin) = (vec![0.0; 80 * rope.config().pairs()], vec![0.0; 80 * rope.config().pairs()]);
    rope.fill_table(0, &mut cos, &mut sin).unwrap();
    let cos_sin = if rng.random_bool(0.5) {
        CosSin::Table(CosSinTable::new(&cos, &sin, rope.config().pairs()).unwrap())
    } else {
        CosSin::OnTheFly
    };
    let inverse = rng.random_bool(0.3);
    let mut opts = LayerApply { batch, cos_sin, ..LayerApply::default() };
    if inverse {
        opts = opts.inverse();
    }
    let seqs = bd.sequences();
    let mut tq = Target::<Q>::new(rng, forms[0], &w, seqs, sets[0].heads, hd);
    let mut tk = Target::<K>::new(rng, forms[1], &w, seqs, sets[1].heads, hd);
    let mut tv = Target::<V>::new(rng, forms[2], &w, seqs, sets[2].heads, hd);

    // The expected outputs, from the input before the call.
    let rows = |set: &HeadSet, rotate: bool| -> Vec<(usize, usize, u32, Vec<f32>)> {
        w.iter()
            .map(|&(t, s, p)| (t, s, p, ref_rows(&rope, &qkv0, set, t, p, cos_sin, inverse, rotate)))
            .collect()
    };
    let eq = tq.expected(&rows(&sets[0], true), sets[0].heads, hd);
    let ek = tk.expected(&rows(&sets[1], true), sets[1].heads, hd);
    let ev = tv.expected(&rows(&sets[2], false), sets[2].heads, hd);
    let mut eqkv = qkv0.clone();
    for (set, form) in sets.iter().zip(forms).take(2) {
        if matches!(form, Form::InPlace) {
            for (_, r, p) in ranges(&batch, tokens).into_iter().filter(|x| !x.1.is_empty()) {
                let sub = &mut eqkv[set.offset + r.start * set.token_stride..];
                let o = Apply { positions: p, cos_sin, direction: opts.direction };
                rope.apply(HeadsMut::new(sub, set.view(r.len())), &o).unwrap();
            }
        }
    }

    let mut qkv = qkv0.clone();
    let what = format!("{forms:?} tokens {tokens} sets {sets:?} batch {batch:?}");
    rope.apply_layer(Qkv::new(&mut qkv, tokens, sets), tq.dest(), tk.dest(), tv.dest(), &opts)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(in_bits(&qkv), in_bits(&eqkv), "qkv {what}");
    assert_eq!(keys(&tq.data), keys(&eq), "q {what}");
    assert_eq!(keys(&tk.data), keys(&ek), "k {what}");
    assert_eq!(keys(&tv.data), keys(&ev), "v {what}");
}

/// The sequences of a batch: `(sequence, tokens, positions)`.
fn ranges<'b>(batch: &Batch<'b>, tokens: usize) -> Vec<(usize, std::ops::Range<usize>, Positions<'b>)> {
    match *batch {
        Batch::Single(p) => vec![(0, 0..tokens, p)],
        Batch::Ragged { indptr, start } => (0..indptr.len() - 1)
            .map(|i| (i, indptr[i] as usize..indptr[i + 1] as usize, Positions::Start(start[i])))
            .collect(),
        Batch::RaggedIds { indptr, position_ids } => (0..indptr.len() - 1)
            .map(|i| {
                let r = indptr[i] as usize..indptr[i + 1] as usize;
                (i, r.clone(), Positions::Ids(&position_ids[r]))
            })
            .collect(),
    }
}

const CACHE_FORMS: [Form; 5] = [Form::Tensor, Form::Mapping, Form::BlockNhd, Form::BlockHnd, Form::Positions];

/// Every destination form (as q, k and v) for one (input, output) type pair; `Positions` only
/// with a single sequence (several sequences would share slots).
fn pair_suite<I: In + Out, O: Out>(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for n in 0..CASES {
        for f in CACHE_FORMS {
            let g = CACHE_FORMS[n % 4];
            case::<I, O, O, O>(&mut rng, [f, g, f]);
            case::<I, O, O, O>(&mut rng, [g, f, Form::Skip]);
        }
    }
}

macro_rules! pairs {
    ($($name:ident: $i:ty => $o:ty;)+) => {$(
        #[test]
        fn $name() {
            pair_suite::<$i, $o>(line!() as u64);
        }
    )+};
}

pairs! {
    f32_to_f32: f32 => f32;
    f32_to_f16: f32 => f16;
    f32_to_bf16: f32 => bf16;
    f32_to_q8_0: f32 => BlockQ8_0;
    f16_to_f32: f16 => f32;
    f16_to_f16: f16 => f16;
    f16_to_bf16: f16 => bf16;
    f16_to_q8_0: f16 => BlockQ8_0;
    bf16_to_f32: bf16 => f32;
    bf16_to_f16: bf16 => f16;
    bf16_to_bf16: bf16 => bf16;
    bf16_to_q8_0: bf16 => BlockQ8_0;
}

/// q and k in place (the input's type), v to a cache of each type; q in place with k out.
fn in_place_suite<I: In + Out>(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for n in 0..CASES {
        let f = CACHE_FORMS[n % CACHE_FORMS.len()];
        case::<I, I, I, bf16>(&mut rng, [Form::InPlace, Form::InPlace, f]);
        case::<I, I, BlockQ8_0, f16>(&mut rng, [Form::InPlace, f, f]);
        case::<I, f32, I, BlockQ8_0>(&mut rng, [f, Form::InPlace, Form::Mapping]);
        case::<I, I, I, I>(&mut rng, [Form::InPlace, Form::Skip, Form::InPlace]);
        case::<I, f32, f16, f32>(&mut rng, [Form::Skip, Form::Skip, f]);
    }
}

#[test]
fn in_place_f32() {
    in_place_suite::<f32>(1);
}

#[test]
fn in_place_f16() {
    in_place_suite::<f16>(2);
}

#[test]
fn in_place_bf16() {
    in_place_suite::<bf16>(3);
}

// ---- The overlap rule against brute force ----

/// Whether two sets share an element, by marking every element of one.
fn brute_overlap(a: &HeadSet, b: &HeadSet, tokens: usize, hd: usize, len: usize) -> bool {
    let mut mark = vec![false; len];
    let rows = |s: HeadSet| {
        (0..tokens)
            .flat_map(move |t| (0..s.heads).map(move |h| s.offset + t * s.token_stride + h * s.head_stride))
    };
    for r in rows(*a) {
        mark[r..r + hd].iter_mut().for_each(|m| *m = true);
    }
    rows(*b).any(|r| mark[r..r + hd].iter().any(|&m| m))
}

/// The set fits `len` elements and its rows nest (what the call checks before overlap).
fn fits(s: &HeadSet, tokens: usize, hd: usize, len: usize) -> bool {
    match s.view(tokens).validate(hd, usize::MAX, Operand::Q) {
        Ok(0) => true,
        Ok(n) => s.offset + n <= len,
        Err(_) => false,
    }
}

#[test]
fn overlap_rule_matches_brute_force() {
    let mut rng = SmallRng::seed_from_u64(17);
    let (mut hits, mut misses) = (0, 0);
    let ropes: Vec<Rope> =
        [2, 4, 6].iter().map(|&hd| Rope::new(RopeConfig::new(hd, 10_000.0)).unwrap()).collect();
    let cases = if cfg!(miri) { 200 } else { 40_000 };
    for n in 0..cases {
        let rope = &ropes[n % 3];
        let hd = rope.config().head_dim;
        let tokens = rng.random_range(1..5);
        let len = 160;
        let set = |rng: &mut SmallRng, ts: Option<usize>| HeadSet {
            offset: rng.random_range(0..40),
            heads: rng.random_range(0..4),
            token_stride: ts.unwrap_or_else(|| rng.random_range(0..30)),
            head_stride: rng.random_range(0..16),
        };
        let a = set(&mut rng, None);
        // Half the cases share the token stride (the rows of one fused buffer).
        let b = set(&mut rng, if n % 2 == 0 { Some(a.token_stride) } else { None });
        if !fits(&a, tokens, hd, len) || !fits(&b, tokens, hd, len) {
            continue;
        }
        let expect = brute_overlap(&a, &b, tokens, hd, len);
        let mut buf = vec![1.0f32; len];
        let r = rope.apply_head_sets(&mut buf, tokens, a, Some(b), &Apply::start(3));
        let what = format!("a {a:?} b {b:?} tokens {tokens} hd {hd}");
        if expect {
            hits += 1;
            assert_eq!(r, Err(RopeError::OverlappingHeadSets { a: Operand::Q, b: Operand::K }), "{what}");
            assert!(buf.iter().all(|&x| x == 1.0), "written on error: {what}");
        } else {
            misses += 1;
            assert_eq!(r, Ok(()), "{what}");
        }
        // v (read) against k (in place): the pair k-v.
        let mut buf = vec![1.0f32; len];
        let mut out = vec![0.0f32; tokens * b.heads.max(1) * hd];
        let view = View::bshd(tokens, b.heads, hd);
        let r = rope.apply_layer(
            Qkv::new(&mut buf, tokens, [HeadSet::default(), a, b]),
            Dest::<f32>::Skip,
            Dest::<f32>::InPlace,
            Dest::Tensor { data: &mut out, view },
            &LayerApply::default(),
        );
        if expect {
            assert_eq!(r, Err(RopeError::OverlappingHeadSets { a: Operand::K, b: Operand::V }), "{what}");
        } else {
            assert_eq!(r, Ok(()), "{what}");
        }
    }
    assert!(hits > cases / 20 && misses > cases / 20, "hits {hits} misses {misses}");
}

// ---- Errors: each variant, nothing written ----

const HD: usize = 64;
const TOKENS: usize = 3;

/// The buffers of the error tests: a fused f32 QKV `[3][4 + 2 + 2][64]` (random), a q
/// output tensor (f32), a bf16 k cache and a q8_0 v cache of 16 slots (canaries).
struct Bufs {
    qkv: Vec<f32>,
    q: Vec<f32>,
    k: Vec<bf16>,
    v: Vec<BlockQ8_0>,
}

fn bufs() -> Bufs {
    let mut rng = SmallRng::seed_from_u64(5);
    Bufs {
        qkv: (0..TOKENS * 8 * HD).map(|_| rng.random_range(-1.0..1.0)).collect(),
        q: vec![<f32 as Out>::canary(); TOKENS * 4 * HD],
        k: vec![<bf16 as Out>::canary(); 16 * 2 * HD],
        v: vec![<BlockQ8_0 as Out>::canary(); 16 * 2 * HD / 32],
    }
}

/// Runs `f` on fresh buffers; checks it returns `expected` and left every buffer as it was.
fn expect_err(expected: RopeError, f: impl FnOnce(&Rope, &mut Bufs) -> Result<(), RopeError>) {
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let mut b = bufs();
    let before = bufs();
    assert_eq!(f(&rope, &mut b), Err(expected));
    assert_eq!(in_bits(&b.qkv), in_bits(&before.qkv), "qkv written: {expected:?}");
    assert_eq!(keys(&b.q), keys(&before.q), "q written: {expected:?}");
    assert_eq!(keys(&b.k), keys(&before.k), "k written: {expected:?}");
    assert_eq!(keys(&b.v), keys(&before.v), "v written: {expected:?}");
}

/// The standard call on the error buffers, with k/v slots, q view and options given.
fn layer(
    rope: &Rope,
    b: &mut Bufs,
    sets: [HeadSet; 3],
    q_view: View,
    (k_layout, k_slots): (CacheLayout, Slots<'_>),
    (v_layout, v_slots): (CacheLayout, Slots<'_>),
    opts: &LayerApply<'_>,
) -> Result<(), RopeError> {
    rope.apply_layer(
        Qkv::new(&mut b.qkv, TOKENS, sets),
        Dest::Tensor { data: &mut b.q, view: q_view },
        Dest::Cache { data: &mut b.k, layout: k_layout, slots: k_slots },
        Dest::Cache { data: &mut b.v, layout: v_layout, slots: v_slots },
        opts,
    )
}

const SETS: [HeadSet; 3] = HeadSet::qkv_rows(4, 2, HD);
const QV: View = View::bshd(TOKENS, 4, HD);
const KL: CacheLayout = CacheLayout::nhd(4, 4, 2, HD);
const VL: CacheLayout = CacheLayout::nhd(4, 4, 2, HD / 32);
const MAP: [i64; 3] = [5, 2, 9];

#[test]
fn a_good_call_writes() {
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let mut b = bufs();
    let opts = LayerApply::default();
    layer(&rope, &mut b, SETS, QV, (KL, Slots::Mapping(&MAP)), (VL, Slots::Mapping(&MAP)), &opts).unwrap();
    assert_ne!(keys(&b.k), keys(&bufs().k));
}

#[test]
fn errors_write_nothing() {
    let m = || (KL, Slots::Mapping(&MAP));
    let mv = || (VL, Slots::Mapping(&MAP));
    let d = LayerApply::default();
    // 1. Sets against the buffer.
    let mut sets = SETS;
    sets[2].offset += 1;
    expect_err(
        RopeError::BufferTooShort { operand: Operand::V, needed: TOKENS * 8 * HD + 1, len: TOKENS * 8 * HD },
        |r, b| layer(r, b, sets, QV, m(), mv(), &d),
    );
    let mut sets = SETS;
    sets[1].head_stride = 10;
    expect_err(RopeError::OverlappingStrides { operand: Operand::K }, |r, b| {
        layer(r, b, sets, QV, m(), mv(), &d)
    });
    let mut sets = SETS;
    sets[0].token_stride = usize::MAX / 2;
    expect_err(RopeError::StrideOverflow { operand: Operand::Q }, |r, b| {
        layer(r, b, sets, QV, m(), mv(), &d)
    });
    // 2. Overlap: k over v (k's heads shifted by one head into v's).
    let mut sets = SETS;
    sets[1].offset += HD;
    expect_err(RopeError::OverlappingHeadSets { a: Operand::K, b: Operand::V }, |r, b| {
        layer(r, b, sets, QV, m(), mv(), &d)
    });
    let mut sets = SETS;
    sets[0].heads = 5;
    let qv5 = View::bshd(TOKENS, 5, HD);
    expect_err(RopeError::OverlappingHeadSets { a: Operand::Q, b: Operand::K }, |r, b| {
        layer(r, b, sets, qv5, m(), mv(), &d)
    });
    // 3. In place into another type; q8_0 with a partial block; destination shapes.
    expect_err(RopeError::UnsupportedTypePair { operand: Operand::QOut }, |r, b| {
        r.apply_layer(
            Qkv::new(&mut b.qkv, TOKENS, SETS),
            Dest::<f16>::InPlace,
            Dest::<f32>::Skip,
            Dest::<f32>::Skip,
            &d,
        )
    });
    expect_err(RopeError::PartialQuantBlock { operand: Operand::KOut, head_dim: 48 }, |_, b| {
        let rope = Rope::new(RopeConfig::new(48, 10_000.0)).unwrap();
        rope.apply_layer(
            Qkv::new(&mut b.qkv, TOKENS, HeadSet::qkv_rows(4, 2, 48)),
            Dest::<f32>::InPlace,
            Dest::Cache { data: &mut b.v, layout: CacheLayout::nhd(4, 4, 2, 1), slots: Slots::Mapping(&MAP) },
            Dest::<f32>::Skip,
            &d,
        )
    });
    let qv_short = View::bshd(TOKENS, 4, HD + 1);
    expect_err(
        RopeError::BufferTooShort { operand: Operand::QOut, needed: 3 * 4 * 65 - 1, len: 3 * 4 * 64 },
        |r, b| layer(r, b, SETS, qv_short, m(), mv(), &d),
    );
    expect_err(RopeError::ShapeMismatch { operand: Operand::QOut }, |r, b| {
        layer(r, b, SETS, View::bshd(2, 4, HD), m(), mv(), &d)
    });
    expect_err(RopeError::ShapeMismatch { operand: Operand::QOut }, |r, b| {
        layer(r, b, SETS, View::bshd(3, 3, HD), m(), mv(), &d)
    });
    let big = CacheLayout::nhd(5, 4, 2, HD);
    expect_err(
        RopeError::BufferTooShort { operand: Operand::KOut, needed: 5 * 4 * 2 * HD, len: 16 * 2 * HD },
        |r, b| layer(r, b, SETS, QV, (big, Slots::Mapping(&MAP)), mv(), &d),
    );
    let mut lap = KL;
    lap.slot_stride = HD;
    expect_err(RopeError::OverlappingStrides { operand: Operand::KOut }, |r, b| {
        layer(r, b, SETS, QV, (lap, Slots::Mapping(&MAP)), mv(), &d)
    });
    // 4. The batch.
    for (indptr, reason) in [
        (&[][..], "indptr is empty (it has sequences + 1 entries)"),
        (&[1, 3][..], "indptr[0] is not 0"),
        (&[0, 2, 1, 3][..], "indptr decreases"),
        (&[0, 2][..], "indptr does not end at the call's token count"),
    ] {
        let start = vec![0; indptr.len().saturating_sub(1)];
        let o = LayerApply::batch(Batch::Ragged { indptr, start: &start });
        expect_err(RopeError::InvalidIndptr { reason }, |r, b| layer(r, b, SETS, QV, m(), mv(), &o));
    }
    let o = LayerApply::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[0] });
    expect_err(
        RopeError::InvalidIndptr { reason: "start has other than indptr.len() - 1 entries" },
        |r, b| layer(r, b, SETS, QV, m(), mv(), &o),
    );
    let o = LayerApply::batch(Batch::RaggedIds { indptr: &[0, 1, 3], position_ids: &[0, 1] });
    expect_err(RopeError::PositionCountMismatch { tokens: 3, positions: 2 }, |r, b| {
        layer(r, b, SETS, QV, m(), mv(), &o)
    });
    let o = LayerApply::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[0, u32::MAX] });
    expect_err(RopeError::PositionOverflow, |r, b| layer(r, b, SETS, QV, m(), mv(), &o));
    let o = LayerApply::batch(Batch::Single(Positions::Start(u32::MAX - 1)));
    expect_err(RopeError::PositionOverflow, |r, b| layer(r, b, SETS, QV, m(), mv(), &o));
    // 5. Slots.
    expect_err(RopeError::SlotMappingLength { operand: Operand::KOut, tokens: 3, len: 2 }, |r, b| {
        layer(r, b, SETS, QV, (KL, Slots::Mapping(&[1, 2])), mv(), &d)
    });
    expect_err(
        RopeError::SlotOutOfRange { operand: Operand::KOut, token: 1, slot: 16, slots: 16 },
        |r, b| layer(r, b, SETS, QV, (KL, Slots::Mapping(&[1, 16, 2])), mv(), &d),
    );
    expect_err(
        RopeError::SlotOutOfRange { operand: Operand::VOut, token: 2, slot: -2, slots: 16 },
        |r, b| layer(r, b, SETS, QV, m(), (VL, Slots::Mapping(&[1, 3, -2])), &d),
    );
    expect_err(RopeError::DuplicateSlot { operand: Operand::KOut, token: 2, slot: 5 }, |r, b| {
        layer(r, b, SETS, QV, (KL, Slots::Mapping(&[5, 1, 5])), mv(), &d)
    });
    expect_err(RopeError::DuplicateSlot { operand: Operand::VOut, token: 1, slot: 7 }, |r, b| {
        layer(r, b, SETS, QV, m(), (VL, Slots::Mapping(&[7, 7, -1])), &d)
    });
    // Skipped tokens never collide.
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    layer(&rope, &mut bufs(), SETS, QV, (KL, Slots::Mapping(&[-1, 4, -1])), mv(), &d).unwrap();
    let o = LayerApply::batch(Batch::Single(Positions::Start(14)));
    expect_err(
        RopeError::SlotOutOfRange { operand: Operand::KOut, token: 2, slot: 16, slots: 16 },
        |r, b| layer(r, b, SETS, QV, (KL, Slots::Positions), mv(), &o),
    );
    // Two sequences of two blocks each; sequence 1's positions 7, 8 need its block 2.
    let bt = [0u32, 1, 2, 3];
    let o = LayerApply::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[0, 7] });
    let slots = Slots::BlockTable { block_table: &bt, blocks_per_seq: 2 };
    expect_err(RopeError::BlockTableTooShort { operand: Operand::KOut, sequence: 1, position: 8 }, |r, b| {
        layer(r, b, SETS, QV, (KL, slots), mv(), &o)
    });
    // blocks_per_seq 3 but a table of 4 entries: position 7 of sequence 1 reads entry 3 + 1.
    let slots = Slots::BlockTable { block_table: &bt, blocks_per_seq: 3 };
    expect_err(RopeError::BlockTableTooShort { operand: Operand::KOut, sequence: 1, position: 7 }, |r, b| {
        layer(r, b, SETS, QV, (KL, slots), mv(), &o)
    });
    let bt = [0u32, 4, 2, 3];
    let slots = Slots::BlockTable { block_table: &bt, blocks_per_seq: 2 };
    let o = LayerApply::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[4, 2] });
    expect_err(
        RopeError::BlockOutOfRange { operand: Operand::KOut, token: 0, block: 4, num_blocks: 4 },
        |r, b| layer(r, b, SETS, QV, (KL, slots), mv(), &o),
    );
    // Two sequences sharing a block: a duplicate found by the quadratic pass.
    let bt = [3u32, 1, 0, 3];
    let slots = Slots::BlockTable { block_table: &bt, blocks_per_seq: 2 };
    let o = LayerApply::batch(Batch::Ragged { indptr: &[0, 1, 3], start: &[1, 5] });
    expect_err(RopeError::DuplicateSlot { operand: Operand::KOut, token: 1, slot: 13 }, |r, b| {
        layer(r, b, SETS, QV, (KL, slots), mv(), &o)
    });
    let zero = CacheLayout::nhd(0, 0, 2, HD);
    expect_err(RopeError::InvalidBlockSize { operand: Operand::KOut }, |r, b| {
        layer(r, b, SETS, QV, (zero, Slots::BlockTable { block_table: &[0], blocks_per_seq: 1 }), mv(), &d)
    });
    // 6. The table.
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let (mut cos, mut sin) = (vec![0.0; 2 * 32], vec![0.0; 2 * 32]);
    rope.fill_table(0, &mut cos, &mut sin).unwrap();
    let o = LayerApply::default().with_table(CosSinTable::new(&cos, &sin, 32).unwrap());
    expect_err(RopeError::PositionOutOfRange { position: 2, rows: 2 }, |r, b| {
        layer(r, b, SETS, QV, m(), mv(), &o)
    });
    let o = LayerApply::default().with_table(CosSinTable::new(&cos, &sin, 16).unwrap());
    expect_err(RopeError::TableShape, |r, b| layer(r, b, SETS, QV, m(), mv(), &o));
}

/// Zero tokens is an `Ok` no-op; an empty ragged batch too.
#[test]
fn empty_calls() {
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let mut b = bufs();
    rope.apply_layer(
        Qkv::new(&mut b.qkv, 0, SETS),
        Dest::<f32>::InPlace,
        Dest::Cache { data: &mut b.k, layout: KL, slots: Slots::Mapping(&[]) },
        Dest::<f32>::Skip,
        &LayerApply::batch(Batch::Ragged { indptr: &[0, 0, 0], start: &[5, 6] }),
    )
    .unwrap();
    assert_eq!(in_bits(&b.qkv), in_bits(&bufs().qkv));
    assert_eq!(keys(&b.k), keys(&bufs().k));
}

/// `apply_head_sets` equals `apply_qk` on two separate tensors (the fused buffer split).
#[test]
fn head_sets_equal_apply_qk() {
    let rope = Rope::new(RopeConfig::new(HD, 500_000.0)).unwrap();
    let [q, k, _] = HeadSet::qkv_rows(4, 2, HD);
    let mut fused: Vec<f32> = bufs().qkv;
    let mut qt: Vec<f32> =
        (0..TOKENS).flat_map(|t| fused[t * 8 * HD..t * 8 * HD + 4 * HD].to_vec()).collect();
    let mut kt: Vec<f32> =
        (0..TOKENS).flat_map(|t| fused[t * 8 * HD + 4 * HD..t * 8 * HD + 6 * HD].to_vec()).collect();
    let opts = Apply::start(1000);
    rope.apply_head_sets(&mut fused, TOKENS, q, Some(k), &opts).unwrap();
    rope.apply_qk(
        HeadsMut::new(&mut qt, View::bshd(TOKENS, 4, HD)),
        Some(HeadsMut::new(&mut kt, View::bshd(TOKENS, 2, HD))),
        &opts,
    )
    .unwrap();
    for t in 0..TOKENS {
        assert_eq!(
            in_bits(&fused[t * 8 * HD..t * 8 * HD + 4 * HD]),
            in_bits(&qt[t * 4 * HD..(t + 1) * 4 * HD])
        );
        assert_eq!(
            in_bits(&fused[t * 8 * HD + 4 * HD..t * 8 * HD + 6 * HD]),
            in_bits(&kt[t * 2 * HD..(t + 1) * 2 * HD])
        );
    }
}

// ---- Review fixes (issue 17): sets of 0 heads, v in place of another type ----

/// A used set of 0 heads passes its checks whatever its offset and strides (it touches no
/// element); the call must then form no pointer for it (Miri: no out-of-bounds offset), not
/// panic, and give the result of the same call with that part skipped.
fn zero_heads_case(
    tokens: usize,
    k: HeadSet,
    v: HeadSet,
    mut run: impl FnMut(&Rope, &mut [f32], [HeadSet; 3]) -> Result<(), RopeError>,
) {
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let q = HeadSet { offset: 0, heads: 1, token_stride: 64, head_stride: 64 };
    let fresh = || -> Vec<f32> { (0..tokens * 64).map(|i| (i % 17) as f32 * 0.1 - 0.8).collect() };
    let mut got = fresh();
    run(&rope, &mut got, [q, k, v]).unwrap();
    let mut want = fresh();
    rope.apply_head_sets(&mut want, tokens, q, None, &Apply::start(0)).unwrap();
    assert_eq!(in_bits(&got), in_bits(&want));
}

#[test]
fn zero_head_k_in_place_huge_token_stride() {
    let k = HeadSet { offset: 0, heads: 0, token_stride: usize::MAX, head_stride: 0 };
    zero_heads_case(3, k, HeadSet::default(), |r, qkv, sets| {
        r.apply_layer(
            Qkv::new(qkv, 3, sets),
            Dest::<f32>::InPlace,
            Dest::<f32>::InPlace,
            Dest::<f32>::Skip,
            &LayerApply::default(),
        )
    });
}

#[test]
fn zero_head_k_in_place_offset_past_buffer() {
    let k = HeadSet { offset: usize::MAX / 8, heads: 0, token_stride: 0, head_stride: 0 };
    zero_heads_case(1, k, HeadSet::default(), |r, qkv, sets| {
        r.apply_layer(
            Qkv::new(qkv, 1, sets),
            Dest::<f32>::InPlace,
            Dest::<f32>::InPlace,
            Dest::<f32>::Skip,
            &LayerApply::default(),
        )
    });
}

#[test]
fn zero_head_v_cache_huge_block_stride() {
    let v = HeadSet { offset: usize::MAX, heads: 0, token_stride: usize::MAX, head_stride: 0 };
    let layout = CacheLayout {
        num_blocks: 8,
        block_size: 1,
        block_stride: usize::MAX,
        slot_stride: 0,
        head_stride: 0,
    };
    let mut cache = vec![<bf16 as Out>::canary(); 4];
    zero_heads_case(3, HeadSet::default(), v, |r, qkv, sets| {
        r.apply_layer(
            Qkv::new(qkv, 3, sets),
            Dest::<f32>::InPlace,
            Dest::<f32>::Skip,
            Dest::Cache { data: &mut cache, layout, slots: Slots::Positions },
            &LayerApply::default(),
        )
    });
    assert_eq!(keys(&cache), keys(&[<bf16 as Out>::canary(); 4]));
}

#[test]
fn zero_head_v_tensor_huge_token_stride() {
    let v = HeadSet { offset: 0, heads: 0, token_stride: 0, head_stride: 0 };
    let view = View { tokens: 3, heads: 0, token_stride: usize::MAX, head_stride: 0 };
    let mut out = vec![<f32 as Out>::canary(); 4];
    zero_heads_case(3, HeadSet::default(), v, |r, qkv, sets| {
        r.apply_layer(
            Qkv::new(qkv, 3, sets),
            Dest::<f32>::InPlace,
            Dest::<f32>::Skip,
            Dest::Tensor { data: &mut out, view },
            &LayerApply::default(),
        )
    });
    assert_eq!(keys(&out), keys(&[<f32 as Out>::canary(); 4]));
}

/// A k set of 0 heads into a paged cache whose layout no buffer bounds (it touches no
/// element): a block-table slot `block * block_size + position % block_size` past
/// `usize::MAX` is `SlotOutOfRange` (not an overflow panic in a debug build, nor a wrapped
/// slot in a release one), nothing written; a slot that fits is an `Ok` call that rotates q
/// alone.
#[test]
fn zero_head_k_block_table_slot_past_usize() {
    let half = 1usize << (usize::BITS - 2);
    // 8 blocks of 2^(bits - 2) slots: `slots()` saturates at `usize::MAX`.
    let layout =
        CacheLayout { num_blocks: 8, block_size: half, block_stride: 0, slot_stride: 0, head_stride: 0 };
    let k = HeadSet { offset: 0, heads: 0, token_stride: 64, head_stride: 64 };
    let call = |block: u32, qkv: &mut [f32], cache: &mut [f32]| {
        let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
        let q = HeadSet { offset: 0, heads: 1, token_stride: 64, head_stride: 64 };
        let table = [block];
        rope.apply_layer(
            Qkv::new(qkv, 1, [q, k, HeadSet::default()]),
            Dest::<f32>::InPlace,
            Dest::Cache {
                data: cache,
                layout,
                slots: Slots::BlockTable { block_table: &table, blocks_per_seq: 1 },
            },
            Dest::<f32>::Skip,
            &LayerApply::batch(Batch::Single(Positions::Start(5))),
        )
    };
    let fresh = || -> Vec<f32> { (0..64).map(|i| (i % 17) as f32 * 0.1 - 0.8).collect() };
    let canaries = vec![<f32 as Out>::canary(); 4];
    for block in [4u32, 7] {
        // 4 * 2^(bits - 2) + 5 = 2^bits + 5: past `usize::MAX` (and past `i64::MAX`).
        let (mut qkv, mut cache) = (fresh(), canaries.clone());
        let want =
            RopeError::SlotOutOfRange { operand: Operand::KOut, token: 0, slot: i64::MAX, slots: usize::MAX };
        assert_eq!(call(block, &mut qkv, &mut cache), Err(want), "block {block}");
        assert_eq!(in_bits(&qkv), in_bits(&fresh()), "qkv written, block {block}");
        assert_eq!(keys(&cache), keys(&canaries), "cache written, block {block}");
    }
    // 3 * 2^(bits - 2) + 5 fits: the call runs (q rotated, the 0-head k writes nothing).
    let (mut qkv, mut cache) = (fresh(), canaries.clone());
    call(3, &mut qkv, &mut cache).unwrap();
    let mut want = fresh();
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let q = HeadSet { offset: 0, heads: 1, token_stride: 64, head_stride: 64 };
    rope.apply_head_sets(&mut want, 1, q, None, &Apply::start(5)).unwrap();
    assert_eq!(in_bits(&qkv), in_bits(&want));
    assert_eq!(keys(&cache), keys(&canaries));
}

/// `Dest::InPlace` of another type than the buffer's is refused for v too (as C's
/// `ROPE_DEST_IN_PLACE`), though v in place writes nothing; of the same type it is a no-op.
#[test]
fn v_in_place_needs_the_input_type() {
    let [q, _, v] = SETS;
    expect_err(RopeError::UnsupportedTypePair { operand: Operand::VOut }, |r, b| {
        r.apply_layer(
            Qkv::new(&mut b.qkv, TOKENS, [q, HeadSet::default(), v]),
            Dest::Tensor { data: &mut b.q, view: QV },
            Dest::<f32>::Skip,
            Dest::<bf16>::InPlace,
            &LayerApply::default(),
        )
    });
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).unwrap();
    let mut b = bufs();
    rope.apply_layer(
        Qkv::new(&mut b.qkv, TOKENS, [q, HeadSet::default(), v]),
        Dest::<f32>::Skip,
        Dest::<f32>::Skip,
        Dest::<f32>::InPlace,
        &LayerApply::default(),
    )
    .unwrap();
    assert_eq!(in_bits(&b.qkv), in_bits(&bufs().qkv));
}

/// The duplicate-row rule (a `Vec`-sorted or block-run check when slots do not increase)
/// against brute force (the first token, in order, whose slot an earlier token writes), on
/// random slot mappings and block tables (shuffled, shared and repeated blocks) over single,
/// ragged and `position_ids` batches.
#[test]
fn duplicate_slots_match_brute_force() {
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let mut rng = SmallRng::seed_from_u64(17);
    let [q, k, _] = HeadSet::qkv_rows(1, 1, 64);
    for case in 0..if cfg!(miri) { 20 } else { 3000 } {
        let tokens = rng.random_range(1..=24usize);
        let (num_blocks, bs) = (rng.random_range(1..=12usize), rng.random_range(1..=5usize));
        let layout = CacheLayout::nhd(num_blocks, bs, 1, 64);
        let n = num_blocks * bs;
        let seqs = rng.random_range(1..=4usize);
        let mut cuts: Vec<u32> = (0..seqs - 1).map(|_| rng.random_range(0..=tokens as u32)).collect();
        cuts.sort_unstable();
        let indptr: Vec<u32> = [0].into_iter().chain(cuts).chain([tokens as u32]).collect();
        let bps = rng.random_range(1..=6usize);
        let cap = (bps * bs) as u32;
        let start: Vec<u32> =
            indptr.windows(2).map(|w| rng.random_range(0..=cap - (w[1] - w[0]).min(cap))).collect();
        // Positions per token: from starts, or explicit ids (often increasing, sometimes not).
        let sorted_ids = rng.random_bool(0.5);
        let ids: Vec<u32> = indptr
            .windows(2)
            .flat_map(|w| {
                let mut v: Vec<u32> = (w[0]..w[1]).map(|_| rng.random_range(0..cap)).collect();
                if sorted_ids {
                    v.sort_unstable();
                    v.dedup();
                    while v.len() < (w[1] - w[0]) as usize {
                        v.push(cap - 1);
                    }
                }
                v
            })
            .collect();
        let batch = match case % 3 {
            0 => Batch::Ragged { indptr: &indptr, start: &start },
            1 => Batch::RaggedIds { indptr: &indptr, position_ids: &ids },
            _ => Batch::Single(Positions::Ids(&ids)),
        };
        let table: Vec<u32> = if rng.random_bool(0.5) {
            (0..seqs * bps).map(|_| rng.random_range(0..num_blocks as u32)).collect()
        } else {
            // A permutation (distinct blocks), as a block allocator hands out, when it fits.
            let mut t: Vec<u32> =
                (0..(seqs * bps).max(num_blocks) as u32).map(|b| b % num_blocks as u32).collect();
            for i in (1..t.len()).rev() {
                t.swap(i, rng.random_range(0..=i));
            }
            t
        };
        let mapping: Vec<i64> = (0..tokens)
            .map(|t| match rng.random_range(0..10) {
                0 => -1,
                1..=3 => rng.random_range(-1..n as i64),
                _ => ((t * 7 + rng.random_range(0..3)) % n) as i64,
            })
            .collect();
        let walk = walk(&batch, tokens);
        for slots in
            [Slots::Mapping(&mapping), Slots::BlockTable { block_table: &table, blocks_per_seq: bps }]
        {
            if matches!(slots, Slots::BlockTable { .. }) && walk.iter().any(|w| w.2 >= cap) {
                continue; // BlockTableTooShort, tested elsewhere
            }
            let slot_of = |&(t, seq, pos): &(usize, usize, u32)| -> Option<i64> {
                match slots {
                    Slots::Mapping(m) => Some(m[t]).filter(|&s| s >= 0),
                    Slots::BlockTable { .. } => {
                        let p = pos as usize;
                        Some((table[seq * bps + p / bs] as usize * bs + p % bs) as i64)
                    }
                    Slots::Positions => unreachable!(),
                }
            };
            let mut seen = std::collections::HashSet::new();
            let want = walk
                .iter()
                .find_map(|w| {
                    let s = slot_of(w)?;
                    (!seen.insert(s)).then_some(RopeError::DuplicateSlot {
                        operand: Operand::KOut,
                        token: w.0,
                        slot: s as usize,
                    })
                })
                .map_or(Ok(()), Err);
            let mut qkv = vec![0.5f32; tokens * 3 * 64];
            let mut cache = vec![0.0f32; n * 64];
            let got = rope.apply_layer(
                Qkv::new(&mut qkv, tokens, [q, k, HeadSet::default()]),
                Dest::<f32>::Skip,
                Dest::Cache { data: &mut cache, layout, slots },
                Dest::<f32>::Skip,
                &LayerApply::batch(batch),
            );
            assert_eq!(got, want, "case {case}: {batch:?} {slots:?} block_size {bs}");
        }
    }
}

/// More written tokens than the stack scratch of a build without `alloc` holds (64): the
/// sorted check (with `alloc`) and the quadratic fallback (without) find the same first
/// duplicate.
#[test]
fn duplicate_slots_past_the_stack_scratch() {
    let rope = Rope::new(RopeConfig::new(64, 10_000.0)).unwrap();
    let [q, k, _] = HeadSet::qkv_rows(1, 1, 64);
    let tokens = if cfg!(miri) { 70 } else { 300 };
    let layout = CacheLayout::contiguous(2 * tokens, 1, 64);
    let mut mapping: Vec<i64> = (0..tokens as i64).rev().map(|t| 2 * t).collect();
    for dup in [None, Some((tokens - 5, 7))] {
        if let Some((t, from)) = dup {
            mapping[t] = mapping[from];
        }
        let mut qkv = vec![0.5f32; tokens * 3 * 64];
        let mut cache = vec![0.0f32; 2 * tokens * 64];
        let got = rope.apply_layer(
            Qkv::new(&mut qkv, tokens, [q, k, HeadSet::default()]),
            Dest::<f32>::Skip,
            Dest::Cache { data: &mut cache, layout, slots: Slots::Mapping(&mapping) },
            Dest::<f32>::Skip,
            &LayerApply::default(),
        );
        let want = dup.map_or(Ok(()), |(t, from)| {
            Err(RopeError::DuplicateSlot { operand: Operand::KOut, token: t, slot: mapping[from] as usize })
        });
        assert_eq!(got, want);
    }
}
