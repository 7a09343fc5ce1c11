/* utf8.c: strict UTF-8 validation (RFC 3629) and repair with U+FFFD. */
#include "harvestd/utf8.h"

#include <stdint.h>
#include <string.h>

#include "harvestd/common.h"

#define HV_UTF8_HIGH_BITS UINT64_C(0x8080808080808080)

/* U+FFFD REPLACEMENT CHARACTER encoded as UTF-8. */
static const char hv_utf8_replacement[3] = {'\xEF', '\xBF', '\xBD'};

/*
 * Look at the sequence that starts at p (p < end, *p >= 0x80). Returns its length if it is a
 * well-formed sequence, or 0 if it is not; in that case *bad receives the length of the maximal
 * subpart: the lead byte plus every following byte that could still have continued a valid
 * sequence (Unicode 15, section 3.9, table 3-7), never less than 1.
 *
 * The second byte carries all the range restrictions (no overlongs, no surrogates, nothing
 * above U+10FFFF); the third and fourth are plain 80..BF continuation bytes.
 */
static size_t hv_utf8_sequence(const unsigned char *p, const unsigned char *end, size_t *bad)
{
    unsigned char lead = p[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t need;

    if (lead >= 0xC2 && lead <= 0xDF) {
        need = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        need = 3;
        if (lead == 0xE0)
            lo = 0xA0; /* below is an overlong form */
        else if (lead == 0xED)
            hi = 0x9F; /* above is a UTF-16 surrogate */
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        need = 4;
        if (lead == 0xF0)
            lo = 0x90; /* below is an overlong form */
        else if (lead == 0xF4)
            hi = 0x8F; /* above is beyond U+10FFFF */
    } else {
        /* 80..BF (stray continuation), C0, C1 (always overlong), F5..FF (never valid). */
        *bad = 1;
        return 0;
    }

    size_t avail = (size_t)(end - p);
    size_t i = 1;
    if (i < avail && p[i] >= lo && p[i] <= hi) {
        for (i = 2; i < need && i < avail; i++)
            if (p[i] < 0x80 || p[i] > 0xBF)
                break;
    }
    if (i == need)
        return need;
    *bad = i;
    return 0;
}

/* Length of the ASCII run at the start of [p, end). Words are read through memcpy, so any
 * alignment is fine and the compiler turns it into plain loads. */
static size_t hv_utf8_ascii_run(const unsigned char *p, const unsigned char *end)
{
    const unsigned char *q = p;
    while ((size_t)(end - q) >= sizeof(uint64_t)) {
        uint64_t w;
        memcpy(&w, q, sizeof(w));
        if (w & HV_UTF8_HIGH_BITS)
            break;
        q += sizeof(w);
    }
    while (q < end && *q < 0x80)
        q++;
    return (size_t)(q - p);
}

int hv_utf8_valid(const char *s, size_t len)
{
    if (len == 0)
        return 1;
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + len;

    while (p < end) {
        p += hv_utf8_ascii_run(p, end);
        if (p == end)
            break;
        size_t bad;
        size_t n = hv_utf8_sequence(p, end, &bad);
        if (n == 0)
            return 0;
        p += n;
    }
    return 1;
}

/*
 * Both passes below walk the input the same way; the first only measures, so the copy is
 * allocated once at its exact size instead of at the worst case (three times the input).
 */
static size_t hv_utf8_repair(const char *s, size_t len, char *out)
{
    if (len == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + len;
    size_t o = 0;

    while (p < end) {
        /* Copy the longest well-formed run in one go. */
        const unsigned char *run = p;
        size_t bad = 0;
        while (p < end) {
            p += hv_utf8_ascii_run(p, end);
            if (p == end)
                break;
            size_t n = hv_utf8_sequence(p, end, &bad);
            if (n == 0)
                break;
            p += n;
        }
        size_t good = (size_t)(p - run);
        if (out != NULL && good > 0)
            memcpy(out + o, run, good);
        o += good;
        if (p == end)
            break;
        if (out != NULL)
            memcpy(out + o, hv_utf8_replacement, sizeof(hv_utf8_replacement));
        o += sizeof(hv_utf8_replacement);
        p += bad;
    }
    return o;
}

char *hv_utf8_sanitize(const char *s, size_t len, size_t *out_len)
{
    size_t n = hv_utf8_repair(s, len, NULL);
    char *out = hv_xmalloc(n + 1);
    hv_utf8_repair(s, len, out);
    out[n] = '\0';
    if (out_len != NULL)
        *out_len = n;
    return out;
}

size_t hv_utf8_cut(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--; /* s[max] continues the character before it */
    return max;
}
