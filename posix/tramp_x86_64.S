/* Trampolines the signal handlers of guard.c send a program's thread
 * through: the interrupted code "calls" rnicsim_tramp_c(regs) at the
 * point it was interrupted and continues afterwards with every register,
 * the flags and the whole x87/SSE/AVX state as they were -- except the
 * outputs of an emulated rdtsc / rdtscp (rax, rdx, rcx).
 *
 * The handler leaves, on the program's stack below its 128-byte red zone,
 * the address to continue at, and points rsp at it and rip at one of the
 * entries below (a `call` in effect).  `ret $128` returns there and puts
 * rsp back where it was.
 *
 * rnicsim_tramp_c receives a pointer to the saved registers, laid out as
 * struct tramp_regs in guard.c:
 *   r15 r14 r13 r12 r11 r10 r9 r8 rdi rsi rbp rbx rdx rcx rax rflags kind rip
 * The vector state is saved with XSAVE into a 64-byte aligned area of
 * rnicsim_xsave_bytes (CPUID leaf 0xD) below them. */
	.text

	.globl	rnicsim_tramp_preempt
	.type	rnicsim_tramp_preempt, @function
rnicsim_tramp_preempt:
	pushq	$0
	jmp	tramp_common
	.size	rnicsim_tramp_preempt, .-rnicsim_tramp_preempt

	.globl	rnicsim_tramp_rdtsc
	.type	rnicsim_tramp_rdtsc, @function
rnicsim_tramp_rdtsc:
	pushq	$1
	jmp	tramp_common
	.size	rnicsim_tramp_rdtsc, .-rnicsim_tramp_rdtsc

	.globl	rnicsim_tramp_rdtscp
	.type	rnicsim_tramp_rdtscp, @function
rnicsim_tramp_rdtscp:
	pushq	$2
	jmp	tramp_common
	.size	rnicsim_tramp_rdtscp, .-rnicsim_tramp_rdtscp

	.type	tramp_common, @function
tramp_common:
	pushfq
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	pushq	%rbx
	pushq	%rbp
	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	cld
	movq	%rsp, %rbx			/* the saved registers; rbx survives the call */
	subq	rnicsim_xsave_bytes(%rip), %rsp
	andq	$-64, %rsp
	xorl	%eax, %eax			/* XSAVE header (bytes 512..575) must start zeroed */
	movq	%rax, 512(%rsp)
	movq	%rax, 520(%rsp)
	movq	%rax, 528(%rsp)
	movq	%rax, 536(%rsp)
	movq	%rax, 544(%rsp)
	movq	%rax, 552(%rsp)
	movq	%rax, 560(%rsp)
	movq	%rax, 568(%rsp)
	movl	$-1, %eax
	movl	$-1, %edx
	xsave64	(%rsp)
	movq	%rbx, %rdi
	call	rnicsim_tramp_c
	movl	$-1, %eax
	movl	$-1, %edx
	xrstor64 (%rsp)
	movq	%rbx, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	popq	%rbp
	popq	%rbx
	popq	%rdx
	popq	%rcx
	popq	%rax
	popfq
	leaq	8(%rsp), %rsp			/* the kind (lea: the flags stay as popped) */
	ret	$128
	.size	tramp_common, .-tramp_common

	.section .note.GNU-stack,"",@progbits
