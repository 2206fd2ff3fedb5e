//! The statistics of the regression gates (issue 14).
//!
//! ```text
//! gate-stat time SAMPLES [--threshold T] [--margin M] [--confidence C] [--undecided]
//! gate-stat instr BASELINE.json CANDIDATE.json [--threshold T] [--exact]
//! ```
//!
//! **time** (`scripts/bench-gate.sh`): SAMPLES has one line per pair, `CASE A_NS B_NS`: a
//! sample of the baseline (A) and one of the candidate (B) taken back to back. For each
//! case it takes the ratio B/A of every pair, their median, and the distribution-free
//! confidence interval of that median: the order statistics `r(k)` and `r(n+1-k)` of the n
//! sorted ratios, with k the largest such that `P(Binomial(n, 1/2) < k) <= (1 - C) / 2`
//! (the interval a sign test inverts; it assumes only that pairs are independent, not that
//! times are normal, and an outlier pair moves it by one rank at most). Verdicts:
//! - `REGRESSION` if the interval lies above `1 + M` (its lower bound `> 1 + M`): the
//!   candidate is slower by more than M with confidence C;
//! - `ok` if it does not, and its upper bound is below `1 + T`: not a slowdown of T;
//! - `undecided` otherwise (the interval is wider than `T - M` around a point that could
//!   be a slowdown of T): more pairs would settle it. With `--undecided`, only those names
//!   are printed (one a line), for the script to take more pairs of them.
//!
//! Defaults: T = 0.05, M = T / 2, C = 0.95. A true slowdown of T is flagged as long as
//! the interval's half-width stays under T - M; a true ratio of 1 is flagged only if the
//! interval misses it by M, which drift shared by both halves of a pair cannot cause.
//!
//! **instr** (`scripts/instr-gate.sh`): the JSON lines of two gungraun runs
//! (`--output-format=json`); compares each benchmark's Callgrind instructions (`Ir`) and
//! estimated cycles. `REGRESSION` if either grew by more than T (default 0.02); with
//! `--exact`, any difference at all fails (the determinism check).
//!
//! Exit status: 0 pass, 1 regression, 2 bad arguments or input.

use std::collections::BTreeMap;
use std::process::ExitCode;

const USAGE: &str = "usage: gate-stat time SAMPLES [--threshold T] [--margin M] [--confidence C] [--undecided]\n       gate-stat instr BASELINE.json CANDIDATE.json [--threshold T] [--exact]";

/// Outcome of a gate: pass (`false`) or regression (`true`).
type Verdict = bool;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("time") => time(&args[1..]),
        Some("instr") => instr(&args[1..]),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(false) => ExitCode::SUCCESS,
        Ok(true) => ExitCode::from(1),
        Err(e) => {
            eprintln!("gate-stat: {e}");
            ExitCode::from(2)
        }
    }
}

/// Positional arguments and `--name value` / `--flag` options.
struct Args {
    positional: Vec<String>,
    options: BTreeMap<String, Option<String>>,
}

fn parse(args: &[String], with_value: &[&str], flags: &[&str]) -> Result<Args, String> {
    let mut out = Args { positional: Vec::new(), options: BTreeMap::new() };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(name) = a.strip_prefix("--") {
            if with_value.contains(&name) {
                let v = it.next().ok_or_else(|| format!("--{name} needs a value\n{USAGE}"))?;
                out.options.insert(name.to_string(), Some(v.clone()));
            } else if flags.contains(&name) {
                out.options.insert(name.to_string(), None);
            } else {
                return Err(format!("unknown option --{name}\n{USAGE}"));
            }
        } else {
            out.positional.push(a.clone());
        }
    }
    Ok(out)
}

impl Args {
    /// The option `name` as a number in `range`, or `default`.
    fn number(&self, name: &str, default: f64, range: (f64, f64)) -> Result<f64, String> {
        match self.options.get(name) {
            Some(Some(s)) => match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v > range.0 && v < range.1 => Ok(v),
                _ => Err(format!("--{name} {s}: not a number in ({}, {})", range.0, range.1)),
            },
            _ => Ok(default),
        }
    }

    fn flag(&self, name: &str) -> bool {
        self.options.contains_key(name)
    }
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
}

// ---- time ----

