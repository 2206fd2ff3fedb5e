//! The [`Rope`] object and its apply entry points.

mod handle;
mod options;
mod walk;
#[allow(deprecated)]
pub use axes::AxisApply;
pub use handle::Rope;
#[allow(deprecated)]
pub use handle::RopeRef;
pub(crate) use handle::{RopeView, Tables};
#[allow(deprecated)]
pub use layer::LayerApply;
#[allow(deprecated)]
pub use mrope::MRopeApply;
#[allow(deprecated)]
pub use options::Apply;
pub use options::{ApplyOptions, CosSin, Direction, Heads, HeadsMut, Positions};
#[allow(deprecated)]
pub use vision::VisionApply;
use walk::{
    check_table, for_each_row, max_position, rotate_tokens, CallFreqs, FixedFreqs, FreqSlot, LineRow,
    RotateToken, Tensor, Tensors, TokenParams, SMALL_PAIRS,
};

mod state;
#[doc(hidden)]
pub use state::RopeState;

mod axes;
mod chunked;
mod mrope;
mod mrope_index;
mod vision;
pub use axes::{AxisOptions, AxisRows};
pub use chunked::{PreparedCall, TokenChunk, TokenChunks};
pub use mrope::{MRope, MRopeOptions, MRopeStyle};
pub use mrope_index::{MRopeIndex, TOKEN_IMAGE, TOKEN_TEXT, TOKEN_VIDEO};
pub use vision::{vision_position_ids, VisionOptions, VisionRope};

mod qknorm;
pub use qknorm::{QkNorm, WeightOffset};

mod layer;
#[doc(hidden)]
pub use layer::ErasedDest;
pub use layer::{Batch, CacheLayout, Dest, HeadSet, LayerOptions, Qkv, Slots};
