//! Builds the C test programs with the system C compiler against the static and the
//! shared library, and runs them:
//! - `capi/tests/test_capi.c` against the test build `librope_kernels_testing` (capi/testing:
//!   the library plus the test hook `rope_test_fault`) of this test's profile, with and
//!   without AddressSanitizer + UBSan, on results written here with the Rust API (RoPE and
//!   the sibling encodings);
//! - `capi/tests/test_stale.c` against the shipped release library (`cargo build --release
//!   -p rope-kernels-capi`), whose optimizer once removed `rope_free`'s clearing of the
//!   handle (issue 16). Never under ASan: it uses freed handles on purpose.
//!
//! Cargo does not build a `staticlib`/`cdylib`-only library for integration tests, so the
//! test runs `cargo build` itself (same target dir, so usually only what changed is
//! rebuilt) and links the files that build reports.
//!
//! Without a C compiler the tests print why and pass, unless `ROPE_CAPI_REQUIRE_CC=1`
//! (CI) makes that a failure; likewise `ROPE_CAPI_REQUIRE_SANITIZERS=1` for a compiler
//! without the sanitizer runtimes. `CC` selects the compiler (default `cc`).
//!
//! Cross-testing (`.ci/stages/15-foreign-arch.sh`): set the target with
//! `CARGO_BUILD_TARGET` rather than `--target`, so that the library build above inherits
//! it, `CC` to the cross compiler, and `ROPE_CAPI_RUNNER` to the command that runs a
//! foreign program (e.g. `qemu-s390x -L /usr/s390x-linux-gnu`; words split at spaces).
//! AddressSanitizer cannot reserve its shadow memory under qemu-user, so there
//! `ROPE_CAPI_NO_SANITIZERS=1` skips the sanitized builds (and says so).

use std::env;
use std::fs;
use std::mem::size_of;
use std::path::{Path, PathBuf};
use std::process::Command;

use rope_kernels::encodings::{
    add_alibi, alibi_slopes, alibi_slopes_with_bias_max, deberta_log_bucket_position,
    t5_relative_position_bucket, AlibiForm, LearnedElement, LearnedPositions, RelativeGrid,
    RelativePositions, Sinusoidal, SinusoidalLayout,
};
use rope_kernels::{
    bf16, f16, vision_position_ids, ApplyOptions, Element, HeadsMut, MRope, MRopeOptions, MRopeStyle,
    Positions, Rope, RopeConfig, Scaling, View, VisionOptions, VisionRope,
};

const TOKENS: usize = 5;
const HQ: usize = 32;
const HKV: usize = 8;
const HD: usize = 128;
const THETA: f64 = 500_000.0;
const START: u32 = 100;
/// Llama 3.1 runs to 131072 positions; the last ones stress the angle computation.
const POSITIONS: [u32; TOKENS] = [0, 1, 17, 4095, 131_071];

// ---- The sibling encodings (issue 8); test_capi.c has the same constants. ----

/// Sinusoidal: an odd width spanning two 64-column blocks, in rows padded to 80.
const SD: usize = 77;
const S_TOKENS: usize = 6;
const S_STRIDE: usize = 80;
const S_IDS: [u32; S_TOKENS] = [0, 1, 2, 1000, 65_535, 4_000_000_000];
const S_START: u32 = 123_456;
const S_ROWS: usize = 3;
const S_TABLE_START: u32 = 7;
const S_BASE2: f64 = 500.0;
/// Learned: a table of 10 positions of width 16; embeddings in rows of 20.
const LD: usize = 16;
const LP: usize = 10;
const L_TOKENS: usize = 4;
const L_STRIDE: usize = 20;
const L_IDS: [u32; L_TOKENS] = [3, 0, 9, 3];
const L_START: u32 = 6;
/// Relative: the schemes, each filled over every grid `(query_len, key_len, q_offset,
/// k_offset)`: prefill-like, decode, and far from position 0.
const SCHEMES: [RelativePositions; 6] = [
    RelativePositions::Clipped { max_distance: 3 },
    RelativePositions::ClippedIndex { max_distance: 3 },
    RelativePositions::DebertaIndex { att_span: 4 },
    RelativePositions::DebertaV2LogBucket { bucket_size: 8, max_position: 32 },
    RelativePositions::T5Bucket { bidirectional: true, num_buckets: 32, max_distance: 128 },
    RelativePositions::T5Bucket { bidirectional: false, num_buckets: 32, max_distance: 128 },
];
const GRIDS: [(usize, usize, u32, u32); 3] = [(5, 9, 4, 0), (3, 40, 50, 0), (2, 3, 4_000_000_000, 0)];
/// Distances for the scalar T5 (32 buckets, max distance 128) and DeBERTa-v2 (256, 512)
/// bucket functions.
const DISTANCES: [i64; 16] = [-5000, -1000, -600, -129, -128, -12, -8, -1, 0, 1, 8, 12, 128, 129, 600, 1000];
/// ALiBi: slopes of these head counts; the add on 3 heads of 4 x 7 scores, rows of 9.
const A_HEADS: [usize; 3] = [8, 12, 5];
const A_ADD_HEADS: usize = 3;
const A_GRID: (usize, usize, u32, u32) = (4, 7, 3, 0);
const A_STRIDE: usize = 9;
const A_LEN: usize = (A_ADD_HEADS * A_GRID.0 - 1) * A_STRIDE + A_GRID.1;

