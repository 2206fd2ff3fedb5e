/* board.h: what board.c and stack.c share (one program on the emulated Cortex-M4F). */
#ifndef ROPE_BOARD_H
#define ROPE_BOARD_H

#include <stddef.h>

typedef void (*job_fn)(void);

/* The bytes below the stack pointer that stack_used paints (RAM: mps2-an386.ld). */
#define STACK_PAINT_BYTES (192u * 1024u)

/* board.c: paints STACK_PAINT_BYTES below the stack pointer, runs `job`, returns how many bytes below
 * that pointer were written (the job's frames and everything it called). */
size_t stack_used(job_fn job);

/* stack.c: prints the `STACK <function> <bytes>` table of every C entry point; returns the
 * number of failures (a call that did not return its expected status, and with
 * ROPE_STACK_ENFORCE_ALL=1 every call over its limit). */
int stack_entry_points(void);

#endif
