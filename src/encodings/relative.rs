//! Relative position indices: DeBERTa clipped distances, DeBERTa-v2 log buckets and T5
//! buckets, filled into a `[query_len][key_len]` `i32` matrix that a runtime uses to
//! gather relative embeddings or per-head biases.
//!
//! The bucket functions reproduce the float arithmetic of the PyTorch reference
//! implementations as torch runs them on the CPU: every intermediate is an f32, rounded
//! after each operation, in the reference's order. `log` is the correctly rounded f32
//! logarithm (the f64 logarithm rounded to f32); torch's vectorized `logf` (SLEEF, ≤ 1 ulp)
//! can differ from it by an ulp, which matters only where a bucket edge falls within an ulp
//! of the f32 value — the tests pin such a case that holds either way. On CUDA torch
//! replaces a division by a scalar with a multiplication by its f32 reciprocal, which can
//! move an edge in the same way.

use crate::encodings::{check_rows, RelativeGrid};
use crate::error::RopeError;

/// How a (query position, key position) pair becomes an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelativePositions {
    /// `clip(q - k, -max_distance, max_distance)`: the clipped relative distance
    /// (query minus key, the sign of HF `build_relative_position` in
    /// `transformers/models/deberta/modeling_deberta.py`, which returns `q_ids - k_ids`).
    /// Range `[-max_distance, max_distance]`.
    Clipped {
        /// `k`, at least 1 and at most `i32::MAX`.
        max_distance: u32,
    },
    /// `clip(q - k, -max_distance, max_distance) + max_distance`: the clipped distance as
    /// a row index into a table of `2 * max_distance + 1` relative embeddings (Shaw et al.
    /// 2018 with DeBERTa's sign). Range `[0, 2 * max_distance]`.
    ClippedIndex {
        /// `k`, at least 1 and at most `(i32::MAX - 1) / 2`.
        max_distance: u32,
    },
    /// DeBERTa's `δ(q, k)` (He et al. 2020, eq. 2): `clamp(q - k + att_span, 0,
    /// 2 * att_span - 1)`, the row of the `2 * att_span` relative embeddings that HF
    /// `DisentangledSelfAttention.disentangled_att_bias` gathers (`c2p_pos`; `p2c_pos` is
    /// the same with query and key swapped). DeBERTa v1 uses
    /// `att_span = min(max(query_len, key_len), max_relative_positions)`; v2 uses
    /// `position_buckets` (when > 0, applied to the log buckets) or
    /// `max_relative_positions`. Note the top is `2 * att_span - 1`, not
    /// `ClippedIndex`'s `2 * max_distance`.
    DebertaIndex {
        /// At least 1 and at most `2^30`.
        att_span: u32,
    },
    /// DeBERTa-v2 log buckets: `make_log_bucket_position(q - k, bucket_size,
    /// max_position)` of HF `transformers/models/deberta_v2/modeling_deberta_v2.py` (see
    /// [`deberta_log_bucket_position`]). Distances with `|q - k| <= bucket_size / 2` are
    /// kept; larger ones are mapped logarithmically, unclamped (DeBERTa-v2 clamps the
    /// gathered index afterwards, as in `DebertaIndex`).
    DebertaV2LogBucket {
        /// HF `position_buckets`; at least 2.
        bucket_size: u32,
        /// HF `max_relative_positions`; greater than `bucket_size / 2 + 1`.
        max_position: u32,
    },
    /// T5 buckets: `_relative_position_bucket(k - q, bidirectional, num_buckets,
    /// max_distance)` of HF `transformers/models/t5/modeling_t5.py` (see
    /// [`t5_relative_position_bucket`]; note the key-minus-query sign of T5's
    /// `memory_position - context_position`). Range `[0, num_buckets)`.
    T5Bucket {
        /// `True` for encoders (both directions), `false` for causal decoders.
        bidirectional: bool,
        /// HF `relative_attention_num_buckets` (32 in T5).
        num_buckets: u32,
        /// HF `relative_attention_max_distance` (128 in T5).
        max_distance: u32,
    },
}

/// The correctly rounded f32 natural logarithm.
#[inline(always)]
fn logf(x: f32) -> f32 {
    libm::log(f64::from(x)) as f32
}

/// Validated T5 bucket parameters.
#[derive(Clone, Copy, Debug)]
struct T5 {
    bidirectional: bool,
    /// Buckets per direction (`num_buckets / 2` when bidirectional).
    buckets: u32,
    max_exact: u32,
    /// `f32(ln(max_distance / max_exact))`, formed in f64 as Python does.
    log_ratio: f32,
}