/// Linux link line of the static library (`--print native-static-libs`).
const NATIVE_LIBS: [&str; 7] = ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"];
const SANITIZE: [&str; 3] =
    ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"];

fn flag(name: &str) -> bool {
    env::var(name).is_ok_and(|v| v == "1")
}

/// Deterministic inputs in [-1, 1) (splitmix64).
fn inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Rotates copies of q and k with the Rust API.
fn rotate<T: rope_kernels::Element>(
    rope: &Rope,
    q: &[T],
    k: &[T],
    opts: &ApplyOptions<'_>,
) -> (Vec<T>, Vec<T>) {
    let (mut q, mut k) = (q.to_vec(), k.to_vec());
    let qv = View::token_major(TOKENS, HQ, HD);
    let kv = View::token_major(TOKENS, HKV, HD);
    rope.apply_qk(HeadsMut::new(&mut q, qv), Some(HeadsMut::new(&mut k, kv)), opts).expect("Rust apply");
    (q, k)
}

/// Appends the native-endian bytes of every value.
fn put<T: Copy, const N: usize>(out: &mut Vec<u8>, values: &[T], bytes: fn(T) -> [u8; N]) {
    values.iter().for_each(|v| out.extend_from_slice(&bytes(*v)));
}

/// Appends values of an element type as their bit patterns (`uint16_t` for f16, bf16).
fn put_bits<T: Element>(out: &mut Vec<u8>, values: &[T]) {
    for v in values {
        let b = v.to_bits_u32();
        match size_of::<T>() {
            2 => out.extend_from_slice(&(b as u16).to_ne_bytes()),
            _ => out.extend_from_slice(&b.to_ne_bytes()),
        }
    }
}

fn convert<T: Element>(v: &[f32]) -> Vec<T> {
    v.iter().map(|x| T::from_f32(*x)).collect()
}

fn sinusoidal_added<T: Element>(pe: &Sinusoidal, x: &[T], positions: Positions<'_>) -> Vec<T> {
    let mut x = x.to_vec();
    pe.add_to(&mut x, S_TOKENS, S_STRIDE, positions).expect("Rust sinusoidal add");
    x
}

fn learned_added<T: Element, P: LearnedElement<T>>(table: &[P], x: &[T], positions: Positions<'_>) -> Vec<T> {
    let mut x = x.to_vec();
    let wpe = LearnedPositions::new(table, LD).expect("Rust learned table");
    wpe.add_to(&mut x, L_TOKENS, L_STRIDE, positions).expect("Rust learned add");
    x
}

