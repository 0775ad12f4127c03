/* Coroutine switch for AArch64 (AAPCS64).
 *
 * void rnicsim_ctx_switch(void **save_sp, void *new_sp)
 *   Saves the callee-saved registers x19-x28, fp (x29), lr (x30) and the
 *   low halves of v8-v15 (d8-d15) in a 176-byte frame on the current stack,
 *   stores sp in *save_sp, switches to new_sp and restores the same frame
 *   from there; `ret` jumps to the restored lr.
 *
 * rnicsim_ctx_start: lr of a new process's first frame; calls x20(x19) =
 *   rnicsim_proc_entry(proc), which never returns.
 *
 * Not exercised by CI (the CI machine is x86-64); configure with
 * -DRNICSIM_UCONTEXT=ON if it misbehaves. */
    .text
    .globl rnicsim_ctx_switch
    .type rnicsim_ctx_switch, %function
rnicsim_ctx_switch:
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mov x2, sp
    str x2, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #176
    ret
    .size rnicsim_ctx_switch, .-rnicsim_ctx_switch

    .globl rnicsim_ctx_start
    .type rnicsim_ctx_start, %function
rnicsim_ctx_start:
    mov x29, #0
    mov x0, x19
    blr x20
    brk #0
    .size rnicsim_ctx_start, .-rnicsim_ctx_start

    .section .note.GNU-stack,"",%progbits
