//! The [`Rope`] object and its apply entry points.

mod handle;
mod options;
mod walk;
pub use handle::Rope;
#[allow(deprecated)]
pub use handle::RopeRef;
pub(crate) use handle::{RopeView, Tables};
pub use options::{Apply, CosSin, Direction, Heads, HeadsMut, Positions};
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
pub use axes::{AxisApply, AxisRows};
pub use chunked::{PreparedCall, TokenChunk, TokenChunks};
pub use mrope::{MRope, MRopeApply, MRopeStyle};
pub use mrope_index::{MRopeIndex, TOKEN_IMAGE, TOKEN_TEXT, TOKEN_VIDEO};
pub use vision::{vision_position_ids, VisionApply, VisionRope};

mod qknorm;
pub use qknorm::{QkNorm, WeightOffset};

mod layer;
#[doc(hidden)]
pub use layer::ErasedDest;
pub use layer::{Batch, CacheLayout, Dest, HeadSet, LayerApply, Qkv, Slots};
