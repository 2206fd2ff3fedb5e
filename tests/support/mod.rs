//! Test support shared by every test of the workspace: the element trait with canaries and
//! special values ([`elem`]), the tiers to test ([`tiers`]), canary-padded buffers checked
//! after every call ([`padded`]) and the seeded generator ([`rng`]).
//!
//! Included by path, not a crate of its own: the published crate's tests (`tests/`) must
//! build from its `.crate` alone, where a path dev-dependency would be dropped, so this
//! directory ships with them. Users:
//! - the integration tests of `tests/` (`mod support;`, or through `tests/common/mod.rs`),
//!   the tier suite (`tests/tiers/main.rs`);
//! - the fuzz checks (`tests/fuzzing/`: [`elem`] alone, as `fuzz/` has no `rand`), so the
//!   fuzz targets and `workspace-tests/tests/fuzz_logic.rs`;
//! - the C ABI's unit tests (`capi/src/tests.rs`), a `no_std` crate: hence the explicit
//!   `std::` imports throughout.
//!
//! Each user takes a subset, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod elem;
pub mod padded;
pub mod rng;
pub mod tiers;
