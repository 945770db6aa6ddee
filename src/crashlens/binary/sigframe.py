"""The x86-64 Linux signal frame, as the kernel writes it on the stack of a thread it delivers a
signal to (arch/x86/include/asm/sigframe.h, arch/x86/include/uapi/asm/sigcontext.h): shared by
the crash-site recovery (binary/crashsite.py, which looks for the frame a re-raising handler
left) and the unwinder (binary/unwind.py, which steps through __restore_rt).

    rt_sigframe   +0    pretcode (the handler's return address: sa_restorer, libc's __restore_rt)
                  +8    struct ucontext: uc_flags, uc_link, uc_stack (24 bytes)
                  +48   uc_mcontext = struct sigcontext: r8 r9 r10 r11 r12 r13 r14 r15 rdi rsi
                        rbp rbx rdx rax rcx rsp rip eflags (18 words), cs gs fs ss (u16),
                        err, trapno, oldmask, cr2, fpstate, reserved[8]
                  +304  uc_sigmask
                  +312  siginfo_t (128 bytes)

When the handler returns, `ret` pops pretcode, so __restore_rt runs with the stack pointer at
the ucontext: the sigcontext is then at sp + UC_MCONTEXT.
"""

from __future__ import annotations

__all__ = ["RESTORE_RT", "SIGCONTEXT_REGS", "SIGCONTEXT_GREGS", "UC_MCONTEXT", "FRAME_MCONTEXT",
           "FRAME_SIGINFO", "FRAME_SIZE", "USER_CS", "USER_DS"]

# __restore_rt, the code a signal handler returns into: rt_sigreturn (syscall 15)
RESTORE_RT = (bytes.fromhex("48c7c00f0000000f05"),   # glibc: mov $0xf,%rax; syscall
              bytes.fromhex("b80f0000000f05"))       # mov $0xf,%eax; syscall (musl, others)

# struct sigcontext's general registers, in order: the 17 an unwinder restores ...
SIGCONTEXT_REGS = ("r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rdi", "rsi", "rbp", "rbx",
                   "rdx", "rax", "rcx", "rsp", "rip")
# ... and the 18 words up to the segment selectors (eflags last)
SIGCONTEXT_GREGS = SIGCONTEXT_REGS + ("eflags",)

UC_MCONTEXT = 40                        # offsetof(struct ucontext, uc_mcontext)
FRAME_MCONTEXT = 8 + UC_MCONTEXT        # from the start of rt_sigframe (after pretcode)
FRAME_SIGINFO, FRAME_SIZE = 312, 440    # siginfo_t's offset; the frame up to the end of siginfo

USER_CS = 0x33                          # __USER_CS, the 64-bit user code segment selector
USER_DS = 0x2B                          # __USER_DS
