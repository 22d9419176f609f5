/* mem.c: memcpy, memset, memmove and memcmp for the bare-metal image, the only C library
 * functions zcoll's core needs (the compiler turns its __builtin_mem* and struct copies into
 * calls). Eight bytes at a time where both pointers allow it, bytes otherwise. Compiled with
 * -fno-tree-loop-distribute-patterns so these loops are not turned back into calls to
 * themselves. Must not: call anything. */
#include <stddef.h>
#include <stdint.h>

typedef uint64_t __attribute__((may_alias)) board_word;

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);

static int board_aligned(const void *a, const void *b) {
    return (((uintptr_t)a | (uintptr_t)b) & 7u) == 0;
}

/* Copies low to high: also right for overlapping ranges with dst below src. */
static void board_copy_forward(unsigned char *d, const unsigned char *s, size_t n) {
    if (board_aligned(d, s))
        for (; n >= 8; n -= 8, d += 8, s += 8)
            *(board_word *)(void *)d = *(const board_word *)(const void *)s;
    for (; n; n--) *d++ = *s++;
}

void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
    board_copy_forward(dst, src, n);
    return dst;
}

void *memmove(void *dst, const void *src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (d <= s || d >= s + n) {
        board_copy_forward(d, s, n);
        return dst;
    }
    while (n--) d[n] = s[n]; /* overlapping with dst above src: high to low */
    return dst;
}

void *memset(void *dst, int c, size_t n) {
    unsigned char *d = dst;
    uint64_t w = (uint64_t)(unsigned char)c * 0x0101010101010101ull;
    if (board_aligned(d, d))
        for (; n >= 8; n -= 8, d += 8) *(board_word *)(void *)d = w;
    for (; n; n--) *d++ = (unsigned char)c;
    return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}