impl T5 {
    fn new(bidirectional: bool, num_buckets: u32, max_distance: u32) -> Result<Self, RopeError> {
        if num_buckets > i32::MAX as u32 {
            return Err(RopeError::InvalidEncodingParameter {
                name: "num_buckets",
                requirement: "must be at most i32::MAX",
            });
        }
        let buckets = if bidirectional { num_buckets / 2 } else { num_buckets };
        let max_exact = buckets / 2;
        if max_exact == 0 {
            return Err(RopeError::InvalidEncodingParameter {
                name: "num_buckets",
                requirement: "must be >= 4 (bidirectional) or >= 2 (causal)",
            });
        }
        if max_distance <= max_exact {
            return Err(RopeError::InvalidEncodingParameter {
                name: "max_distance",
                requirement: "must exceed max_exact (num_buckets / 4 bidirectional, num_buckets / 2 causal)",
            });
        }
        let log_ratio = libm::log(f64::from(max_distance) / f64::from(max_exact)) as f32;
        Ok(T5 { bidirectional, buckets, max_exact, log_ratio })
    }

    /// The bucket of `relative_position = key - query`.
    fn bucket(&self, relative_position: i64) -> i32 {
        let mut bucket = 0i64;
        let n: u64 = if self.bidirectional {
            if relative_position > 0 {
                bucket += i64::from(self.buckets);
            }
            relative_position.unsigned_abs()
        } else {
            // -min(relative_position, 0)
            if relative_position < 0 {
                relative_position.unsigned_abs()
            } else {
                0
            }
        };
        let max_exact = u64::from(self.max_exact);
        let within = if n < max_exact {
            n as i64
        } else {
            // max_exact + (log(n.float() / max_exact) / log(max_distance / max_exact)
            //              * (num_buckets - max_exact)).to(long), each op in f32.
            let x = n as f32 / self.max_exact as f32;
            let scaled = (logf(x) / self.log_ratio) * (self.buckets - self.max_exact) as f32;
            // `as i64` saturates; the sum too (a distance far past `max_distance` with a
            // base barely above 1 would overflow): such distances share the last bucket.
            let large = (max_exact as i64).saturating_add(scaled as i64);
            large.min(i64::from(self.buckets) - 1)
        };
        // < num_buckets <= i32::MAX.
        (bucket + within) as i32
    }
}

/// Validated DeBERTa-v2 log bucket parameters.
#[derive(Clone, Copy, Debug)]
struct LogBuckets {
    mid: i64,
    /// `f32(ln(f32((max_position - 1) / mid)))`.
    log_denominator: f32,
}

impl LogBuckets {
    fn new(bucket_size: u32, max_position: u32) -> Result<Self, RopeError> {
        let mid = bucket_size / 2;
        if mid == 0 {
            return Err(RopeError::InvalidEncodingParameter {
                name: "bucket_size",
                requirement: "must be >= 2",
            });
        }
        if max_position <= mid + 1 {
            return Err(RopeError::InvalidEncodingParameter {
                name: "max_position",
                requirement: "must exceed bucket_size / 2 + 1",
            });
        }
        // torch.log(torch.tensor((max_position - 1) / mid)): a Python float, stored as an
        // f32 tensor, logarithm in f32.
        let ratio = (f64::from(max_position - 1) / f64::from(mid)) as f32;
        let log_denominator = logf(ratio);
        if log_denominator <= 0.0 {
            // (max_position - 1) / mid rounds to 1 in f32: the reference divides by 0.
            return Err(RopeError::InvalidEncodingParameter {
                name: "max_position",
                requirement: "must make (max_position - 1) / (bucket_size / 2) > 1 in f32",
            });
        }
        Ok(LogBuckets { mid: i64::from(mid), log_denominator })
    }

    /// `make_log_bucket_position(relative_pos, ...)` of one value.
    fn bucket(&self, relative_pos: i64) -> i64 {
        let mid = self.mid;
        // abs_pos = mid - 1 inside (-mid, mid), |rel| outside; positions with
        // abs_pos <= mid keep their value.
        if relative_pos.unsigned_abs() <= mid as u64 {
            return relative_pos;
        }
        // ceil(log(abs_pos / mid) / log(...) * (mid - 1)) + mid, each op in f32
        // (abs_pos and mid are promoted to f32 by the true division).
        let x = relative_pos.unsigned_abs() as f32 / mid as f32;
        let log_pos = libm::ceilf((logf(x) / self.log_denominator) * (mid - 1) as f32) + mid as f32;
        // log_pos * sign, then .to(torch.long) (truncation; the value is integral).
        let signed = if relative_pos < 0 { -log_pos } else { log_pos };
        signed as i64
    }
}

