//! The panic handler of `no_std` builds.
//!
//! A static (or shared) library is a final artifact: rustc refuses to build one without a
//! `#[panic_handler]` ("`#[panic_handler]` function required, but not found"), and a C
//! program cannot provide one. So every build without `std` carries this handler. The
//! library checks every input before use and is written not to panic; reaching the
//! handler is a bug. It stops the core with a permanent undefined-instruction trap (Arm:
//! `udf`, which a Cortex-M firmware sees as a HardFault/UsageFault it can log and reset
//! from), or spins where no trap instruction is known. It never returns into C.

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        #[cfg(any(target_arch = "arm", target_arch = "aarch64"))]
        // SAFETY: `udf` only raises the undefined-instruction exception; it touches no
        // memory and no register the compiler relies on.
        unsafe {
            core::arch::asm!("udf #0", options(nomem, nostack))
        };
        core::hint::spin_loop();
    }
}
