//! Strided views of `[tokens][heads][head_dim]` tensors.

use crate::error::{Operand, RopeError};

/// The shape and strides of one q or k tensor: `tokens × heads` rows of `head_dim`
/// contiguous elements. Element `(t, h, d)` is at `t * token_stride + h * head_stride + d`.
///
/// Strides are in elements, not bytes. Common cases:
/// - BSHD (`[tokens][heads][head_dim]`, HF after `view`): [`View::token_major`];
/// - BHSD (`[heads][tokens][head_dim]`, HF after `transpose(1, 2)`): [`View::head_major`];
/// - a fused QKV projection output: `token_stride = (q_heads + 2 * kv_heads) * head_dim`.
///
/// Rows must not share elements; the check is that the strides nest: sorting the two
/// dimensions with more than one entry by stride, the inner stride is ≥ `head_dim` and the
/// outer stride is ≥ the inner dimension's whole extent. Views that interleave rows in
/// other ways are rejected with [`RopeError::OverlappingStrides`].
///
/// ```
/// use rope_kernels::View;
///
/// // 3 tokens, 2 heads, head_dim 4, as HF lays out q before and after `transpose(1, 2)`.
/// let bshd = View::token_major(3, 2, 4);
/// assert_eq!((bshd.token_stride, bshd.head_stride), (8, 4));
/// let bhsd = View::head_major(3, 2, 4);
/// assert_eq!((bhsd.token_stride, bhsd.head_stride), (4, 12));
/// // Element (t, h, d) = (2, 1, 3):
/// assert_eq!(2 * bhsd.token_stride + bhsd.head_stride + 3, 23);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct View {
    /// Number of tokens (sequence positions).
    pub tokens: usize,
    /// Number of heads.
    pub heads: usize,
    /// Elements between token `t` and token `t + 1` of the same head.
    pub token_stride: usize,
    /// Elements between head `h` and head `h + 1` of the same token.
    pub head_stride: usize,
}

impl View {
    /// A contiguous token-major tensor, `[tokens][heads][head_dim]` (BSHD for one
    /// sequence; Hugging Face's layout after `view`).
    pub const fn token_major(tokens: usize, heads: usize, head_dim: usize) -> Self {
        View { tokens, heads, token_stride: heads.saturating_mul(head_dim), head_stride: head_dim }
    }

    /// A contiguous head-major tensor, `[heads][tokens][head_dim]` (BHSD for one sequence;
    /// Hugging Face's layout after `transpose(1, 2)`).
    pub const fn head_major(tokens: usize, heads: usize, head_dim: usize) -> Self {
        View { tokens, heads, token_stride: head_dim, head_stride: tokens.saturating_mul(head_dim) }
    }

    /// The old name of [`View::token_major`] (it has no batch dimension).
    #[deprecated(since = "0.2.0", note = "renamed to `View::token_major`")]
    pub const fn bshd(tokens: usize, heads: usize, head_dim: usize) -> Self {
        View { tokens, heads, token_stride: heads.saturating_mul(head_dim), head_stride: head_dim }
    }

    /// The old name of [`View::head_major`] (it has no batch dimension).
    #[deprecated(since = "0.2.0", note = "renamed to `View::head_major`")]
    pub const fn bhsd(tokens: usize, heads: usize, head_dim: usize) -> Self {
        View { tokens, heads, token_stride: head_dim, head_stride: tokens.saturating_mul(head_dim) }
    }

    /// True when the view holds no element (zero tokens or zero heads).
    pub const fn is_empty(&self) -> bool {
        self.tokens == 0 || self.heads == 0
    }

    /// Checks the view against `head_dim` and a buffer of `len` elements; returns the
    /// number of elements the view spans (0 for an empty view).
    ///
    /// ```
    /// use rope_kernels::{Operand, RopeError, View};
    ///
    /// let hd = 64;
    /// assert_eq!(View::token_major(3, 2, hd).validate(hd, 3 * 2 * hd, Operand::Q), Ok(384));
    /// // A head stride below head_dim makes heads share elements.
    /// let overlapping = View { tokens: 3, heads: 2, token_stride: 128, head_stride: 32 };
    /// assert_eq!(
    ///     overlapping.validate(hd, 1024, Operand::K),
    ///     Err(RopeError::OverlappingStrides { operand: Operand::K })
    /// );
    /// ```
    ///
    /// # Errors
    /// [`RopeError::OverlappingStrides`], [`RopeError::StrideOverflow`],
    /// [`RopeError::BufferTooShort`], each naming `operand`.
    pub fn validate(&self, head_dim: usize, len: usize, operand: Operand) -> Result<usize, RopeError> {
        let dims = [(self.tokens, self.token_stride), (self.heads, self.head_stride)];
        validate_lattice(dims, head_dim, len, operand)
    }
}

/// Checks a lattice of rows: row `(i_0, .., i_n)` (`i_k < dims[k].0`) starts at `sum i_k *
/// dims[k].1` and holds `row` elements, in a buffer of `len` elements. Returns the elements
/// it spans (0 when a count is 0).
///
/// Rows must not share elements; the check is that the strides nest: sorting the dimensions
/// with more than one entry by stride, each stride is at least the whole extent of the
/// dimensions inside it (the first: `row`).
///
/// # Errors
/// [`RopeError::StrideOverflow`], [`RopeError::OverlappingStrides`],
/// [`RopeError::BufferTooShort`] (in that order), each naming `operand`.
pub(crate) fn validate_lattice<const N: usize>(
    mut dims: [(usize, usize); N],
    row: usize,
    len: usize,
    operand: Operand,
) -> Result<usize, RopeError> {
    if dims.iter().any(|d| d.0 == 0) {
        return Ok(0);
    }
    let overflow = RopeError::StrideOverflow { operand };
    let mut needed = row;
    for (count, stride) in dims {
        needed = (count - 1).checked_mul(stride).and_then(|s| needed.checked_add(s)).ok_or(overflow)?;
    }
    // Dimensions with a single entry impose nothing; order the others by stride.
    dims.sort_unstable_by_key(|d| d.1);
    let mut inner_extent = row;
    for (count, stride) in dims {
        if count > 1 {
            if stride < inner_extent {
                return Err(RopeError::OverlappingStrides { operand });
            }
            // Cannot overflow: bounded by `needed`.
            inner_extent += (count - 1) * stride;
        }
    }
    if len < needed {
        return Err(RopeError::BufferTooShort { operand, needed, len });
    }
    Ok(needed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_rules() {
        let hd = 4;
        assert_eq!(View::token_major(3, 2, hd).validate(hd, 24, Operand::Q), Ok(24));
        assert_eq!(View::head_major(3, 2, hd).validate(hd, 24, Operand::Q), Ok(24));
        let overlap = View { tokens: 2, heads: 2, token_stride: 4, head_stride: 2 };
        assert_eq!(
            overlap.validate(hd, 100, Operand::K),
            Err(RopeError::OverlappingStrides { operand: Operand::K })
        );
        // A single token may have any token stride.
        let one = View { tokens: 1, heads: 2, token_stride: 0, head_stride: 4 };
        assert_eq!(one.validate(hd, 8, Operand::Q), Ok(8));
        let huge = View { tokens: 3, heads: 1, token_stride: usize::MAX / 2, head_stride: 0 };
        assert_eq!(huge.validate(hd, 8, Operand::Q), Err(RopeError::StrideOverflow { operand: Operand::Q }));
        assert_eq!(
            View::token_major(3, 2, hd).validate(hd, 23, Operand::Q),
            Err(RopeError::BufferTooShort { operand: Operand::Q, needed: 24, len: 23 })
        );
    }
}
