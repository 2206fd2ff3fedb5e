//! The fuzz targets' checks (`tests/fuzzing/`), run on the committed seed corpora and on
//! fixed-seed random inputs, so they build and run with every `cargo test`.
//!
//! - `diff_f32`, `diff_half`: every available tier bit-identical to the scalar tier, nothing
//!   written outside the views, nothing written on error, the scalar result equal to the
//!   rotation recomputed by the harness.
//! - `frequencies`: finite frequencies and cos/sin or an error, for any scaling parameters.
//! - `config_json`: a configuration (that works) or an error, for any text.
//! - `capi`: every C entry point returns a status of the header; a failing call changes no
//!   byte of any buffer, struct or canary; a successful one writes the Rust API's bits.
//!
//! `UPDATE_FUZZ_CORPUS=1 cargo test -p rope-kernels-workspace-tests corpus` rewrites
//! `fuzz/corpus/`.
//!
//! This test lives in a package of its own (`workspace-tests/`, not published) because it needs
//! the C ABI as a Rust library (`capi/rlib`) and the corpus under `fuzz/`, neither of which
//! is part of the published `rope-kernels` crate, whose own tests must pass from its
//! `.crate` alone. The checks stay in `tests/fuzzing/`, shared with the fuzz targets.

#[path = "../../tests/fuzzing/mod.rs"]
mod fuzzing;
// The seeded generator of the workspace's tests (tests/support/rng.rs); the element trait
// and padded buffers it uses are those `fuzzing` includes (the same files).
#[path = "../../tests/support/rng.rs"]
#[allow(dead_code)]
mod rng;
use fuzzing::{elem, padded};

use std::collections::BTreeMap;
use std::path::PathBuf;

use fuzzing::diff::{self, DiffCase, Outcome};
use fuzzing::{capi, config_json, corpus, frequencies, mrope};
use rand::{Rng, RngExt};
use rope_kernels::dispatch;

const TARGETS: [&str; 5] = ["diff_f32", "diff_half", "frequencies", "config_json", "capi"];

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target)
}

fn run(target: &str, bytes: &[u8]) -> &'static str {
    match target {
        "diff_f32" => {
            // The same bytes as a multimodal case too (MRoPE, vision RoPE).
            let _ = mrope::check::<f32>(bytes);
            let _ = mrope::check_index(bytes);
            outcome_name(diff::check::<f32>(&DiffCase::read(bytes)))
        }
        "diff_half" => {
            let _ = mrope::check_half(bytes);
            outcome_name(diff::check_half(bytes))
        }
        "frequencies" => {
            if frequencies::check(bytes) {
                "built"
            } else {
                "rejected"
            }
        }
        "config_json" => {
            if config_json::check(bytes) {
                "loaded"
            } else {
                "rejected"
            }
        }
        "capi" => {
            let calls = capi::check(bytes);
            match calls.iter().filter(|(_, s)| *s == rope_kernels_capi::ROPE_OK).count() {
                0 => "rejected",
                n if n == calls.len() => "ok",
                _ => "mixed",
            }
        }
        _ => unreachable!(),
    }
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Skipped => "skipped",
        Outcome::Rejected(_) => "rejected",
        Outcome::Rotated => "rotated",
    }
}

/// The committed corpus is what the generator writes (with `UPDATE_FUZZ_CORPUS=1`, it is
/// rewritten); files added by fuzzing runs or crash reproductions are allowed beside it.
#[test]
fn corpus_is_up_to_date() {
    let update = std::env::var_os("UPDATE_FUZZ_CORPUS").is_some();
    let mut stale = Vec::new();
    for (target, name, bytes) in corpus::seeds() {
        let path = corpus_dir(target).join(&name);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(&bytes[..]) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "seed files missing or stale (run `UPDATE_FUZZ_CORPUS=1 cargo test -p rope-kernels-workspace-tests corpus`): {stale:#?}"
    );
}

/// The seed writers and the decoders agree.
#[test]
fn seeds_decode_to_their_cases() {
    for (name, case) in corpus::diff_cases() {
        assert_eq!(DiffCase::read(&case.write()), case, "{name}");
    }
    for (name, bytes) in capi::seeds::seeds() {
        assert_eq!(capi::CapiCase::read(&bytes).write(), bytes, "{name}");
    }
}

/// The `capi` seeds reach every status of the header but `ROPE_PANIC` (a bug), and each
/// real configuration's seeds succeed in every call.
#[test]
fn capi_seeds_reach_every_status() {
    let mut seen = BTreeMap::new();
    for (name, bytes) in capi::seeds::seeds() {
        let calls = capi::check(&bytes);
        if name.ends_with("_f32") || name.ends_with("_table") || name.ends_with("_hf") {
            assert!(calls.iter().all(|(_, s)| *s == 0), "{name}: {calls:?}");
        }
        for (call, s) in calls {
            seen.entry(s).or_insert((name.clone(), call));
        }
    }
    let missing: Vec<_> = capi::status::ALL_STATUSES
        .iter()
        .filter(|s| **s != rope_kernels_capi::ROPE_PANIC && !seen.contains_key(*s))
        .collect();
    assert!(missing.is_empty(), "statuses no seed returns: {missing:?}");
    assert!(!seen.contains_key(&rope_kernels_capi::ROPE_PANIC));
}

