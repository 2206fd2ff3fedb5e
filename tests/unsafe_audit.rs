//! House rule (issue 7, STYLE.md): every `unsafe {}` block and `unsafe impl` has a
//! `// SAFETY:` comment in the comment lines just above it (attributes may stand between),
//! and every `unsafe fn` a `# Safety` section in its doc comment (for a method of a trait
//! impl, on the trait's declaration). Checked over the sources
//! of the crate (and of `capi/` when present), so new kernels cannot skip it.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a line: without a trailing `//` comment and string literals (roughly: enough
/// for this crate's sources).
fn code(line: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut prev = ' ';
    let chars: Vec<char> = line.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !in_str && c == '/' && chars.get(i + 1) == Some(&'/') {
            break;
        }
        if c == '"' && prev != '\\' {
            in_str = !in_str;
        } else if !in_str {
            out.push(c);
        }
        prev = c;
    }
    out
}

/// The comment and attribute lines directly above line `i` (nearest first).
fn comments_above(lines: &[&str], i: usize) -> Vec<String> {
    let mut v = Vec::new();
    for l in lines[..i].iter().rev() {
        let t = l.trim_start();
        if t.starts_with("//") || t.starts_with("#[") || t.starts_with("#![") {
            v.push(t.to_string());
        } else {
            break;
        }
    }
    v
}

/// Whether line `i` lies in an `impl Trait for Type` block (by indentation): the `# Safety`
/// section of a trait method is on the trait's declaration, as clippy's
/// `missing_safety_doc` also has it.
fn in_trait_impl(lines: &[&str], i: usize) -> bool {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let n = indent(lines[i]);
    for l in lines[..i].iter().rev() {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with("//") || t.starts_with("#[") || indent(l) >= n {
            continue;
        }
        let c = code(t);
        return (c.starts_with("impl") || c.starts_with("unsafe impl")) && c.contains(" for ");
    }
    false
}

/// A `// SAFETY:` comment (also `// SAFETY (scope):`).
fn is_safety_comment(l: &str) -> bool {
    l.starts_with("//") && l.trim_start_matches('/').trim_start().starts_with("SAFETY")
}

/// Whether `code` declares an unsafe function with a name (not an `unsafe fn(...)` type).
fn declares_unsafe_fn(code: &str) -> bool {
    let mut rest = code;
    while let Some(p) = rest.find("unsafe ") {
        let after = rest[p + 7..].trim_start();
        // `extern "C"` (string literals are already removed from code lines).
        let after = after
            .strip_prefix("extern")
            .map_or(after, |a| a.trim_start().trim_start_matches("\"C\"").trim_start());
        if let Some(name) = after.strip_prefix("fn ") {
            if name.starts_with(|c: char| c.is_alphabetic() || c == '_') {
                return true;
            }
        }
        rest = &rest[p + 7..];
    }
    false
}

#[test]
fn every_unsafe_block_has_a_safety_comment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "capi/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(files.len() > 10, "no sources found under {}", root.display());
    let mut missing = Vec::new();
    let (mut blocks, mut fns) = (0, 0);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let c = code(line);
            let at = format!("{}:{}", f.strip_prefix(root).unwrap().display(), i + 1);
            if c.contains("unsafe {") || c.contains("unsafe{") || c.contains("unsafe impl") {
                blocks += 1;
                if !comments_above(&lines, i).iter().any(|l| is_safety_comment(l)) {
                    missing.push(format!(
                        "{at}: unsafe block without a `// SAFETY:` comment above: {}",
                        line.trim()
                    ));
                }
            }
            if declares_unsafe_fn(&c) && !in_trait_impl(&lines, i) {
                fns += 1;
                if !comments_above(&lines, i).iter().any(|l| l.starts_with("///") && l.contains("# Safety")) {
                    missing
                        .push(format!("{at}: unsafe fn without a `# Safety` doc section: {}", line.trim()));
                }
            }
        }
    }
    eprintln!("{} files: {blocks} unsafe blocks, {fns} unsafe fns", files.len());
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The audit itself can fail.
#[test]
fn audit_detects_a_missing_comment() {
    let src = ["fn f(p: *const u8) -> u8 {", "    // A comment, but not the one.", "    unsafe { *p }", "}"];
    assert!(!comments_above(&src, 2).iter().any(|l| is_safety_comment(l)));
    let ok = ["    // SAFETY: p is valid.", "    #[allow(unused_unsafe)]", "    unsafe { *p }"];
    assert!(comments_above(&ok, 2).iter().any(|l| is_safety_comment(l)));
    let imp =
        ["impl Simd for Avx2 {", "    #[inline(always)]", "    unsafe fn load(self, p: *const f32) {", "}"];
    assert!(in_trait_impl(&imp, 2));
    let inherent = ["impl Avx2 {", "    unsafe fn load(self, p: *const f32) {", "}"];
    assert!(!in_trait_impl(&inherent, 1));
    assert!(declares_unsafe_fn("pub(crate) unsafe fn rotate<T>(a: &A) {"));
    assert!(declares_unsafe_fn("pub unsafe extern \"C\" fn rope_apply("));
    assert!(!declares_unsafe_fn("pub(crate) type RotateFn<T> = unsafe fn(&RotateArgs<'_, T>);"));
    assert!(declares_unsafe_fn(&code("pub unsafe extern \"C\" fn rope_apply(")));
    assert!(!code(r#"let s = "unsafe { x }"; // unsafe {"#).contains("unsafe {"));
}