/// T5's `_relative_position_bucket` (HF `transformers/models/t5/modeling_t5.py`;
/// Raffel et al. 2020) of one `relative_position = key_position - query_position`.
///
/// Bidirectional: half of the buckets for keys after the query (offset `num_buckets / 2`),
/// half for the rest. Causal: keys after the query all go to bucket 0. Within a half of
/// `n` buckets, distances below `max_exact = n / 2` are their own bucket; larger ones get
/// `max_exact + trunc(ln(d / max_exact) / ln(max_distance / max_exact) * (n - max_exact))`
/// in f32 arithmetic, clamped to `n - 1` (so every distance `>= max_distance` shares the
/// last bucket).
///
/// # Errors
/// [`RopeError::InvalidEncodingParameter`]: `"num_buckets"` if `max_exact` would be 0
/// (fewer than 4 buckets bidirectional, 2 causal) or above `i32::MAX`; `"max_distance"` if
/// not greater than `max_exact`.
pub fn t5_relative_position_bucket(
    relative_position: i64,
    bidirectional: bool,
    num_buckets: u32,
    max_distance: u32,
) -> Result<i32, RopeError> {
    Ok(T5::new(bidirectional, num_buckets, max_distance)?.bucket(relative_position))
}

/// DeBERTa-v2's `make_log_bucket_position(relative_pos, bucket_size, max_position)` (HF
/// `transformers/models/deberta_v2/modeling_deberta_v2.py`) of one
/// `relative_pos = query_position - key_position`.
///
/// With `mid = bucket_size / 2`: `|relative_pos| <= mid` is returned unchanged; otherwise
/// `sign(relative_pos) * (ceil(ln(|relative_pos| / mid) / ln((max_position - 1) / mid) *
/// (mid - 1)) + mid)` in f32 arithmetic (the result exceeds `bucket_size - 1` for
/// distances past `max_position - 1`; the reference does not clamp here).
///
/// # Errors
/// [`RopeError::InvalidEncodingParameter`]: `"bucket_size"` if below 2;
/// `"max_position"` if not greater than `bucket_size / 2 + 1` (the logarithm's base must
/// exceed 1).
pub fn deberta_log_bucket_position(
    relative_pos: i64,
    bucket_size: u32,
    max_position: u32,
) -> Result<i64, RopeError> {
    Ok(LogBuckets::new(bucket_size, max_position)?.bucket(relative_pos))
}

/// A validated [`RelativePositions`].
#[derive(Clone, Copy, Debug)]
enum Mapper {
    Clip { k: i64, shift: i64 },
    Deberta { span: i64 },
    Log(LogBuckets),
    T5(T5),
}

impl Mapper {
    /// The index of `q - k` (i64; checked against i32 by the caller where it can overflow).
    #[inline(always)]
    fn map(&self, q_minus_k: i64) -> i64 {
        match *self {
            Mapper::Clip { k, shift } => q_minus_k.clamp(-k, k) + shift,
            Mapper::Deberta { span } => (q_minus_k + span).clamp(0, 2 * span - 1),
            Mapper::Log(l) => l.bucket(q_minus_k),
            Mapper::T5(t) => i64::from(t.bucket(-q_minus_k)),
        }
    }
}

fn to_i32(value: i64, relative_position: i64) -> Result<i32, RopeError> {
    i32::try_from(value).map_err(|_| RopeError::RelativeIndexOverflow { relative_position })
}

