//! The fuzz targets' checks (`tests/fuzzing/`), run on the committed seed corpora and on
//! fixed-seed random inputs, so they build and run with every `cargo test`.
//!
//! - `diff_f32`, `diff_half`: every available tier bit-identical to the scalar tier, nothing
//!   written outside the views, nothing written on error, the scalar result equal to the
//!   rotation recomputed by the harness.
//! - `frequencies`: finite frequencies and cos/sin or an error, for any scaling parameters.
//! - `config_json`: a configuration (that works) or an error, for any text.
//!
//! `UPDATE_FUZZ_CORPUS=1 cargo test --test fuzz_logic corpus` rewrites `fuzz/corpus/`.
#![cfg(feature = "hf-config")]

mod fuzzing;

use std::collections::BTreeMap;
use std::path::PathBuf;

use fuzzing::diff::{self, DiffCase, Outcome};
use fuzzing::{config_json, corpus, frequencies};
use rand::rngs::StdRng;
use rand::{Rng, RngExt, SeedableRng};
use rope_kernels::dispatch;

const TARGETS: [&str; 4] = ["diff_f32", "diff_half", "frequencies", "config_json"];

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

fn run(target: &str, bytes: &[u8]) -> &'static str {
    match target {
        "diff_f32" => outcome_name(diff::check::<f32>(&DiffCase::read(bytes))),
        "diff_half" => outcome_name(diff::check_half(bytes)),
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
        "seed files missing or stale (run `UPDATE_FUZZ_CORPUS=1 cargo test --test fuzz_logic corpus`): {stale:#?}"
    );
}

/// The seed writers and the decoders agree.
#[test]
fn seeds_decode_to_their_cases() {
    for (name, case) in corpus::diff_cases() {
        assert_eq!(DiffCase::read(&case.write()), case, "{name}");
    }
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
    let mut rng = StdRng::seed_from_u64(seed);
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
