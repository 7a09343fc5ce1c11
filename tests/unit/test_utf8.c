#include "harvestd/utf8.h"
#include "test.h"

#include <stdlib.h>

#define VALID(lit) hv_utf8_valid(lit, sizeof(lit) - 1)

/* Sanitize `in` and compare with `want` (both string literals, may contain NUL). */
#define ASSERT_SANITIZED(in, want)                                                                 \
    do {                                                                                           \
        size_t n_;                                                                                 \
        char *s_ = hv_utf8_sanitize(in, sizeof(in) - 1, &n_);                                      \
        ASSERT_EQ(sizeof(want) - 1, n_);                                                           \
        ASSERT_MEM_EQ(want, s_, n_);                                                               \
        ASSERT_EQ(0, s_[n_]);                                                                      \
        ASSERT(hv_utf8_valid(s_, n_));                                                             \
        free(s_);                                                                                  \
    } while (0)

#define FFFD "\xEF\xBF\xBD"

TEST_IMPL(utf8_valid_ascii_and_empty)
{
    ASSERT_EQ(1, hv_utf8_valid("", 0));
    ASSERT_EQ(1, VALID("hello, world"));
    ASSERT_EQ(1, VALID("a\0b")); /* NUL is a valid code point */
    ASSERT_EQ(1, VALID("\x7F"));
}

TEST_IMPL(utf8_valid_multibyte)
{
    ASSERT_EQ(1, VALID("caf\xC3\xA9"));              /* U+00E9 */
    ASSERT_EQ(1, VALID("\xC2\x80"));                 /* U+0080, smallest 2-byte */
    ASSERT_EQ(1, VALID("\xDF\xBF"));                 /* U+07FF */
    ASSERT_EQ(1, VALID("\xE0\xA0\x80"));             /* U+0800, smallest 3-byte */
    ASSERT_EQ(1, VALID("\xE2\x82\xAC"));             /* U+20AC euro sign */
    ASSERT_EQ(1, VALID("\xED\x9F\xBF"));             /* U+D7FF, just below the surrogates */
    ASSERT_EQ(1, VALID("\xEE\x80\x80"));             /* U+E000, just above them */
    ASSERT_EQ(1, VALID("\xEF\xBF\xBF"));             /* U+FFFF */
    ASSERT_EQ(1, VALID("\xF0\x90\x80\x80"));         /* U+10000, smallest 4-byte */
    ASSERT_EQ(1, VALID("\xF0\x9F\x98\x80"));         /* U+1F600 */
    ASSERT_EQ(1, VALID("\xF4\x8F\xBF\xBF"));         /* U+10FFFF, the last code point */
    ASSERT_EQ(1, VALID("\xE6\x97\xA5\xE6\x9C\xAC")); /* two CJK characters */
}

TEST_IMPL(utf8_invalid_overlong)
{
    ASSERT_EQ(0, VALID("\xC0\xAF")); /* '/' in two bytes */
    ASSERT_EQ(0, VALID("\xC1\xBF"));
    ASSERT_EQ(0, VALID("\xE0\x80\xAF"));     /* '/' in three bytes */
    ASSERT_EQ(0, VALID("\xE0\x9F\xBF"));     /* U+07FF in three bytes */
    ASSERT_EQ(0, VALID("\xF0\x80\x80\xAF")); /* '/' in four bytes */
    ASSERT_EQ(0, VALID("\xF0\x8F\xBF\xBF")); /* U+FFFF in four bytes */
}

TEST_IMPL(utf8_invalid_surrogates_and_range)
{
    ASSERT_EQ(0, VALID("\xED\xA0\x80"));     /* U+D800 */
    ASSERT_EQ(0, VALID("\xED\xBF\xBF"));     /* U+DFFF */
    ASSERT_EQ(0, VALID("\xF4\x90\x80\x80")); /* U+110000 */
    ASSERT_EQ(0, VALID("\xF5\x80\x80\x80"));
    ASSERT_EQ(0, VALID("\xFE"));
    ASSERT_EQ(0, VALID("\xFF"));
}

TEST_IMPL(utf8_invalid_truncated_and_stray)
{
    ASSERT_EQ(0, VALID("abc\xC3")); /* truncated at the end */
    ASSERT_EQ(0, VALID("abc\xE2\x82"));
    ASSERT_EQ(0, VALID("abc\xF0\x9F\x98"));
    ASSERT_EQ(0, VALID("\x80")); /* stray continuation byte */
    ASSERT_EQ(0, VALID("a\xBF"
                       "b"));
    ASSERT_EQ(0, VALID("\xC3"
                       "A")); /* lead byte followed by ASCII */
}