/// Every file of every committed corpus passes its check; the seeds reach both the success
/// and the error paths.
#[test]
fn committed_corpora_pass() {
    for target in TARGETS {
        let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
        let mut files: Vec<_> =
            std::fs::read_dir(corpus_dir(target)).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for path in files {
            if path.file_name().unwrap().to_string_lossy().starts_with('.') {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let r = std::panic::catch_unwind(|| run(target, &bytes));
            match r {
                Ok(o) => *tally.entry(o).or_default() += 1,
                Err(_) => panic!("{target}: {} fails", path.display()),
            }
        }
        eprintln!("{target}: {tally:?}");
        let want: &[&str] = match target {
            "diff_f32" | "diff_half" => &["rotated", "rejected"],
            "frequencies" => &["built", "rejected"],
            // Every status is reached: `capi_seeds_reach_every_status`.
            "capi" => &["ok", "mixed"],
            _ => &["loaded", "rejected"],
        };
        for w in want {
            assert!(tally.get(w).copied().unwrap_or(0) > 0, "{target}: no seed is {w}: {tally:?}");
        }
    }
}

/// Random inputs from fixed seeds: a few hundred per target, as bytes (what libFuzzer
/// gives) and as mutations of the committed seeds (what it does next).
fn random_inputs(seed: u64, n: usize, seeds: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut rng = rng::rng(seed);
    (0..n)
        .map(|i| {
            if i % 2 == 0 || seeds.is_empty() {
                let len = rng.random_range(0..400);
                let mut b = vec![0u8; len];
                rng.fill_bytes(&mut b);
                b
            } else {
                let mut b = seeds[rng.random_range(0..seeds.len())].clone();
                for _ in 0..rng.random_range(1..6) {
                    if b.is_empty() {
                        break;
                    }
                    let j = rng.random_range(0..b.len());
                    b[j] = rng.random();
                }
                b
            }
        })
        .collect()
}

fn fixed_seed_run(target: &str, seed: u64, n: usize) {
    let seeds: Vec<Vec<u8>> =
        corpus::seeds().into_iter().filter(|(t, _, _)| *t == target).map(|(_, _, b)| b).collect();
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, bytes) in random_inputs(seed, n, &seeds).iter().enumerate() {
        let r = std::panic::catch_unwind(|| run(target, bytes));
        match r {
            Ok(o) => *tally.entry(o).or_default() += 1,
            Err(_) => panic!("{target}: fixed-seed input {i} fails: {bytes:?}"),
        }
    }
    eprintln!("{target} ({} tiers): {tally:?}", dispatch::available_tiers().count());
}

#[test]
fn diff_f32_fixed_seeds() {
    fixed_seed_run("diff_f32", 0xD1FF_0032, 400);
}

#[test]
fn diff_half_fixed_seeds() {
    fixed_seed_run("diff_half", 0xD1FF_0016, 400);
}

#[test]
fn frequencies_fixed_seeds() {
    fixed_seed_run("frequencies", 0xF4E0, 600);
}

#[test]
fn config_json_fixed_seeds() {
    fixed_seed_run("config_json", 0xC0F1, 600);
}

#[test]
fn capi_fixed_seeds() {
    fixed_seed_run("capi", 0xCA_B1, 600);
}

/// `capi/rlib` builds the C ABI's sources as a package of its own, whose version
/// `rope_version()` reports: it must be `capi/Cargo.toml`'s.
#[test]
fn capi_rlib_has_the_capi_version() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../capi/Cargo.toml")).unwrap();
    let version = manifest.lines().find_map(|l| l.strip_prefix("version = \"")?.strip_suffix('"')).unwrap();
    // SAFETY: rope_version returns a static NUL-terminated string.
    let reported = unsafe { std::ffi::CStr::from_ptr(rope_kernels_capi::rope_version()) };
    assert_eq!(reported.to_str(), Ok(version));
}

/// The multimodal check (MRoPE, vision RoPE) on fixed-seed random inputs, for every element
/// type: some cases must rotate and some be rejected.
#[test]
fn mrope_fixed_seeds() {
    let mut rng = rng::rng(0x15_15);
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    for i in 0..300 {
        let mut bytes = vec![0u8; 220];
        rng.fill_bytes(&mut bytes);
        let outcome = match i % 3 {
            0 => mrope::check::<f32>(&bytes),
            1 => mrope::check::<rope_kernels::f16>(&bytes),
            _ => mrope::check::<rope_kernels::bf16>(&bytes),
        };
        *tally.entry(outcome_name(outcome)).or_default() += 1;
    }
    println!("mrope: {tally:?}");
    assert!(tally.get("rotated").copied().unwrap_or(0) > 50, "{tally:?}");
    assert!(tally.get("rejected").copied().unwrap_or(0) > 5, "{tally:?}");
}

/// The `MRopeIndex` check on fixed-seed random inputs: some cases must succeed, some be
/// rejected for their layout and some overflow.
#[test]
fn mrope_index_fixed_seeds() {
    let mut rng = rng::rng(0x15_01);
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..3000 {
        let mut bytes = vec![0u8; 64];
        rng.fill_bytes(&mut bytes);
        let name = match mrope::check_index(&bytes) {
            Outcome::Rejected(rope_kernels::RopeError::PositionOverflow) => "overflow".to_string(),
            o => outcome_name(o).to_string(),
        };
        *tally.entry(name).or_default() += 1;
    }
    println!("mrope index: {tally:?}");
    for k in ["rotated", "rejected", "overflow"] {
        assert!(tally.get(k).copied().unwrap_or(0) > 20, "{k}: {tally:?}");
    }
}
