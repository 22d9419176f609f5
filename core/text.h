/* text.h: the core's own string helpers (the core links no libc beyond mem*): lengths,
 * bounded copies, number parsing and (fmt.h) the formatter of error sentences. */
#ifndef ZC_CORE_TEXT_H
#define ZC_CORE_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The only libc the core uses, as compiler builtins (they may become calls to these four). */
#define zc__memcpy __builtin_memcpy
#define zc__memmove __builtin_memmove
#define zc__memset __builtin_memset
#define zc__memcmp __builtin_memcmp

size_t zc__strlen(const char *s);
bool zc__streq(const char *a, const char *b);
/* Copies at most cap-1 bytes and NUL-terminates (cap > 0). Returns the length written. */
size_t zc__strlcpy(char *dst, const char *src, size_t cap);
/* Parses a whole decimal string (no sign, no spaces) into *out; false on anything else or
 * overflow. */
bool zc__parse_u64(const char *s, uint64_t *out);
/* Parses exactly 2*bytes hex digits into out; false otherwise. */
bool zc__parse_hex(const char *s, uint8_t *out, size_t bytes);
/* "1.00 GiB", "230 MiB", "8.02 MiB", "512 bytes": bytes for a sentence (two decimals below 10
 * of a unit, truncated). Returns the length written. */
size_t zc__fmt_bytes(char *buf, size_t cap, uint64_t bytes);
/* zc__vfmt, zc__fmt: the sentence formatter, shared with the providers (provider/fmt.h). */
#include "fmt.h"

#endif
