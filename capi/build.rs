//! Build script of `librope_kernels`: the shared library's SONAME, and the test-only cfg.

fn main() {
    // src/testing.rs (`rope_test_fault`) is compiled only with this cfg, which the test
    // packages capi/testing and capi/rlib set; never in this package.
    println!("cargo::rustc-check-cfg=cfg(rope_capi_testing)");
    // ELF SONAME: programs record `librope_kernels.so.0`, and scripts/install-capi.sh
    // installs the usual librope_kernels.so -> .so.0 -> .so.0.1.0 links. The 0 changes
    // with every incompatible change of the ABI (as `ROPE_ABI_VERSION`, now 1, does).
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if matches!(os.as_str(), "linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly") {
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,librope_kernels.so.0");
    }
}
