//! Element types: `f32`, [`half::f16`] and [`half::bf16`]. Defined with the kernels
//! (`kernels/element.rs`); the crate root re-exports them, this module for the crate's own
//! imports.

pub(crate) use crate::kernels::element::Element;
#[cfg(test)]
pub(crate) use crate::kernels::element::{CANONICAL_NAN_BF16, CANONICAL_NAN_F16, CANONICAL_NAN_F32};
