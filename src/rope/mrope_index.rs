//! The three MRoPE position streams of a text + image/video sequence.

use crate::error::RopeError;

/// Token type of [`MRopeIndex::token_types`]: a text token.
pub const TOKEN_TEXT: u8 = 0;
/// Token type of [`MRopeIndex::token_types`]: an image token (after the spatial merge).
pub const TOKEN_IMAGE: u8 = 1;
/// Token type of [`MRopeIndex::token_types`]: a video token (after the spatial merge).
pub const TOKEN_VIDEO: u8 = 2;

/// Builds the `(t, h, w)` position streams of one sequence, as Qwen's `get_rope_index`
/// (transformers `Qwen2VLModel.get_rope_index`, `Qwen2_5_VLModel.get_rope_index`,
/// `Qwen3VLModel.get_rope_index`):
///
/// - a text token takes `t = h = w = next`, then `next += 1`;
/// - a vision block of grid `[T, H, W]` patches is `T * (H / m) * (W / m)` consecutive tokens
///   of its type (`m = spatial_merge_size`), in the order (frame, row, column); with
///   `base = next`, the token of frame `f`, row `r`, column `c` gets
///   `h = base + r`, `w = base + c`, and `t = base + f` for images and for videos without
///   [`second_per_grid_ts`](Self::second_per_grid_ts) (Qwen2-VL), or, for video `v` with them
///   (Qwen2.5-VL), `t = base + trunc((f32(f) * s) * tokens_per_second)` with
///   `s = second_per_grid_ts[v]`, both products rounded to `f32` in that order and the
///   truncation toward zero of `.long()`: the arithmetic of transformers 5.x
///   `Qwen2_5_VLModel.get_rope_index` (`expanded_range * second_per_grid_t *
///   tokens_per_second`, an int64 `arange` times an `f32` tensor element, then a Python
///   scalar; transformers 4.49-4.5x cast `second_per_grid_t` to int64 first, which truncates
///   `2 / fps` and is not followed here). The products are not reassociated:
///   `f = 41, s = 2 / 10.25, tokens_per_second = 2` gives 15, not the real-number 16;
///   then `next = (largest position of the block) + 1`.
///
/// Blocks take the grids of their type in order; each block must be preceded by a token of
/// another type or another block (adjacent blocks of one type are split by the grids). For
/// Qwen3-VL, pass each video frame as its own video grid `[1, H, W]` (its
/// `get_rope_index` splits videos into frames, with timestamp text between them).
#[derive(Clone, Copy, Debug, Default)]
pub struct MRopeIndex<'a> {
    /// One entry per token: [`TOKEN_TEXT`], [`TOKEN_IMAGE`] or [`TOKEN_VIDEO`].
    pub token_types: &'a [u8],
    /// `[T, H, W]` of each image, in patches (before the merge).
    pub image_grid_thw: &'a [[u32; 3]],
    /// `[T, H, W]` of each video, in patches (before the merge).
    pub video_grid_thw: &'a [[u32; 3]],
    /// Per video, the seconds per temporal grid step (`temporal_patch_size / fps`: HF
    /// `second_per_grid_ts`), or empty: t advances 1 per grid step (Qwen2-VL).
    pub second_per_grid_ts: &'a [f32],
    /// The t positions per second of video (Qwen2.5-VL `vision_config.tokens_per_second`,
    /// 2 in the published configs); used only with `second_per_grid_ts`, and then must be
    /// finite and > 0 (the `Default` 0 is refused, so that it is never taken silently).
    pub tokens_per_second: f32,
    /// Patches merged per token along each of h and w (2 for Qwen2-VL and later).
    pub spatial_merge_size: u32,
    /// The position of the first token (0 for a new sequence).
    pub start: u32,
}

