/* fmt.h: the sentence formatter the core implements (core/text.c) for itself and offers to
 * the providers: the core and the transports, which may call no libc formatter, write every
 * sentence with it, and gpu/ needs no other. Its conversions are the subset the sentences use;
 * the format attribute lets the compiler check every call against printf's rules. */
#ifndef ZC_FMT_H
#define ZC_FMT_H

#include <stdarg.h>
#include <stddef.h>

/* A small vsnprintf: %s %c %d %u %x (unsigned), %lld %llu %llx (64-bit), %zu, %p (0x and hex
 * digits), %%. Always NUL-terminates (cap > 0); truncates silently. Returns the length
 * written. */
size_t zc__vfmt(char *buf, size_t cap, const char *fmt, va_list ap);
size_t zc__fmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
