//! The instruction-count suite of `scripts/instr-gate.sh` (gungraun, on Valgrind's
//! Callgrind): one benchmark per case of `rope_gate_bench::CASES`, each a single call whose
//! instructions (and Callgrind's estimated cycles) are counted; building the case's inputs
//! (`setup`) is not counted.
//!
//! The tier is pinned: AVX2 on x86-64 (Valgrind does not emulate AVX-512, so the CPU
//! Valgrind presents to the program never has it), NEON on aarch64, portable elsewhere.
//!
//! Run: `cargo bench --manifest-path tools/gate/Cargo.toml --bench instr` (needs valgrind
//! and `gungraun-runner` of the same version as the `gungraun` dev-dependency).

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use rope_gate_bench::{find, Prepared};
use rope_kernels::Tier;

/// The tier every count is taken on.
const TIER: Tier = if cfg!(target_arch = "x86_64") {
    Tier::Avx2
} else if cfg!(target_arch = "aarch64") {
    Tier::Neon
} else {
    Tier::Portable
};

fn setup(name: &str) -> Box<dyn Prepared> {
    let case = find(name).unwrap_or_else(|| panic!("no case '{name}'"));
    match case.prepare(TIER) {
        Ok(mut p) => {
            // One uncounted call first: the counted one then runs warm (caches, branch
            // history and any lazy initialisation), as a call in a runtime's loop does.
            p.run();
            p
        }
        Err(e) => panic!("{e}: the instruction counts are taken on the {TIER} tier, which this CPU (as Valgrind presents it) lacks"),
    }
}

// One `bench` per case of `rope_gate_bench::CASES`, in its order (scripts/instr-gate.sh
// checks that the two lists agree).
#[library_benchmark]
#[bench::decode_f32_half_split(args = ("decode/f32/half_split"), setup = setup)]
#[bench::decode_f32_interleaved(args = ("decode/f32/interleaved"), setup = setup)]
#[bench::decode_f16_half_split(args = ("decode/f16/half_split"), setup = setup)]
#[bench::decode_bf16_half_split(args = ("decode/bf16/half_split"), setup = setup)]
#[bench::prefill_f32_half_split(args = ("prefill/f32/half_split"), setup = setup)]
#[bench::prefill_f32_interleaved(args = ("prefill/f32/interleaved"), setup = setup)]
#[bench::prefill_f16_half_split(args = ("prefill/f16/half_split"), setup = setup)]
#[bench::prefill_f16_interleaved(args = ("prefill/f16/interleaved"), setup = setup)]
#[bench::prefill_bf16_half_split(args = ("prefill/bf16/half_split"), setup = setup)]
#[bench::prefill_bf16_interleaved(args = ("prefill/bf16/interleaved"), setup = setup)]
#[bench::tail_f32_half_split(args = ("tail/f32/half_split"), setup = setup)]
#[bench::tail_f32_interleaved(args = ("tail/f32/interleaved"), setup = setup)]
#[bench::on_the_fly_f32_half_split(args = ("on_the_fly/f32/half_split"), setup = setup)]
#[bench::fill_table_f32(args = ("fill_table/f32"), setup = setup)]
fn call(mut p: Box<dyn Prepared>) -> Box<dyn Prepared> {
    black_box(&mut p).run();
    // Returned, so that freeing the case's buffers happens outside the counted function.
    p
}

library_benchmark_group!(name = rope, benchmarks = [call]);

main!(library_benchmark_groups = rope);
