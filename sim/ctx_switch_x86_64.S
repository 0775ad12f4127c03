/* Coroutine switch for x86-64 (System V ABI).
 *
 * void rnicsim_ctx_switch(void **save_sp, void *new_sp)
 *   Pushes the callee-saved registers (rbp rbx r12-r15) on the current
 *   stack, stores the stack pointer in *save_sp, loads new_sp and pops the
 *   same registers from there.  Caller-saved registers need no saving: the
 *   call itself tells the compiler they are clobbered.  The x87 control
 *   word and MXCSR are not switched: nothing in rnicsim changes them.
 *
 * rnicsim_ctx_start: first "return address" of a new process; calls
 *   r13(r12) = rnicsim_proc_entry(proc), which never returns. */
    .text
    .globl rnicsim_ctx_switch
    .type rnicsim_ctx_switch, @function
rnicsim_ctx_switch:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size rnicsim_ctx_switch, .-rnicsim_ctx_switch

    .globl rnicsim_ctx_start
    .type rnicsim_ctx_start, @function
rnicsim_ctx_start:
    .cfi_startproc
    .cfi_undefined rip
    xorl %ebp, %ebp
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size rnicsim_ctx_start, .-rnicsim_ctx_start

    .section .note.GNU-stack,"",@progbits
