/* text.c: string helpers for the core, which may call no libc function beyond mem*. Bounded
 * by the caller's capacities; no state. */
#include "text.h"

size_t zc__strlen(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

bool zc__streq(const char *a, const char *b) {
    size_t i = 0;
    for (; a[i] && a[i] == b[i]; i++) {
    }
    return a[i] == b[i];
}

size_t zc__strlcpy(char *dst, const char *src, size_t cap) {
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++) dst[i] = src[i];
    dst[i] = '\0';
    return i;
}

bool zc__parse_u64(const char *s, uint64_t *out) {
    uint64_t v = 0;
    if (!s || !*s) return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10u) return false;
        v = v * 10u + d;
    }
    *out = v;
    return true;
}

static int zc_hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool zc__parse_hex(const char *s, uint8_t *out, size_t bytes) {
    if (zc__strlen(s) != 2 * bytes) return false;
    for (size_t i = 0; i < bytes; i++) {
        int hi = zc_hex_value(s[2 * i]), lo = zc_hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

typedef struct zc_out {
    char *buf;
    size_t cap, len;
} zc_out;

static void zc_put(zc_out *o, char c) {
    if (o->len + 1 < o->cap) o->buf[o->len++] = c;
}

static void zc_put_u64(zc_out *o, uint64_t v, unsigned base) {
    char digits[24];
    size_t n = 0;
    do {
        unsigned d = (unsigned)(v % base);
        digits[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v /= base;
    } while (v && n < sizeof digits);
    while (n) zc_put(o, digits[--n]);
}

static void zc_put_i64(zc_out *o, int64_t v) {
    if (v < 0) {
        zc_put(o, '-');
        zc_put_u64(o, (uint64_t)0 - (uint64_t)v, 10);
    } else {
        zc_put_u64(o, (uint64_t)v, 10);
    }
}

/* One conversion after '%'; returns the number of format characters it used. */
static size_t zc_convert(zc_out *o, const char *f, va_list *ap) {
    if (f[0] == 'l' && f[1] == 'l') {
        if (f[2] == 'd') zc_put_i64(o, va_arg(*ap, long long));
        else if (f[2] == 'x') zc_put_u64(o, va_arg(*ap, unsigned long long), 16);
        else zc_put_u64(o, va_arg(*ap, unsigned long long), 10);
        return 3;
    }
    if (f[0] == 'z') {
        zc_put_u64(o, va_arg(*ap, size_t), 10);
        return 2;
    }
    switch (f[0]) {
    case 's': {
        const char *s = va_arg(*ap, const char *);
        for (s = s ? s : "(null)"; *s; s++) zc_put(o, *s);
        break;
    }
    case 'c': zc_put(o, (char)va_arg(*ap, int)); break;
    case 'd': zc_put_i64(o, va_arg(*ap, int)); break;
    case 'u': zc_put_u64(o, va_arg(*ap, unsigned), 10); break;
    case 'x': zc_put_u64(o, va_arg(*ap, unsigned), 16); break;
    case 'p':
        zc_put(o, '0');
        zc_put(o, 'x');
        zc_put_u64(o, (uintptr_t)va_arg(*ap, const void *), 16);
        break;
    default: zc_put(o, '%'); if (f[0]) zc_put(o, f[0]); break;
    }
    return f[0] ? 1 : 0;
}

size_t zc__vfmt(char *buf, size_t cap, const char *fmt, va_list ap) {
    zc_out o = {buf, cap, 0};
    va_list args;
    va_copy(args, ap);
    while (*fmt) {
        if (*fmt != '%') {
            zc_put(&o, *fmt++);
        } else if (fmt[1] == '%') {
            zc_put(&o, '%');
            fmt += 2;
        } else {
            fmt += 1 + zc_convert(&o, fmt + 1, &args);
        }
    }
    va_end(args);
    if (cap) buf[o.len] = '\0';
    return o.len;
}

size_t zc__fmt(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t n = zc__vfmt(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

size_t zc__fmt_bytes(char *buf, size_t cap, uint64_t bytes) {
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    uint32_t u = 0;
    while (u + 1u < sizeof units / sizeof units[0] && bytes >> (10u * (u + 1u))) u++;
    uint64_t whole = bytes >> (10u * u), rest = bytes & ((1ull << (10u * u)) - 1u);
    if (u == 0 || whole >= 10u) return zc__fmt(buf, cap, "%llu %s", (unsigned long long)whole,
                                               units[u]);
    uint32_t down = u == 6u ? 10u : 0u; /* rest * 100 stays below 2^64 */
    uint64_t hundredths = (rest >> down) * 100u / (1ull << (10u * u - down)); /* truncated */
    return zc__fmt(buf, cap, "%llu.%llu%llu %s", (unsigned long long)whole,
                   (unsigned long long)(hundredths / 10u),
                   (unsigned long long)(hundredths % 10u), units[u]);
}