/// The encodings' part of the expected file (`load_encodings` in test_capi.c).
fn write_encodings(out: &mut Vec<u8>) {
    let (ids, start) = (Positions::Ids(&S_IDS), Positions::Start(S_START));
    let inter = Sinusoidal::new(SD, SinusoidalLayout::Interleaved).expect("sinusoidal");
    let concat = Sinusoidal::new(SD, SinusoidalLayout::Concatenated).expect("sinusoidal");
    let x = inputs(S_TOKENS * S_STRIDE, 3);
    let (xh, xb) = (convert::<f16>(&x), convert::<bf16>(&x));
    let mut table_inter = vec![0f32; S_ROWS * SD];
    inter.fill_table(S_TABLE_START, &mut table_inter).expect("fill");
    let mut table_concat = vec![0f32; S_ROWS * SD];
    let concat500 = Sinusoidal::with_base(SD, SinusoidalLayout::Concatenated, S_BASE2).expect("base");
    concat500.fill_table(S_TABLE_START, &mut table_concat).expect("fill");
    put_bits(out, &x);
    put_bits(out, &sinusoidal_added(&inter, &x, ids));
    put_bits(out, &sinusoidal_added(&concat, &x, start));
    put_bits(out, &xh);
    put_bits(out, &sinusoidal_added(&inter, &xh, ids));
    put_bits(out, &xb);
    put_bits(out, &sinusoidal_added(&concat, &xb, start));
    put_bits(out, &table_inter);
    put_bits(out, &table_concat);

    let (ids, start) = (Positions::Ids(&L_IDS), Positions::Start(L_START));
    let table = inputs(LP * LD, 4);
    let (th, tb) = (convert::<f16>(&table), convert::<bf16>(&table));
    let lx: Vec<f32> = inputs(L_TOKENS * L_STRIDE, 5).iter().map(|v| v * 8.0).collect();
    let (lxh, lxb) = (convert::<f16>(&lx), convert::<bf16>(&lx));
    put_bits(out, &table);
    put_bits(out, &th);
    put_bits(out, &tb);
    put_bits(out, &lx);
    put_bits(out, &lxh);
    put_bits(out, &lxb);
    put_bits(out, &learned_added(&table, &lx, ids));
    put_bits(out, &learned_added(&th, &lxh, ids));
    put_bits(out, &learned_added(&tb, &lxb, start));
    put_bits(out, &learned_added(&table, &lxh, ids));
    put_bits(out, &learned_added(&table, &lxb, start));

    for scheme in SCHEMES {
        for (q, k, qo, ko) in GRIDS {
            let mut m = vec![0i32; q * k];
            scheme.fill(&mut m, RelativeGrid::new(q, k).with_offsets(qo, ko)).expect("Rust relative fill");
            put(out, &m, i32::to_ne_bytes);
        }
    }
    for bidirectional in [true, false] {
        for d in DISTANCES {
            let b = t5_relative_position_bucket(d, bidirectional, 32, 128).expect("t5 bucket");
            out.extend_from_slice(&b.to_ne_bytes());
        }
    }
    for d in DISTANCES {
        let b = deberta_log_bucket_position(d, 256, 512).expect("deberta bucket");
        out.extend_from_slice(&b.to_ne_bytes());
    }

    for n in A_HEADS {
        let mut s = vec![0f32; n];
        alibi_slopes(&mut s);
        put_bits(out, &s);
    }
    let mut s16 = [0f32; 4];
    alibi_slopes_with_bias_max(&mut s16, 16.0).expect("bias max");
    put_bits(out, &s16);
    let scores: Vec<f32> = inputs(A_LEN, 6).iter().map(|v| v * 4.0).collect();
    let mut slopes = [0f32; A_ADD_HEADS];
    alibi_slopes(&mut slopes);
    let grid = RelativeGrid::new(A_GRID.0, A_GRID.1).with_offsets(A_GRID.2, A_GRID.3);
    put_bits(out, &scores);
    for form in [AlibiForm::Causal, AlibiForm::Symmetric] {
        let mut s = scores.clone();
        add_alibi(&mut s, A_STRIDE, grid, &slopes, form).expect("Rust ALiBi add");
        put_bits(out, &s);
    }
}

/// Writes the file `test_capi.c` reads (its `load` lists the order).
fn write_expected(path: &Path) {
    let cfg = RopeConfig::new(HD, THETA).with_scaling(Scaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    });
    let rope = Rope::new(cfg).expect("Llama 3.1 config");
    let q_in = inputs(TOKENS * HQ * HD, 1);
    let k_in = inputs(TOKENS * HKV * HD, 2);
    let ids = ApplyOptions::ids(&POSITIONS);
    let (q_fwd, k_fwd) = rotate(&rope, &q_in, &k_in, &ids);
    let (q_inv, k_inv) = rotate(&rope, &q_fwd, &k_fwd, &ids.inverse());
    let (q_start, k_start) = rotate(&rope, &q_in, &k_in, &ApplyOptions::start(START));
    let qh: Vec<f16> = q_in.iter().map(|v| f16::from_f32(*v)).collect();
    let kh: Vec<f16> = k_in.iter().map(|v| f16::from_f32(*v)).collect();
    let (qh_fwd, kh_fwd) = rotate(&rope, &qh, &kh, &ids);
    let qb: Vec<bf16> = q_in.iter().map(|v| bf16::from_f32(*v)).collect();
    let kb: Vec<bf16> = k_in.iter().map(|v| bf16::from_f32(*v)).collect();
    let (qb_fwd, kb_fwd) = rotate(&rope, &qb, &kb, &ids);

    let mut out = Vec::new();
    for v in [0x5443_4B52u32, 2, TOKENS as u32, HQ as u32, HKV as u32, HD as u32] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    POSITIONS.iter().for_each(|p| out.extend_from_slice(&p.to_ne_bytes()));
    let freqs = rope.frequencies();
    freqs.inv_freq().iter().for_each(|v| out.extend_from_slice(&v.to_ne_bytes()));
    out.extend_from_slice(&freqs.attention_factor().to_ne_bytes());
    for a in [&q_in, &k_in, &q_fwd, &k_fwd, &q_inv, &k_inv, &q_start, &k_start] {
        a.iter().for_each(|v| out.extend_from_slice(&v.to_ne_bytes()));
    }
    for a in [&qh, &kh, &qh_fwd, &kh_fwd] {
        a.iter().for_each(|v| out.extend_from_slice(&v.to_bits().to_ne_bytes()));
    }
    for a in [&qb, &kb, &qb_fwd, &kb_fwd] {
        a.iter().for_each(|v| out.extend_from_slice(&v.to_bits().to_ne_bytes()));
    }
    write_encodings(&mut out);
    fs::write(path, out).expect("write expected data");
}

