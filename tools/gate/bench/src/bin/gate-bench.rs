//! The timing sampler of `scripts/bench-gate.sh`: one process call is one sample of one
//! case, so that the script can alternate the baseline's and the candidate's binaries
//! sample by sample.
//!
//! ```text
//! gate-bench list                          the case names, one per line
//! gate-bench tier                          the tier the samples run on
//! gate-bench calibrate CASE TARGET_US      iterations for a batch of about TARGET_US µs
//! gate-bench sample CASE ITERS BATCHES     one sample: ns per call, the fastest of BATCHES
//!                                          batches of ITERS calls, after one warm-up batch
//! gate-bench checksum CASE [CALLS]         a hash of the output bits after CALLS calls (3):
//!                                          two builds that compute the same bits agree
//! ```
//!
//! Time is the calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`; wall-clock time with
//! `ROPE_GATE_CLOCK=wall`, and on non-Unix systems): time the process spends descheduled
//! while other processes run is not counted, which on a busy machine is most of the noise.
//! The fastest of many short batches drops the rest of the disturbances (caches emptied by
//! a context switch, an interrupt): the gate compares the undisturbed speed of A and B.
//!
//! The tier: `ROPE_GATE_TIER` (e.g. `avx2`), else the best this CPU has. Exit status 2
//! with a message on bad arguments.

use std::process::ExitCode;
use std::time::Instant;

use rope_gate_bench::{find, tier_from_env, Prepared, CASES};

const USAGE: &str =
    "usage: gate-bench list | tier | calibrate CASE TARGET_US | sample CASE ITERS BATCHES | checksum CASE [CALLS]";

fn number(s: Option<&String>, what: &str) -> Result<u64, String> {
    let s = s.ok_or_else(|| format!("missing {what}\n{USAGE}"))?;
    match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{what} must be a whole number above 0, not '{s}'")),
    }
}

fn prepare(name: Option<&String>) -> Result<Box<dyn Prepared>, String> {
    let name = name.ok_or_else(|| format!("missing CASE\n{USAGE}"))?;
    let case = find(name).ok_or_else(|| format!("no case '{name}' (gate-bench list names them)"))?;
    case.prepare(tier_from_env()?)
}

/// Which clock a sample reads.
#[derive(Clone, Copy)]
enum Clock {
    Wall,
    #[cfg(unix)]
    ThreadCpu,
}

impl Clock {
    fn from_env() -> Result<Clock, String> {
        match std::env::var("ROPE_GATE_CLOCK").as_deref() {
            Ok("wall") => Ok(Clock::Wall),
            #[cfg(unix)]
            Ok("cpu") | Err(_) => Ok(Clock::ThreadCpu),
            #[cfg(not(unix))]
            Err(_) => Ok(Clock::Wall),
            Ok(other) => Err(format!("ROPE_GATE_CLOCK={other}: expected 'cpu' or 'wall'")),
        }
    }

    /// Nanoseconds since an arbitrary origin fixed for the process.
    fn now(self, origin: Instant) -> f64 {
        match self {
            Clock::Wall => origin.elapsed().as_nanos() as f64,
            #[cfg(unix)]
            Clock::ThreadCpu => {
                let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID exists
                // on every Unix this builds for (Linux, the BSDs, macOS).
                let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
                assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
                ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
            }
        }
    }
}

/// Nanoseconds per call over `iters` calls.
fn batch(p: &mut dyn Prepared, iters: u64, clock: Clock, origin: Instant) -> f64 {
    let t = clock.now(origin);
    for _ in 0..iters {
        p.run();
    }
    (clock.now(origin) - t) / iters as f64
}

fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("list") => {
            for c in CASES {
                println!("{}", c.name);
            }
        }
        Some("tier") => println!("{}", tier_from_env()?),
        Some("calibrate") => {
            let (clock, origin) = (Clock::from_env()?, Instant::now());
            let mut p = prepare(args.get(1))?;
            let target_ns = number(args.get(2), "TARGET_US")? as f64 * 1e3;
            // Warm up, then time batches of growing size until one takes a tenth of the target.
            batch(p.as_mut(), 10, clock, origin);
            let mut iters = 1u64;
            loop {
                let ns = batch(p.as_mut(), iters, clock, origin) * iters as f64;
                if ns >= target_ns / 10.0 || iters >= 1 << 40 {
                    let per_call = ns / iters as f64;
                    println!("{}", ((target_ns / per_call.max(0.1)) as u64).max(1));
                    break;
                }
                iters *= 2;
            }
        }
        Some("sample") => {
            let (clock, origin) = (Clock::from_env()?, Instant::now());
            let mut p = prepare(args.get(1))?;
            let iters = number(args.get(2), "ITERS")?;
            let batches = number(args.get(3), "BATCHES")?;
            batch(p.as_mut(), iters, clock, origin);
            let fastest =
                (0..batches).map(|_| batch(p.as_mut(), iters, clock, origin)).fold(f64::INFINITY, f64::min);
            println!("{fastest:.3}");
        }
        Some("checksum") => {
            let mut p = prepare(args.get(1))?;
            let calls = if args.len() > 2 { number(args.get(2), "CALLS")? } else { 3 };
            for _ in 0..calls {
                p.run();
            }
            println!("{:016x}", p.checksum());
        }
        _ => return Err(USAGE.to_string()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gate-bench: {e}");
            ExitCode::from(2)
        }
    }
}