/// The median of sorted `v` (not empty).
fn median(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `ln C(n, i)`.
fn ln_choose(n: usize, i: usize) -> f64 {
    (1..=i).map(|j| ((n - i + j) as f64 / j as f64).ln()).sum()
}

/// The 1-based rank k of the lower bound of the distribution-free confidence interval of
/// the median of n values at `confidence` (`[r(k), r(n+1-k)]`), and the interval's exact
/// coverage; `None` if n is too small for any interval to reach it.
fn median_ci_rank(n: usize, confidence: f64) -> Option<(usize, f64)> {
    let tail = (1.0 - confidence) / 2.0;
    // P(X <= j) for X ~ Binomial(n, 1/2), accumulated in j.
    let mut cdf = 0.0;
    let mut best = None;
    for j in 0..n.div_ceil(2) {
        cdf += (ln_choose(n, j) - n as f64 * std::f64::consts::LN_2).exp();
        if cdf <= tail {
            // P(X < j + 1) <= tail: k = j + 1 qualifies.
            best = Some((j + 1, 1.0 - 2.0 * cdf));
        } else {
            break;
        }
    }
    best
}

struct TimeRow {
    name: String,
    pairs: usize,
    a: f64,
    b: f64,
    ratio: f64,
    ci: Option<(f64, f64, f64)>,
    verdict: &'static str,
}

fn time(args: &[String]) -> Result<Verdict, String> {
    let a = parse(args, &["threshold", "margin", "confidence"], &["undecided"])?;
    let [path] = a.positional.as_slice() else { return Err(USAGE.to_string()) };
    let threshold = a.number("threshold", 0.05, (0.0, 10.0))?;
    let margin = a.number("margin", threshold / 2.0, (0.0, 10.0))?;
    let confidence = a.number("confidence", 0.95, (0.0, 1.0))?;
    if margin > threshold {
        return Err(format!("--margin {margin} is above --threshold {threshold}: a slowdown of the threshold could never be flagged"));
    }

    // Pairs per case, in the order cases first appear.
    let mut order: Vec<String> = Vec::new();
    let mut pairs: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (i, line) in read(path)?.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("{path}:{}: expected 'CASE A_NS B_NS' (times above 0), got '{line}'", i + 1);
        let [name, x, y] = f.as_slice() else { return Err(bad()) };
        let (x, y) = match (x.parse::<f64>(), y.parse::<f64>()) {
            (Ok(x), Ok(y)) if x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite() => (x, y),
            _ => return Err(bad()),
        };
        if !pairs.contains_key(*name) {
            order.push(name.to_string());
        }
        pairs.entry(name.to_string()).or_default().push((x, y));
    }
    if order.is_empty() {
        return Err(format!("{path}: no samples"));
    }

    let mut rows = Vec::new();
    for name in &order {
        let p = &pairs[name];
        let mut ratios: Vec<f64> = p.iter().map(|(x, y)| y / x).collect();
        ratios.sort_by(f64::total_cmp);
        let mut xa: Vec<f64> = p.iter().map(|q| q.0).collect();
        let mut xb: Vec<f64> = p.iter().map(|q| q.1).collect();
        xa.sort_by(f64::total_cmp);
        xb.sort_by(f64::total_cmp);
        let n = ratios.len();
        let ci = median_ci_rank(n, confidence).map(|(k, cov)| (ratios[k - 1], ratios[n - k], cov));
        let verdict = match ci {
            Some((lo, _, _)) if lo > 1.0 + margin => "REGRESSION",
            Some((_, hi, _)) if hi < 1.0 + threshold => "ok",
            _ => "undecided",
        };
        rows.push(TimeRow {
            name: name.clone(),
            pairs: n,
            a: median(&xa),
            b: median(&xb),
            ratio: median(&ratios),
            ci,
            verdict,
        });
    }

    if a.flag("undecided") {
        for r in rows.iter().filter(|r| r.verdict == "undecided") {
            println!("{}", r.name);
        }
        return Ok(false);
    }

    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let pct = |r: f64| format!("{:+.2}%", 100.0 * (r - 1.0));
    println!(
        "{:<width$}  {:>5}  {:>12}  {:>12}  {:>8}  {:>19}  verdict",
        "case",
        "pairs",
        "A ns/call",
        "B ns/call",
        "B/A",
        format!("{:.0}% CI of B/A", 100.0 * confidence)
    );
    for r in &rows {
        let ci = match r.ci {
            Some((lo, hi, _)) => format!("[{}, {}]", pct(lo), pct(hi)),
            None => "too few pairs".to_string(),
        };
        println!(
            "{:<width$}  {:>5}  {:>12.1}  {:>12.1}  {:>8}  {:>19}  {}",
            r.name,
            r.pairs,
            r.a,
            r.b,
            pct(r.ratio),
            ci,
            r.verdict
        );
    }
    let regressed: Vec<&str> =
        rows.iter().filter(|r| r.verdict == "REGRESSION").map(|r| r.name.as_str()).collect();
    let undecided = rows.iter().filter(|r| r.verdict == "undecided").count();
    println!(
        "rule: REGRESSION when the {:.0}% CI of the median B/A lies above {}; ok when it also stays below {}",
        100.0 * confidence,
        pct(1.0 + margin),
        pct(1.0 + threshold)
    );
    if undecided > 0 {
        println!(
            "{undecided} undecided (CI too wide to rule out a {} slowdown): not failed; take more pairs",
            pct(1.0 + threshold)
        );
    }
    if regressed.is_empty() {
        println!(
            "PASS: no case slower by more than {} with {:.0}% confidence",
            pct(1.0 + margin),
            100.0 * confidence
        );
        Ok(false)
    } else {
        println!("FAIL: {} of {} cases slower: {}", regressed.len(), rows.len(), regressed.join(", "));
        Ok(true)
    }
}

