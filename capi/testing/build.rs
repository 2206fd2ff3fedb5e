//! Build script of the test packages capi/testing and capi/rlib: compiles the test hook
//! `rope_test_fault` (src/testing.rs) into them.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(rope_capi_testing)");
    println!("cargo::rustc-cfg=rope_capi_testing");
}
