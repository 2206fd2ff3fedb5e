//! The fuzz crate (`fuzz/`, its own workspace, excluded from the root one) still builds.
//!
//! `tests/fuzz_logic.rs` compiles and runs the targets' checks; this test type-checks the
//! `fuzz_target!` wrappers, the `#[path]` includes and `fuzz/Cargo.toml` on the stable
//! toolchain: `cargo check` needs neither nightly nor cargo-fuzz (only running the targets
//! does; see `.ci/stages/40-fuzz.sh`). Not `--locked`: a new dependency of the crate updates
//! `fuzz/Cargo.lock` instead of failing here. The first run compiles libFuzzer's C++ sources
//! (about a minute); later runs reuse `fuzz/target`, so it needs a C++ compiler (`CXX`,
//! default `c++`): without one the test says so and skips, unless `ROPE_REQUIRE_CXX=1`
//! (set by CI) makes that a failure.

use std::env;
use std::process::Command;

#[test]
#[cfg_attr(miri, ignore = "spawns cargo")]
fn fuzz_crate_builds() {
    let cxx = env::var("CXX").unwrap_or_else(|_| "c++".into());
    if Command::new(&cxx).arg("--version").output().is_err() {
        let required = env::var("ROPE_REQUIRE_CXX").is_ok_and(|v| v == "1");
        assert!(!required, "no C++ compiler `{cxx}` and ROPE_REQUIRE_CXX=1");
        println!("skipping the fuzz crate check: no C++ compiler `{cxx}` for libFuzzer (set CXX)");
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO"))
        .args(["check", "--bins", "--manifest-path"])
        .arg(format!("{root}/fuzz/Cargo.toml"))
        // The outer build's flags (e.g. a cross target's) are not the fuzz crate's.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo check of fuzz/ failed:\n{}", String::from_utf8_lossy(&out.stderr));
}
