/* Internal: x86-64 trampolines that bind a list of functions late, the one
 * way the interceptor's core (lazy_curl.c: libcurl) and the NVRTC stand-in
 * (standin/standin.c: the real NVRTC) write them. Macros only, no code of
 * the library: the stand-in links libc alone.
 *
 * Each function of the list is an entry that puts its index in r11 and
 * jumps to the common part. The common part jumps to targets[index] once it
 * is known; otherwise it saves every register an argument can be in (rax:
 * a variadic call's vector count; rdi, rsi, rdx, rcx, r8, r9; xmm0-7),
 * calls resolve(index), which returns the function (and stores it in
 * targets), restores them and jumps there. So the function runs with the
 * caller's registers and stack untouched. r10 and r11 are scratch at a
 * call in the x86-64 ABI.
 *
 * Use, with an X-macro list NAMES and a counter symbol "c_i":
 *   #define ENTRY(n) PROGCACHE__TRAMPOLINE_ENTRY(n, "c_i", "c_common", "")
 *   __asm__(".text\n.set c_i, 0\n" NAMES(ENTRY)
 *           PROGCACHE__TRAMPOLINE_COMMON("c_common", "targets", "resolve"));
 * where targets is an array of pointers (hidden) and resolve a function
 * taking the index (hidden, marked used). extra is assembler text placed
 * after .globl (".hidden n\n" keeps an entry inside its object). */
#ifndef PROGCACHE_INTERCEPT_TRAMPOLINE_H
#define PROGCACHE_INTERCEPT_TRAMPOLINE_H

#define PROGCACHE__TRAMPOLINE_ENTRY(n, counter, common, extra)                                  \
    ".globl " #n "\n" extra ".type " #n ", @function\n.balign 16\n" #n ":\n endbr64\n"           \
    " mov $" counter ", %r11d\n jmp " common "\n.size " #n ", .-" #n "\n"                       \
    ".set " counter ", " counter " + 1\n"

#define PROGCACHE__TRAMPOLINE_COMMON(common, targets, resolve)                                  \
    ".balign 16\n" common ":\n"                                                                 \
    " lea " targets "(%rip), %r10\n"                                                            \
    " mov (%r10,%r11,8), %r10\n"                                                                \
    " test %r10, %r10\n"                                                                        \
    " jz 1f\n"                                                                                  \
    " jmp *%r10\n"                                                                              \
    "1:\n"                                                                                      \
    " push %rax\n push %rdi\n push %rsi\n push %rdx\n push %rcx\n push %r8\n push %r9\n"       \
    " sub $128, %rsp\n"                                                                         \
    " movdqu %xmm0, 0(%rsp)\n movdqu %xmm1, 16(%rsp)\n movdqu %xmm2, 32(%rsp)\n"               \
    " movdqu %xmm3, 48(%rsp)\n movdqu %xmm4, 64(%rsp)\n movdqu %xmm5, 80(%rsp)\n"              \
    " movdqu %xmm6, 96(%rsp)\n movdqu %xmm7, 112(%rsp)\n"                                      \
    " mov %r11, %rdi\n"                                                                         \
    " call " resolve "\n"                                                                       \
    " mov %rax, %r11\n"                                                                         \
    " movdqu 0(%rsp), %xmm0\n movdqu 16(%rsp), %xmm1\n movdqu 32(%rsp), %xmm2\n"               \
    " movdqu 48(%rsp), %xmm3\n movdqu 64(%rsp), %xmm4\n movdqu 80(%rsp), %xmm5\n"              \
    " movdqu 96(%rsp), %xmm6\n movdqu 112(%rsp), %xmm7\n"                                      \
    " add $128, %rsp\n"                                                                         \
    " pop %r9\n pop %r8\n pop %rcx\n pop %rdx\n pop %rsi\n pop %rdi\n pop %rax\n"              \
    " jmp *%r11\n"

#endif