impl MRopeIndex<'_> {
    /// Writes the streams of every token to `t`, `h`, `w` (each `token_types.len()` long)
    /// and returns the next position: the largest one written plus 1 (`start` for an empty
    /// sequence). Decode steps after the prompt continue at that position with text tokens
    /// (`t = h = w`).
    ///
    /// # Errors
    /// Nothing is written when any is returned:
    /// [`RopeError::PositionCountMismatch`] if an output is not `token_types.len()` long;
    /// [`RopeError::InvalidPositionLayout`] for an unknown token type, a block without a
    /// grid or shorter than its grid, a grid left unused, a `spatial_merge_size` of 0 or not
    /// dividing a grid's `H` and `W`, an empty grid, `second_per_grid_ts` whose length is not
    /// the number of videos or holding a value that is negative or not finite, a
    /// `tokens_per_second` that is not finite and > 0 while `second_per_grid_ts` is given;
    /// [`RopeError::PositionOverflow`] if a position or the next one exceeds `u32::MAX`
    /// (also when a t offset `(f * s) * tokens_per_second` does, or overflows `f32`).
    pub fn fill(&self, t: &mut [u32], h: &mut [u32], w: &mut [u32]) -> Result<u32, RopeError> {
        let n = self.token_types.len();
        for len in [t.len(), h.len(), w.len()] {
            if len != n {
                return Err(RopeError::PositionCountMismatch { tokens: n, positions: len });
            }
        }
        // Validate everything first, then write.
        self.walk(&mut |_, _| {})?;
        self.walk(&mut |i, p: [u32; 3]| {
            t[i] = p[0];
            h[i] = p[1];
            w[i] = p[2];
        })
    }

    /// The streams as three vectors, and the next position.
    ///
    /// # Errors
    /// Those of [`MRopeIndex::fill`] but the count mismatch.
    #[cfg(feature = "alloc")]
    pub fn to_vecs(&self) -> Result<([alloc::vec::Vec<u32>; 3], u32), RopeError> {
        let n = self.token_types.len();
        let mut v = [alloc::vec![0u32; n], alloc::vec![0u32; n], alloc::vec![0u32; n]];
        let [a, b, c] = &mut v;
        let next = self.fill(a, b, c)?;
        Ok((v, next))
    }

    /// Visits every token with its positions; returns the next position.
    fn walk(&self, emit: &mut dyn FnMut(usize, [u32; 3])) -> Result<u32, RopeError> {
        let layout = |reason| RopeError::InvalidPositionLayout { reason };
        let steps = self.second_per_grid_ts;
        if !steps.is_empty() && steps.len() != self.video_grid_thw.len() {
            return Err(layout("second_per_grid_ts must be empty or have one entry per video"));
        }
        if steps.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return Err(layout("second_per_grid_ts values must be finite and >= 0"));
        }
        let tps = self.tokens_per_second;
        let tps_ok = tps.is_finite() && tps > 0.0;
        if !steps.is_empty() && !tps_ok {
            return Err(layout("tokens_per_second must be finite and > 0 with second_per_grid_ts"));
        }
        let fits = |p: u64| u32::try_from(p).map_err(|_| RopeError::PositionOverflow);
        let types = self.token_types;
        let (mut next, mut i) = (u64::from(self.start), 0usize);
        let (mut image, mut video) = (0usize, 0usize);
        while i < types.len() {
            let ty = types[i];
            let (grid, seconds) = match ty {
                TOKEN_TEXT => {
                    let p = fits(next)?;
                    emit(i, [p; 3]);
                    next += 1;
                    i += 1;
                    continue;
                }
                TOKEN_IMAGE => {
                    let g = self
                        .image_grid_thw
                        .get(image)
                        .ok_or(layout("more image blocks than image_grid_thw"))?;
                    image += 1;
                    (*g, None)
                }
                TOKEN_VIDEO => {
                    let g = self
                        .video_grid_thw
                        .get(video)
                        .ok_or(layout("more video blocks than video_grid_thw"))?;
                    let seconds = steps.get(video).copied();
                    video += 1;
                    (*g, seconds)
                }
                _ => return Err(layout("token_types entries must be 0 (text), 1 (image) or 2 (video)")),
            };
            let m = self.spatial_merge_size;
            let [gt, gh, gw] = grid;
            if m == 0 || gh % m != 0 || gw % m != 0 {
                return Err(layout("spatial_merge_size must be > 0 and divide every grid's h and w"));
            }
            let (lt, lh, lw) = (gt as usize, (gh / m) as usize, (gw / m) as usize);
            let count =
                lt.checked_mul(lh).and_then(|x| x.checked_mul(lw)).ok_or(RopeError::PositionOverflow)?;
            if count == 0 {
                return Err(layout("a grid has no tokens"));
            }
            let end = i.checked_add(count).filter(|&e| e <= types.len());
            let end = end.ok_or(layout("a vision block is shorter than its grid"))?;
            if types[i..end].iter().any(|&x| x != ty) {
                return Err(layout("a vision block is shorter than its grid"));
            }
            let base = next;
            let mut max = base;
            let mut k = i;
            for f in 0..lt {
                let tp = base.checked_add(t_offset(f, seconds, tps)?);
                let tp = tp.ok_or(RopeError::PositionOverflow)?;
                for r in 0..lh {
                    for c in 0..lw {
                        // `base` <= u32::MAX + 1 and `r`, `c` < 2^32: no u64 overflow.
                        let p = [tp, base + r as u64, base + c as u64];
                        let top = p[0].max(p[1]).max(p[2]);
                        max = max.max(top);
                        emit(k, [fits(p[0])?, fits(p[1])?, fits(p[2])?]);
                        k += 1;
                    }
                }
            }
            next = max + 1;
            i = end;
        }
        if image != self.image_grid_thw.len() || video != self.video_grid_thw.len() {
            return Err(layout("a grid has no block of tokens in token_types"));
        }
        fits(next)
    }
}

/// The t offset of grid step `f` of a block: `f` (images, Qwen2-VL videos) or
/// `trunc((f32(f) * s) * tokens_per_second)` (Qwen2.5-VL), checked: a product that is not
/// finite or a truncation above `u32::MAX` is [`RopeError::PositionOverflow`].
fn t_offset(f: usize, seconds: Option<f32>, tokens_per_second: f32) -> Result<u64, RopeError> {
    let Some(s) = seconds else { return Ok(f as u64) };
    // Rounded as torch: int64 -> f32 (nearest), `* s` in f32, `* tokens_per_second` in f32.
    let x = (f as f32 * s) * tokens_per_second;
    // `x` is >= 0 or +inf (both factors finite, `tokens_per_second` > 0); `.long()` truncates.
    if x.is_nan() || x >= 4_294_967_296.0 {
        return Err(RopeError::PositionOverflow);
    }
    Ok(x as u64)
}