impl RelativePositions {
    fn mapper(&self) -> Result<Mapper, RopeError> {
        let too_large =
            |name| RopeError::InvalidEncodingParameter { name, requirement: "is too large for i32 indices" };
        let zero = |name| RopeError::InvalidEncodingParameter { name, requirement: "must be >= 1" };
        match *self {
            RelativePositions::Clipped { max_distance }
            | RelativePositions::ClippedIndex { max_distance } => {
                let index = matches!(self, RelativePositions::ClippedIndex { .. });
                let limit = if index { (i32::MAX as u32 - 1) / 2 } else { i32::MAX as u32 };
                if max_distance == 0 {
                    return Err(zero("max_distance"));
                }
                if max_distance > limit {
                    return Err(too_large("max_distance"));
                }
                let k = i64::from(max_distance);
                Ok(Mapper::Clip { k, shift: if index { k } else { 0 } })
            }
            RelativePositions::DebertaIndex { att_span } => {
                if att_span == 0 {
                    return Err(zero("att_span"));
                }
                if att_span > 1 << 30 {
                    return Err(too_large("att_span"));
                }
                Ok(Mapper::Deberta { span: i64::from(att_span) })
            }
            RelativePositions::DebertaV2LogBucket { bucket_size, max_position } => {
                Ok(Mapper::Log(LogBuckets::new(bucket_size, max_position)?))
            }
            RelativePositions::T5Bucket { bidirectional, num_buckets, max_distance } => {
                Ok(Mapper::T5(T5::new(bidirectional, num_buckets, max_distance)?))
            }
        }
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`RopeError::InvalidEncodingParameter`] naming the first bad parameter (see each
    /// variant for its domain).
    pub fn validate(&self) -> Result<(), RopeError> {
        self.mapper().map(|_| ())
    }

    /// The index of the pair (query at `query_position`, key at `key_position`), with
    /// each variant's own sign convention applied.
    ///
    /// # Errors
    /// Those of [`RelativePositions::validate`]; [`RopeError::RelativeIndexOverflow`] if
    /// the index does not fit in `i32` (possible only for `DebertaV2LogBucket`).
    pub fn index(&self, query_position: u32, key_position: u32) -> Result<i32, RopeError> {
        let d = i64::from(query_position) - i64::from(key_position);
        to_i32(self.mapper()?.map(d), d)
    }

    /// Fills `out`, shaped `[grid.query_len][grid.key_len]` (contiguous rows), with the
    /// index of every (query, key) pair of the grid: `out[i * key_len + j]` is the index of
    /// query position `q_offset + i` and key position `k_offset + j`. Elements past
    /// `query_len * key_len` are left alone.
    ///
    /// # Errors
    /// Nothing is written when any of these is returned:
    /// - [`RopeError::InvalidEncodingParameter`] for bad parameters;
    /// - [`RopeError::PositionOverflow`] if the last query or key position exceeds
    ///   `u32::MAX`;
    /// - [`RopeError::EncodingSizeOverflow`], [`RopeError::EncodingBufferTooShort`]
    ///   (`"out"`) if `out` is shorter than `query_len * key_len`;
    /// - [`RopeError::RelativeIndexOverflow`] if an index of the grid does not fit in `i32`.
    pub fn fill(&self, out: &mut [i32], grid: RelativeGrid) -> Result<(), RopeError> {
        let m = self.mapper()?;
        grid.validate()?;
        check_rows("out", grid.query_len, grid.key_len, grid.key_len, out.len())?;
        if grid.is_empty() {
            return Ok(());
        }
        // Every mapping is monotone in q - k within a sign (T5 is bounded by num_buckets),
        // so the extreme distances of the grid bound every index.
        let lo = grid.q_minus_k(0, grid.key_len - 1);
        let hi = grid.q_minus_k(grid.query_len - 1, 0);
        to_i32(m.map(lo), lo)?;
        to_i32(m.map(hi), hi)?;
        for (i, row) in out.chunks_exact_mut(grid.key_len).take(grid.query_len).enumerate() {
            let d0 = grid.q_minus_k(i, 0);
            for (j, v) in row.iter_mut().enumerate() {
                // Checked above: within [map(lo), map(hi)] or [0, num_buckets).
                *v = m.map(d0 - j as i64) as i32;
            }
        }
        Ok(())
    }

    /// The index matrix of `grid` as a vector of `query_len * key_len` values (needs
    /// `alloc`).
    ///
    /// # Errors
    /// Those of [`RelativePositions::fill`].
    #[cfg(feature = "alloc")]
    pub fn matrix(&self, grid: RelativeGrid) -> Result<alloc::vec::Vec<i32>, RopeError> {
        let n = grid
            .query_len
            .checked_mul(grid.key_len)
            .ok_or(RopeError::EncodingSizeOverflow { buffer: "out" })?;
        self.validate()?;
        grid.validate()?;
        let mut out = alloc::vec![0i32; n];
        self.fill(&mut out, grid)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t5_far_distances_with_a_base_near_one_stay_in_the_last_bucket() {
        // max_distance = max_exact + 1 with 2^30 - 1 buckets per direction: the scaled
        // logarithm of an i64 distance saturates `as i64`; the sum must not overflow.
        let (num_buckets, max_exact) = (i32::MAX as u32, (1u32 << 30) - 1);
        for rel in [i64::MIN, i64::MIN + 1, -(1 << 62), i64::from(i32::MIN) * 4] {
            let b = t5_relative_position_bucket(rel, false, num_buckets, max_exact + 1);
            assert_eq!(b, Ok(i32::MAX - 1), "{rel}");
            // Bidirectional: 2^30 - 1 buckets per direction, max_exact 2^29 - 1.
            let b = t5_relative_position_bucket(rel.saturating_neg(), true, num_buckets, max_exact / 2 + 1);
            assert_eq!(b, Ok(i32::MAX - 2), "{rel}");
            let b = t5_relative_position_bucket(rel, true, num_buckets, max_exact / 2 + 1);
            assert_eq!(b, Ok((1 << 30) - 2), "{rel}");
        }
    }
}