/// The cargo profile this test was built with (target/<profile>/deps/<this test>).
fn test_profile() -> String {
    let exe = env::current_exe().expect("test executable path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>");
    let profile = profile_dir.file_name().and_then(|p| p.to_str()).expect("profile name");
    if profile == "debug" {
        "dev".into()
    } else {
        profile.into()
    }
}

/// Builds the C libraries `lib<name>.a` and `lib<name>.so` of `package` with `profile` and
/// returns the paths that cargo reports.
fn build_libraries(package: &str, name: &str, profile: &str) -> (PathBuf, PathBuf) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "-p", package, "--message-format=json", "--profile", profile])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo build");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "cargo build -p {package} --profile {profile} failed");
    // Each compiler-artifact line lists its files as JSON strings; paths need no escapes.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let file = |suffix: String| {
        let found = stdout.split('"').rfind(|s| s.ends_with(&suffix));
        PathBuf::from(found.unwrap_or_else(|| panic!("cargo reported no {suffix}")))
    };
    (file(format!("/lib{name}.a")), file(format!("/lib{name}.so")))
}

/// The C compiler, or `None` (test skipped) when there is none and CI does not require it.
fn c_compiler() -> Option<String> {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").output().is_err() {
        assert!(!flag("ROPE_CAPI_REQUIRE_CC"), "no C compiler `{cc}` and ROPE_CAPI_REQUIRE_CC=1");
        println!("skipping the C program: no C compiler `{cc}` (set CC)");
        return None;
    }
    Some(cc)
}

/// A compile command of `source` into `exe` against the static or the shared library.
fn compile(
    cc: &str,
    source: &Path,
    exe: &Path,
    (static_lib, shared_lib): (&Path, &Path),
    shared: bool,
) -> Command {
    let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../include");
    let mut c = Command::new(cc);
    c.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", "-g"]);
    c.arg("-I").arg(&include).arg(source).arg("-o").arg(exe);
    if shared {
        // A copy of the library beside the program, also under the name its SONAME
        // records (`librope_kernels.so.0`; the test build has none), which the loader
        // looks for: what scripts/install-capi.sh installs as a link.
        let stem = shared_lib.file_stem().and_then(|s| s.to_str()).expect("library name");
        let lib_dir = exe.with_extension("lib");
        fs::create_dir_all(&lib_dir).unwrap();
        for file in [format!("{stem}.so"), format!("{stem}.so.0")] {
            fs::copy(shared_lib, lib_dir.join(file)).expect("copy the shared library");
        }
        c.arg("-L").arg(&lib_dir).arg(format!("-l{}", stem.trim_start_matches("lib")));
        c.arg(format!("-Wl,-rpath,{}", lib_dir.display())).arg("-lm");
    } else {
        c.arg(static_lib).args(NATIVE_LIBS);
    }
    c
}

/// A command that runs the built program `exe`: directly, or through `ROPE_CAPI_RUNNER`
/// (e.g. qemu-user for a foreign target; words split at spaces).
fn program(exe: &Path) -> Command {
    let runner = env::var("ROPE_CAPI_RUNNER").unwrap_or_default();
    let mut runner = runner.split_whitespace();
    match runner.next() {
        Some(runner_program) => {
            let mut r = Command::new(runner_program);
            r.args(runner).arg(exe);
            r
        }
        None => Command::new(exe),
    }
}

