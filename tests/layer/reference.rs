//! Random calls of every (input, output) type pair and destination form against the
//! reference (each token's rows rotated with `apply_into` in f32, then rounded once).

use super::*;

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
    let view = View::token_major(1, set.heads, hd);
    let ids = [pos];
    let mut opts = ApplyOptions { positions: Positions::Ids(&ids), cos_sin, ..ApplyOptions::default() };
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
            view: View::token_major(tokens, heads, hl),
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
        .with_layout(if rng.random_bool(0.5) { PairLayout::HalfSplit } else { PairLayout::Interleaved });
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
    let mut opts = LayerOptions { batch, cos_sin, ..LayerOptions::default() };
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
                let o = ApplyOptions { positions: p, cos_sin, direction: opts.direction };
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

/// The seed of every pair suite: the line of the `pairs!` call when this suite was one file
/// (what `line!()` gave inside the macro), so that the cases stay the same.
const PAIRS_SEED: u64 = 473;

macro_rules! pairs {
    ($($name:ident: $i:ty => $o:ty;)+) => {$(
        #[test]
        fn $name() {
            pair_suite::<$i, $o>(PAIRS_SEED);
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
