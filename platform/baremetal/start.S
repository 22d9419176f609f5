/* start.S: reset code of the bare-metal aarch64 image (QEMU `-M virt -kernel`, entered at EL1
 * with the MMU and caches off, no firmware). Core 0 clears BSS; every core takes its own stack,
 * enables FP/SIMD (the compiler uses it for floats and copies), installs the exception vector,
 * turns on the MMU with one identity map (normal cacheable RAM, device memory below 1 GiB for
 * the UART) and calls zc_board_main(cpu). Secondary cores are powered on by the board through
 * PSCI CPU_ON at zc_board_secondary_entry. Must not: depend on any state a bootloader leaves. */

#define BOARD_STACK_BYTES 0x10000 /* per core; see link.ld */

    .section .text.boot, "ax"
    .global _start
_start:
    mov     x19, #0                 /* cpu 0 */
    adrp    x0, __bss_start
    add     x0, x0, :lo12:__bss_start
    adrp    x1, __bss_end
    add     x1, x1, :lo12:__bss_end
1:  cmp     x0, x1
    b.hs    2f
    str     xzr, [x0], #8
    b       1b
2:  bl      board_build_page_table
    b       board_core_setup

    .global zc_board_secondary_entry
zc_board_secondary_entry:
    mov     x19, x0                 /* the PSCI context id: this core's number */
    b       board_core_setup

/* x19 = cpu number. Stack, FP/SIMD, vector, MMU, then C. */
board_core_setup:
    adrp    x0, __stack_top
    add     x0, x0, :lo12:__stack_top
    mov     x1, #BOARD_STACK_BYTES
    msub    x0, x1, x19, x0         /* cpu n's stack ends n stacks below the top */
    mov     sp, x0
    mov     x0, #(3 << 20)          /* CPACR_EL1.FPEN = 0b11: no FP/SIMD trap at EL0/EL1 */
    msr     cpacr_el1, x0
    adrp    x0, board_vectors
    add     x0, x0, :lo12:board_vectors
    msr     vbar_el1, x0
    isb
    bl      board_mmu_on
    mov     x0, x19
    bl      zc_board_main           /* does not return */
3:  wfe
    b       3b

/* One level-1 table (4 KiB granule, 39-bit VA: 1 GiB blocks). Entry 0: 0..1 GiB, device
 * nGnRnE, never executable (UART, GIC). Entry 1: 1..2 GiB, normal write-back RAM, inner
 * shareable (QEMU virt's RAM starts at 1 GiB). */
board_build_page_table:
    adrp    x0, board_page_table
    add     x0, x0, :lo12:board_page_table
    ldr     x1, =((3 << 53) | (1 << 10) | (0 << 2) | 1)             /* XN, AF, attr 0 */
    str     x1, [x0]
    ldr     x1, =(0x40000000 | (1 << 10) | (3 << 8) | (1 << 2) | 1) /* AF, SH inner, attr 1 */
    str     x1, [x0, #8]
    dsb     sy
    ret

board_mmu_on:
    ldr     x0, =0xff00             /* MAIR attr 0: device nGnRnE, attr 1: normal WB RW-alloc */
    msr     mair_el1, x0
    /* TCR: T0SZ 25, IRGN0/ORGN0 write-back, SH0 inner, TG0 4 KiB, EPD1 (no TTBR1 walks),
     * IPS 36 bits. */
    ldr     x0, =(25 | (1 << 8) | (1 << 10) | (3 << 12) | (1 << 23) | (1 << 32))
    msr     tcr_el1, x0
    adrp    x0, board_page_table
    add     x0, x0, :lo12:board_page_table
    msr     ttbr0_el1, x0
    isb
    tlbi    vmalle1
    dsb     ish
    isb
    mrs     x0, sctlr_el1
    orr     x0, x0, #1              /* M: MMU on */
    orr     x0, x0, #(1 << 2)       /* C: data cache */
    orr     x0, x0, #(1 << 12)      /* I: instruction cache */
    bic     x0, x0, #(1 << 1)       /* A: unaligned accesses to normal memory allowed */
    msr     sctlr_el1, x0
    isb
    ret

/* Exception vector: 16 entries of 0x80 bytes. Every one is a fault for this image (nothing
 * enables interrupts): pass the entry number to board_fault, which prints and exits. */
    .macro board_vec n
    .balign 0x80
    mov     x0, #\n
    mrs     x1, esr_el1
    mrs     x2, elr_el1
    mrs     x3, far_el1
    adrp    x4, __fault_stack_top   /* a stack of its own: the fault may be an overflow */
    add     x4, x4, :lo12:__fault_stack_top
    mov     sp, x4
    b       zc_board_fault
    .endm

    .balign 0x800
board_vectors:
    board_vec 0
    board_vec 1
    board_vec 2
    board_vec 3
    board_vec 4
    board_vec 5
    board_vec 6
    board_vec 7
    board_vec 8
    board_vec 9
    board_vec 10
    board_vec 11
    board_vec 12
    board_vec 13
    board_vec 14
    board_vec 15

    .section .bss.page_table, "aw", %nobits
    .balign 4096
board_page_table:
    .space 4096