fn run(cmd: &mut Command, what: &str) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn c_program_static_and_shared() {
    let Some(cc) = c_compiler() else { return };
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/test_capi.c");
    let (static_lib, shared_lib) =
        build_libraries("rope-kernels-capi-testing", "rope_kernels_testing", &test_profile());

    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi");
    fs::create_dir_all(&work).unwrap();
    let expected = work.join("expected.bin");
    write_expected(&expected);

    let mut ran = 0;
    for sanitize in [false, true] {
        if sanitize && flag("ROPE_CAPI_NO_SANITIZERS") {
            println!("skipping the sanitized builds: ROPE_CAPI_NO_SANITIZERS=1");
            continue;
        }
        for shared in [false, true] {
            let name = format!(
                "test_capi_{}{}",
                if shared { "shared" } else { "static" },
                if sanitize { "_asan" } else { "" }
            );
            let exe = work.join(&name);
            let mut c = compile(&cc, &source, &exe, (&static_lib, &shared_lib), shared);
            if sanitize {
                c.args(SANITIZE);
            }
            let built = run(&mut c, "C compiler");
            if !built.status.success() {
                if sanitize && !flag("ROPE_CAPI_REQUIRE_SANITIZERS") {
                    println!("skipping {name}: the compiler cannot build with sanitizers");
                    continue;
                }
                panic!("{name}: compiling test_capi.c failed");
            }
            let mut r = program(&exe);
            r.arg(&expected)
                .env("ASAN_OPTIONS", "halt_on_error=1:abort_on_error=1:detect_leaks=1")
                .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
                .env("RUST_BACKTRACE", "0");
            let out = run(&mut r, &name);
            assert!(out.status.success(), "{name} failed: {}", out.status);
            assert!(String::from_utf8_lossy(&out.stdout).contains("test_capi: all checks passed"));
            println!("{name}: passed");
            ran += 1;
        }
    }
    assert!(ran >= 2, "neither library was tested");
}

/// Issue 16: in the release library a double `rope_free` and calls on a freed handle
/// return `ROPE_INVALID_HANDLE` (the optimizer had removed the store that clears the
/// handle, so they freed twice and read freed memory). Not under ASan: test_stale.c uses
/// freed memory on purpose, which ASan would (rightly) stop at.
#[test]
fn release_library_refuses_stale_handles() {
    let Some(cc) = c_compiler() else { return };
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/test_stale.c");
    let (static_lib, shared_lib) = build_libraries("rope-kernels-capi", "rope_kernels", "release");
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi");
    fs::create_dir_all(&work).unwrap();
    for shared in [false, true] {
        let name = format!("test_stale_{}", if shared { "shared" } else { "static" });
        let exe = work.join(&name);
        let built = run(&mut compile(&cc, &source, &exe, (&static_lib, &shared_lib), shared), "C compiler");
        assert!(built.status.success(), "{name}: compiling test_stale.c failed");
        let out = run(&mut program(&exe), &name);
        assert!(out.status.success(), "{name} failed: {}", out.status);
        assert!(String::from_utf8_lossy(&out.stdout).contains("test_stale: all checks passed"));
        println!("{name}: passed");
    }
}