// ---- instr ----

/// (Ir, estimated cycles) of every benchmark of a gungraun JSON-lines run, by id.
fn counts(path: &str) -> Result<Vec<(String, u64, u64)>, String> {
    let mut out = Vec::new();
    for (i, line) in read(path)?.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{path}:{}", i + 1);
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}: not JSON: {e}", at()))?;
        let id = v["id"].as_str().ok_or_else(|| format!("{}: no benchmark id", at()))?;
        let profiles = v["profiles"].as_array().ok_or_else(|| format!("{}: no profiles", at()))?;
        let cg = profiles
            .iter()
            .find(|p| p["tool"] == "Callgrind")
            .ok_or_else(|| format!("{}: no Callgrind profile", at()))?;
        let metric = |m: &str| {
            cg["data"]["total"]["metrics"][m]["values"]["new"]
                .as_u64()
                .ok_or_else(|| format!("{}: {id}: no {m} count (was the cache simulation off?)", at()))
        };
        out.push((id.to_string(), metric("Ir")?, metric("EstimatedCycles")?));
    }
    if out.is_empty() {
        return Err(format!("{path}: no benchmarks"));
    }
    Ok(out)
}

fn instr(args: &[String]) -> Result<Verdict, String> {
    let a = parse(args, &["threshold"], &["exact"])?;
    let [base, cand] = a.positional.as_slice() else { return Err(USAGE.to_string()) };
    let threshold = a.number("threshold", 0.02, (0.0, 10.0))?;
    let exact = a.flag("exact");
    let base = counts(base)?;
    let cand = counts(cand)?;
    let width = cand.iter().map(|c| c.0.len()).max().unwrap_or(4).max(4);
    println!(
        "{:<width$}  {:>10}  {:>10}  {:>8}  {:>10}  {:>10}  {:>8}  verdict",
        "benchmark", "A instr", "B instr", "change", "A cycles", "B cycles", "change"
    );
    let change = |x: u64, y: u64| (y as f64 - x as f64) / (x as f64).max(1.0);
    let mut failed = Vec::new();
    for (id, ir, cyc) in &cand {
        let Some((_, ir0, cyc0)) = base.iter().find(|b| &b.0 == id) else {
            println!(
                "{id:<width$}  {:>10}  {ir:>10}  {:>8}  {:>10}  {cyc:>10}  {:>8}  new (not in A)",
                "-", "", "-", ""
            );
            continue;
        };
        let (di, dc) = (change(*ir0, *ir), change(*cyc0, *cyc));
        let bad = if exact { ir != ir0 || cyc != cyc0 } else { di > threshold || dc > threshold };
        let verdict = match (bad, exact) {
            (true, true) => "DIFFERENT",
            (true, false) => "REGRESSION",
            (false, _) => "ok",
        };
        if bad {
            failed.push(id.as_str());
        }
        println!(
            "{id:<width$}  {ir0:>10}  {ir:>10}  {:>+7.2}%  {cyc0:>10}  {cyc:>10}  {:>+7.2}%  {verdict}",
            100.0 * di,
            100.0 * dc
        );
    }
    for (id, ..) in base.iter().filter(|b| !cand.iter().any(|c| c.0 == b.0)) {
        println!("{id:<width$}  (only in A: not compared)");
    }
    let rule = if exact {
        "any difference".to_string()
    } else {
        format!("instructions or estimated cycles up by more than {:.1}%", 100.0 * threshold)
    };
    if failed.is_empty() {
        println!("PASS: no benchmark with {rule}");
        Ok(false)
    } else {
        println!("FAIL: {} of {} benchmarks with {rule}: {}", failed.len(), cand.len(), failed.join(", "));
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_ci_ranks_match_tables() {
        // Sign-test intervals of the median at 95% (e.g. Conover, Practical Nonparametric
        // Statistics, table A3): n = 6 is the smallest with one; k = 10 for n = 30.
        assert_eq!(median_ci_rank(5, 0.95), None);
        assert_eq!(median_ci_rank(6, 0.95).map(|r| r.0), Some(1));
        assert_eq!(median_ci_rank(20, 0.95).map(|r| r.0), Some(6));
        assert_eq!(median_ci_rank(30, 0.95).map(|r| r.0), Some(10));
        let (k, cov) = median_ci_rank(40, 0.95).unwrap();
        assert_eq!(k, 14);
        assert!((0.95..0.97).contains(&cov), "{cov}");
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&[1.0, 2.0, 4.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 8.0]), 3.0);
    }
}
