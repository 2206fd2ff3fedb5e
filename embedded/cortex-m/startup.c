/*
 * Reset and fault handling of the bare-metal runner for QEMU's mps2-an386 (Cortex-M4F):
 * the vector table, FPU enable, .bss zeroing, semihosting stdio (newlib's librdimon), and
 * the exit status returned to QEMU. Linked with `--specs=rdimon.specs -nostartfiles`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern uint32_t __stack_top, __bss_start__, __bss_end__;
extern void initialise_monitor_handles(void);
extern int main(void);

void Reset_Handler(void);
void c_start(void);

static void fault(void) {
    /* A HardFault, or a panic of the library (`udf`, see capi/src/panic.rs). */
    printf("BOARD FAULT: exception taken (HardFault/UsageFault)\n");
    exit(99);
}

__attribute__((section(".vectors"), used)) static const void *const vectors[16] = {
    &__stack_top, Reset_Handler, fault, fault, fault, fault, fault, 0, 0, 0, 0, fault, fault, 0, fault, fault,
};

/* The FPU must be enabled (CPACR CP10/CP11 full access) before any FP instruction, so the
 * first instructions are assembly; everything else runs from c_start. */
__attribute__((naked)) void Reset_Handler(void) {
    __asm volatile(
        "ldr r0, =0xE000ED88\n"
        "ldr r1, [r0]\n"
        "orr r1, r1, #(0xF << 20)\n"
        "str r1, [r0]\n"
        "dsb\n"
        "isb\n"
        "b c_start\n");
}

void c_start(void) {
    for (volatile uint32_t *p = &__bss_start__; p < &__bss_end__; p++) *p = 0;
    initialise_monitor_handles();
    exit(main());
}