/// Writes the file `test_mrope.c` reads (its `load` lists the order): MRoPE (6 tokens, 4 q +
/// 2 k heads, head_dim 128, theta 1e6) sectioned [16, 24, 24] and interleaved [24, 20, 20],
/// f32 and bf16; the ViT's 2-D RoPE (24 patches of a 4x6 grid, 2 heads, head_dim 80).
fn write_mrope_expected(path: &Path) {
    const T: usize = 6;
    let ids: [[u32; T]; 3] = [[0, 1, 2, 2, 2, 70_000], [0, 1, 2, 3, 3, 70_000], [0, 1, 2, 3, 4, 1 << 30]];
    // bf16-exact inputs, so the bf16 part reads the same values.
    let bf = |v: Vec<f32>| -> Vec<f32> { v.into_iter().map(|x| bf16::from_f32(x).to_f32()).collect() };
    let (q, k) = (bf(inputs(T * 4 * 128, 21)), bf(inputs(T * 2 * 128, 22)));
    let (qv, kv) = (View::token_major(T, 4, 128), View::token_major(T, 2, 128));
    let s = [&ids[0][..], &ids[1][..], &ids[2][..]];
    let mut out = Vec::new();
    for row in &ids {
        put(&mut out, row, u32::to_ne_bytes);
    }
    put(&mut out, &q, f32::to_ne_bytes);
    put(&mut out, &k, f32::to_ne_bytes);
    for (section, style) in [([16, 24, 24], MRopeStyle::Sectioned), ([24, 20, 20], MRopeStyle::Interleaved)] {
        let m = MRope::new(RopeConfig::new(128, 1e6), section, style).unwrap();
        let (mut a, mut b) = (q.clone(), k.clone());
        m.apply_qk(HeadsMut::new(&mut a, qv), Some(HeadsMut::new(&mut b, kv)), &MRopeOptions::ids(s))
            .unwrap();
        put(&mut out, &a, f32::to_ne_bytes);
        put(&mut out, &b, f32::to_ne_bytes);
    }
    let m = MRope::new(RopeConfig::new(128, 1e6), [16, 24, 24], MRopeStyle::Sectioned).unwrap();
    let mut h: Vec<bf16> = convert(&q);
    m.apply(HeadsMut::new(&mut h, qv), &MRopeOptions::ids(s)).unwrap();
    put_bits(&mut out, &h);
    let (mut vh, mut vw) = (vec![0u32; 24], vec![0u32; 24]);
    vision_position_ids([1, 4, 6], 2, &mut vh, &mut vw).unwrap();
    put(&mut out, &vh, u32::to_ne_bytes);
    put(&mut out, &vw, u32::to_ne_bytes);
    let x = inputs(24 * 2 * 80, 23);
    put(&mut out, &x, f32::to_ne_bytes);
    let vit = VisionRope::new(RopeConfig::new(80, 1e4)).unwrap();
    let mut y = x.clone();
    vit.apply(HeadsMut::new(&mut y, View::token_major(24, 2, 80)), &VisionOptions::ids([&vh, &vw])).unwrap();
    put(&mut out, &y, f32::to_ne_bytes);
    fs::write(path, out).expect("write expected data");
}

/// Issue 15: `capi/tests/test_mrope.c` (MRoPE and vision RoPE from C) against the static
/// library, with and without AddressSanitizer + UBSan, bit for bit against the Rust API.
#[test]
fn c_mrope_program() {
    let Some(cc) = c_compiler() else { return };
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/test_mrope.c");
    let (static_lib, shared_lib) =
        build_libraries("rope-kernels-capi-testing", "rope_kernels_testing", &test_profile());
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi_mrope");
    fs::create_dir_all(&work).unwrap();
    let expected = work.join("expected_mrope.bin");
    write_mrope_expected(&expected);
    let mut ran = 0;
    for sanitize in [false, true] {
        if sanitize && flag("ROPE_CAPI_NO_SANITIZERS") {
            println!("skipping the sanitized build: ROPE_CAPI_NO_SANITIZERS=1");
            continue;
        }
        let name = format!("test_mrope_static{}", if sanitize { "_asan" } else { "" });
        let exe = work.join(&name);
        let mut c = compile(&cc, &source, &exe, (&static_lib, &shared_lib), false);
        c.arg("-lm");
        if sanitize {
            c.args(SANITIZE);
        }
        let built = run(&mut c, "C compiler");
        if !built.status.success() {
            if sanitize && !flag("ROPE_CAPI_REQUIRE_SANITIZERS") {
                println!("skipping {name}: the compiler cannot build with sanitizers");
                continue;
            }
            panic!("{name}: compiling test_mrope.c failed");
        }
        let mut r = program(&exe);
        r.arg(&expected)
            .env("ASAN_OPTIONS", "halt_on_error=1:abort_on_error=1:detect_leaks=1")
            .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
            .env("RUST_BACKTRACE", "0");
        let out = run(&mut r, &name);
        assert!(out.status.success(), "{name} failed: {}", out.status);
        assert!(String::from_utf8_lossy(&out.stdout).contains("test_mrope: all checks passed"));
        println!("{name}: passed");
        ran += 1;
    }
    assert!(ran >= 1, "the MRoPE C program did not run");
}