TEST_IMPL(utf8_invalid_byte_after_long_ascii_run)
{
    /* The fast path reads 8 bytes at a time: put the bad byte at every offset of a word. */
    char buf[40];
    for (size_t at = 0; at < 32; at++) {
        memset(buf, 'x', sizeof(buf));
        ASSERT_EQ(1, hv_utf8_valid(buf, sizeof(buf)));
        buf[at] = (char)0x80;
        ASSERT_EQ(0, hv_utf8_valid(buf, sizeof(buf)));
        buf[at] = (char)0xC3;
        buf[at + 1] = (char)0xA9;
        ASSERT_EQ(1, hv_utf8_valid(buf, sizeof(buf)));
    }
}

TEST_IMPL(utf8_sanitize_valid_input_unchanged)
{
    ASSERT_SANITIZED("", "");
    ASSERT_SANITIZED("plain", "plain");
    ASSERT_SANITIZED("caf\xC3\xA9 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xF0\x9F\x98\x80");
    ASSERT_SANITIZED("a\0b", "a\0b");
}

TEST_IMPL(utf8_sanitize_maximal_subparts)
{
    /* A valid prefix of a sequence is one maximal subpart: one U+FFFD, then go on. */
    ASSERT_SANITIZED("\xE2\x82"
                     "A",
                     FFFD "A");
    ASSERT_SANITIZED("\xF0\x9F\x98"
                     "A",
                     FFFD "A");
    /* 0x80 cannot follow F0 (overlong): the lead byte alone is the subpart. */
    ASSERT_SANITIZED("\xF0\x80", FFFD FFFD);
    ASSERT_SANITIZED("\xF0\x80\x80\x80", FFFD FFFD FFFD FFFD);
    /* Surrogates: A0 cannot follow ED. */
    ASSERT_SANITIZED("\xED\xA0\x80", FFFD FFFD FFFD);
    /* Beyond U+10FFFF: 90 cannot follow F4. */
    ASSERT_SANITIZED("\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD);
    /* C0 and C1 never start anything. */
    ASSERT_SANITIZED("\xC0\xAF", FFFD FFFD);
    ASSERT_SANITIZED("\xC1\xBF"
                     "x",
                     FFFD FFFD "x");
    /* Each stray continuation byte and each impossible byte is its own subpart. */
    ASSERT_SANITIZED("\x80\x81\x82", FFFD FFFD FFFD);
    ASSERT_SANITIZED("\xF5\xFF", FFFD FFFD);
    /* Truncated at the end of input. */
    ASSERT_SANITIZED("ok\xE2\x82", "ok" FFFD);
    ASSERT_SANITIZED("ok\xC3", "ok" FFFD);
    /* A truncated sequence followed by a complete one. */
    ASSERT_SANITIZED("\xE2\x82\xE2\x82\xAC", FFFD "\xE2\x82\xAC");
    /* The Unicode standard's example (table 3-8): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64. */
    ASSERT_SANITIZED("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
                     "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d");
}

TEST_IMPL(utf8_sanitize_null_out_len)
{
    char *s = hv_utf8_sanitize("a\xFF", 2, NULL);
    ASSERT_STR_EQ("a" FFFD, s);
    free(s);
}

TEST_IMPL(utf8_sanitize_long_mixed_input)
{
    /* Every byte value once, repeated: the result must be valid and keep all ASCII. */
    char in[256 * 4];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (char)(i % 256);
    size_t n;
    char *s = hv_utf8_sanitize(in, sizeof(in), &n);
    ASSERT(hv_utf8_valid(s, n));
    size_t ascii = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x80)
            ascii++;
    ASSERT_EQ(128 * 4, ascii);
    free(s);
}

TEST_IMPL(utf8_cut_ends_on_a_character_boundary)
{
    static const char s[] = "ab\xc3\xa9\xe2\x82\xac!"; /* a b e-acute euro ! : 8 bytes */
    ASSERT_EQ(8, hv_utf8_cut(s, 8, 8));
    ASSERT_EQ(8, hv_utf8_cut(s, 8, 20));
    ASSERT_EQ(7, hv_utf8_cut(s, 8, 7));
    ASSERT_EQ(4, hv_utf8_cut(s, 8, 6)); /* not inside the euro sign */
    ASSERT_EQ(4, hv_utf8_cut(s, 8, 5));
    ASSERT_EQ(4, hv_utf8_cut(s, 8, 4));
    ASSERT_EQ(2, hv_utf8_cut(s, 8, 3)); /* not inside the e-acute */
    ASSERT_EQ(0, hv_utf8_cut(s, 8, 0));
}