/// Issue 15: fused QK-norm + RoPE through the C ABI (capi/tests/test_qknorm.c), static and
/// shared, plain and under AddressSanitizer + UBSan.
#[test]
fn c_program_qknorm() {
    let Some(cc) = c_compiler() else { return };
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/test_qknorm.c");
    let (static_lib, shared_lib) =
        build_libraries("rope-kernels-capi-testing", "rope_kernels_testing", &test_profile());
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi");
    fs::create_dir_all(&work).unwrap();
    let mut ran = 0;
    for sanitize in [false, true] {
        if sanitize && flag("ROPE_CAPI_NO_SANITIZERS") {
            println!("skipping the sanitized builds: ROPE_CAPI_NO_SANITIZERS=1");
            continue;
        }
        for shared in [false, true] {
            let name = format!(
                "test_qknorm_{}{}",
                if shared { "shared" } else { "static" },
                if sanitize { "_asan" } else { "" }
            );
            let exe = work.join(&name);
            let mut c = compile(&cc, &source, &exe, (&static_lib, &shared_lib), shared);
            c.arg("-lm");
            if sanitize {
                c.args(SANITIZE);
            }
            let built = run(&mut c, "C compiler");
            if !built.status.success() {
                if sanitize && !flag("ROPE_CAPI_REQUIRE_SANITIZERS") {
                    println!("skipping {name}: the compiler cannot build with sanitizers");
                    continue;
                }
                panic!("{name}: compiling test_qknorm.c failed");
            }
            let mut r = program(&exe);
            r.env("ASAN_OPTIONS", "halt_on_error=1:abort_on_error=1:detect_leaks=1")
                .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
                .env("RUST_BACKTRACE", "0");
            let out = run(&mut r, &name);
            assert!(out.status.success(), "{name} failed: {}", out.status);
            assert!(String::from_utf8_lossy(&out.stdout).contains("test_qknorm: all checks passed"));
            println!("{name}: passed");
            ran += 1;
        }
    }
    assert!(ran >= 2, "neither library was tested");
}

/// Writes the file `test_layer.c` reads (its `load` lists the order): a fused f32 QKV buffer
/// `[6][4 q | 2 k | 2 v][64]` (head_dim 64, theta 10000) through `Rope::apply_layer` twice:
/// a ragged batch of 3 sequences (indptr [0, 3, 4, 6], starts [5, 17, 0]), q into an f32
/// tensor, k and v into paged bf16 caches (NHD, 8 blocks of 4 slots, a block table of 6 per
/// sequence); then the same tokens as one sequence at position ids [5, 6, 7, 17, 0, 1] with a
/// cos/sin table of 18 rows, q in place, k and v into q8_0 caches (HND, 2 blocks of 8 slots)
/// through a slot_mapping with a -1. Caches start as 0xA5 bytes, as in the C program.
fn write_layer_expected(path: &Path) {
    use rope_kernels::{Batch, BlockQ8_0, CacheLayout, CosSinTable, Dest, HeadSet, LayerOptions, Qkv, Slots};
    const T: usize = 6;
    const HQ: usize = 4;
    const HKV: usize = 2;
    const HD: usize = 64;
    const ROW: usize = (HQ + 2 * HKV) * HD;
    const INDPTR: [u32; 4] = [0, 3, 4, 6];
    const STARTS: [u32; 3] = [5, 17, 0];
    const BLOCK_TABLE: [u32; 18] = [1, 6, 2, 2, 2, 2, 4, 4, 4, 4, 3, 4, 5, 7, 7, 7, 7, 7];
    const IDS: [u32; T] = [5, 6, 7, 17, 0, 1];
    const SLOTS: [i64; T] = [9, 3, -1, 15, 0, 8];
    let rope = Rope::new(RopeConfig::new(HD, 10_000.0)).expect("config");
    let sets = HeadSet::qkv_rows(HQ, HKV, HD);
    let qkv_in = inputs(T * ROW, 31);

    let mut qkv = qkv_in.clone();
    let mut q_out = vec![0f32; T * HQ * HD];
    let nhd = CacheLayout::nhd(8, 4, HKV, HD);
    let canary = bf16::from_bits(0xA5A5);
    let (mut kc, mut vc) = (vec![canary; 8 * 4 * HKV * HD], vec![canary; 8 * 4 * HKV * HD]);
    let paged = || Slots::BlockTable { block_table: &BLOCK_TABLE, blocks_per_seq: 6 };
    rope.apply_layer(
        Qkv::new(&mut qkv, T, sets),
        Dest::Tensor { data: &mut q_out, view: View::token_major(T, HQ, HD) },
        Dest::Cache { data: &mut kc, layout: nhd, slots: paged() },
        Dest::Cache { data: &mut vc, layout: nhd, slots: paged() },
        &LayerOptions::batch(Batch::Ragged { indptr: &INDPTR, start: &STARTS }),
    )
    .expect("Rust paged layer");
    assert_eq!(qkv, qkv_in, "nothing in place");

    let pairs = HD / 2;
    let (mut cos, mut sin) = (vec![0f32; 18 * pairs], vec![0f32; 18 * pairs]);
    rope.fill_table(0, &mut cos, &mut sin).expect("table");
    let table = CosSinTable::new(&cos, &sin, pairs).expect("table shape");
    let hnd = CacheLayout::hnd(2, 8, HKV, HD / 32);
    let block = BlockQ8_0 { d: f16::from_bits(0xA5A5), qs: [0xA5u8 as i8; 32] };
    let (mut k8, mut v8) = (vec![block; 2 * 8 * HKV * 2], vec![block; 2 * 8 * HKV * 2]);
    rope.apply_layer(
        Qkv::new(&mut qkv, T, sets),
        Dest::<f32>::InPlace,
        Dest::Cache { data: &mut k8, layout: hnd, slots: Slots::Mapping(&SLOTS) },
        Dest::Cache { data: &mut v8, layout: hnd, slots: Slots::Mapping(&SLOTS) },
        &LayerOptions::batch(Batch::Single(Positions::Ids(&IDS))).with_table(table),
    )
    .expect("Rust q8_0 layer");

    let mut out = Vec::new();
    for v in [0x4C41_5952u32, T as u32, HQ as u32, HKV as u32, HD as u32] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    put_bits(&mut out, &qkv_in);
    put_bits(&mut out, &q_out);
    put_bits(&mut out, &kc);
    put_bits(&mut out, &vc);
    put_bits(&mut out, &qkv);
    for b in k8.iter().chain(&v8) {
        out.extend_from_slice(&b.d.to_bits().to_ne_bytes());
        b.qs.iter().for_each(|q| out.push(*q as u8));
    }
    fs::write(path, out).expect("write expected data");
}

/// README.md ("Using it in a runtime", from C) shows the lines of test_layer.c between its
/// "README example begin" comment and "README example end", verbatim.
fn readme_shows_the_c_layer_example(source: &Path) {
    let c = fs::read_to_string(source).expect("read test_layer.c");
    let begin = c.find("(c_program.rs checks). */\n").expect("README example begin") + 26;
    let end = c.find("/* README example end */").expect("README example end");
    let readme = fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let block = format!("```c\n{}\n```", c[begin..end].trim_end());
    assert!(readme.contains(&block), "README.md does not show test_layer.c's example verbatim:\n{block}");
}

/// Issue 17: one attention layer through `rope_apply_layer` (capi/tests/test_layer.c): a
/// paged bf16 and a q8_0 KV cache, bit for bit against the Rust API, and every status of
/// the call writing nothing; static and shared, plain and under AddressSanitizer + UBSan.
#[test]
fn c_program_layer() {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/test_layer.c");
    readme_shows_the_c_layer_example(&source);
    let Some(cc) = c_compiler() else { return };
    let (static_lib, shared_lib) =
        build_libraries("rope-kernels-capi-testing", "rope_kernels_testing", &test_profile());
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi_layer");
    fs::create_dir_all(&work).unwrap();
    let expected = work.join("expected_layer.bin");
    write_layer_expected(&expected);
    let mut ran = 0;
    for sanitize in [false, true] {
        if sanitize && flag("ROPE_CAPI_NO_SANITIZERS") {
            println!("skipping the sanitized builds: ROPE_CAPI_NO_SANITIZERS=1");
            continue;
        }
        for shared in [false, true] {
            let name = format!(
                "test_layer_{}{}",
                if shared { "shared" } else { "static" },
                if sanitize { "_asan" } else { "" }
            );
            let exe = work.join(&name);
            let mut c = compile(&cc, &source, &exe, (&static_lib, &shared_lib), shared);
            c.arg("-lm");
            if sanitize {
                c.args(SANITIZE);
            }
            let built = run(&mut c, "C compiler");
            if !built.status.success() {
                if sanitize && !flag("ROPE_CAPI_REQUIRE_SANITIZERS") {
                    println!("skipping {name}: the compiler cannot build with sanitizers");
                    continue;
                }
                panic!("{name}: compiling test_layer.c failed");
            }
            let mut r = program(&exe);
            r.arg(&expected)
                .env("ASAN_OPTIONS", "halt_on_error=1:abort_on_error=1:detect_leaks=1")
                .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
                .env("RUST_BACKTRACE", "0");
            let out = run(&mut r, &name);
            assert!(out.status.success(), "{name} failed: {}", out.status);
            assert!(String::from_utf8_lossy(&out.stdout).contains("test_layer: all checks passed"));
            println!("{name}: passed");
            ran += 1;
        }
    }
    assert!(ran >= 2, "neither library was tested");
}
