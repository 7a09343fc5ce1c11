#include "harvestd/charset.h"
#include "test.h"

#include <pthread.h>
#include <stdlib.h>

#include "harvestd/common.h"
#include "harvestd/utf8.h"

#define FFFD "\xEF\xBF\xBD"

/* A failed byte comparison prints both sides in hex: decoded text is rarely readable. */
static void expect_bytes(int line, const char *want, size_t want_len, const char *got,
                         size_t got_len)
{
    if (want_len == got_len && memcmp(want, got, got_len) == 0)
        return;
    char w[200], g[200];
    size_t k = 0;
    for (size_t i = 0; i < want_len && k + 4 < sizeof(w); i++)
        k += (size_t)snprintf(w + k, sizeof(w) - k, "%02X ", (unsigned char)want[i]);
    w[k] = '\0';
    k = 0;
    for (size_t i = 0; i < got_len && k + 4 < sizeof(g); i++)
        k += (size_t)snprintf(g + k, sizeof(g) - k, "%02X ", (unsigned char)got[i]);
    g[k] = '\0';
    hv_test_fail(__FILE__, line, "decoded bytes differ\n  want (%zu): %s\n  got  (%zu): %s",
                 want_len, w, got_len, g);
}

/* Decode `body` (a string literal) and expect a decoded copy equal to `want`. */
#define EXPECT_DECODE(body, ct, want, want_name, want_source)                                  \
    do {                                                                                       \
        hv_charset_result_t r_;                                                                \
        hv_charset_decode(body, sizeof(body) - 1, ct, &r_);                                    \
        ASSERT_STR_EQ(want_name, r_.name);                                                     \
        ASSERT_EQ(want_source, r_.source);                                                     \
        ASSERT_NOT_NULL(r_.text);                                                              \
        expect_bytes(__LINE__, want, sizeof(want) - 1, r_.text, r_.len);                       \
        ASSERT_EQ(0, r_.text[r_.len]);                                                         \
        ASSERT(hv_utf8_valid(r_.text, r_.len));                                                \
        hv_charset_result_free(&r_);                                                           \
        ASSERT_NULL(r_.text);                                                                  \
    } while (0)

/* Decode `body` and expect it to be usable as it is (text NULL, len of the body). */
#define EXPECT_AS_IS(body, ct, want_name, want_source)                                         \
    do {                                                                                       \
        hv_charset_result_t r_;                                                                \
        hv_charset_decode(body, sizeof(body) - 1, ct, &r_);                                    \
        ASSERT_STR_EQ(want_name, r_.name);                                                     \
        ASSERT_EQ(want_source, r_.source);                                                     \
        ASSERT_NULL(r_.text);                                                                  \
        ASSERT_EQ(sizeof(body) - 1, r_.len);                                                   \
        hv_charset_result_free(&r_);                                                           \
    } while (0)

#define CT(label) "text/html; charset=" label

/* ---- windows-1252 and its aliases ------------------------------------------------------------ */

TEST_IMPL(charset_windows_1252_bytes)
{
    /* 80 is the euro sign; 81 and 9D are undefined in Windows, C1 controls for WHATWG (glibc
     * rejects them); E9 is e-acute. */
    EXPECT_DECODE("\x80\x81\x9D\xE9", CT("windows-1252"),
                  "\xE2\x82\xAC\xC2\x81\xC2\x9D\xC3\xA9", "windows-1252", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x8D\x8F\x90\x9F\xA0\xFF", CT("cp1252"),
                  "\xC2\x8D\xC2\x8F\xC2\x90\xC5\xB8\xC2\xA0\xC3\xBF", "windows-1252",
                  HV_CHARSET_FROM_HEADER);
}

TEST_IMPL(charset_latin1_is_windows_1252)
{
    EXPECT_DECODE("caf\xE9 \x80", CT("latin1"), "caf\xC3\xA9 \xE2\x82\xAC", "windows-1252",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x93q\x94", CT("ISO-8859-1"), "\xE2\x80\x9Cq\xE2\x80\x9D", "windows-1252",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x96", CT("us-ascii"), "\xE2\x80\x93", "windows-1252",
                  HV_CHARSET_FROM_HEADER);
}

/* ---- CJK ------------------------------------------------------------------------------------- */

TEST_IMPL(charset_shift_jis)
{
    /* 0x5C stays a backslash and 0x7E a tilde (CP932, not JIS X 0201); then the Katakana
     * word "katakana" and the kanji for "Japan". */
    EXPECT_DECODE("C:\\dir~ \x83\x4A\x83\x5E\x83\x4A\x83\x69 \x93\xFA\x96\x7B",
                  "text/html; charset=\"Shift_JIS\"",
                  "C:\\dir~ \xE3\x82\xAB\xE3\x82\xBF\xE3\x82\xAB\xE3\x83\x8A "
                  "\xE6\x97\xA5\xE6\x9C\xAC",
                  "shift_jis", HV_CHARSET_FROM_HEADER);
    /* Half-width katakana are single bytes; x-sjis is a WHATWG label glibc does not know. */
    EXPECT_DECODE("\xB1\xB2", CT("x-sjis"), "\xEF\xBD\xB1\xEF\xBD\xB2", "shift_jis",
                  HV_CHARSET_FROM_HEADER);
    /* NEC row 13 (circled digit one), a Microsoft extension that CP932 carries. */
    EXPECT_DECODE("\x87\x40", CT("windows-31j"), "\xE2\x91\xA0", "shift_jis",
                  HV_CHARSET_FROM_HEADER);
}

TEST_IMPL(charset_gbk)
{
    /* "Chinese" in GB2312, which WHATWG reads as gbk. */
    EXPECT_DECODE("\xD6\xD0\xCE\xC4", CT("gb2312"), "\xE4\xB8\xAD\xE6\x96\x87", "gbk",
                  HV_CHARSET_FROM_HEADER);
    /* gbk decodes as gb18030: A2E3 and the single byte 80 are both the euro sign, and a
     * four-byte sequence decodes too. */
    EXPECT_DECODE("\xA2\xE3\x80\x81\x30\x81\x30", CT("GBK"),
                  "\xE2\x82\xAC\xE2\x82\xAC\xC2\x80", "gbk", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x90\x30\x81\x30", CT("gb18030"), "\xF0\x90\x80\x80", "gb18030",
                  HV_CHARSET_FROM_HEADER);
}

TEST_IMPL(charset_other_multibyte)
{
    EXPECT_DECODE("\xB0\xA1\x81\x41", CT("euc-kr"), "\xEA\xB0\x80\xEA\xB0\x82", "euc-kr",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xB0\xA1", CT("ks_c_5601-1987"), "\xEA\xB0\x80", "euc-kr",
                  HV_CHARSET_FROM_HEADER);
    /* Big5 with an HKSCS code that decodes to two code points. */
    EXPECT_DECODE("\xA4\x40\x88\x62", CT("big5"), "\xE4\xB8\x80\xC3\x8A\xCC\x84", "big5",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xA4\xA2\x8E\xB1", CT("euc-jp"), "\xE3\x81\x82\xEF\xBD\xB1", "euc-jp",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("a\x1B$B$\"\x1B(Bb", CT("iso-2022-jp"), "a\xE3\x81\x82"
                                                         "b",
                  "iso-2022-jp", HV_CHARSET_FROM_HEADER);
}

TEST_IMPL(charset_multibyte_invalid_sequences)
{
    /* Shift_JIS: a lead byte before an ASCII byte is one error and the ASCII byte survives;
     * before a non-ASCII byte both go; A0 is never valid; 80 is U+0080 for WHATWG. Decoding
     * goes on to the final katakana. */
    EXPECT_DECODE("\x83\x4A\x81 \xA0\x81\xFF\x80\x83\x5E", CT("shift_jis"),
                  "\xE3\x82\xAB" FFFD " " FFFD FFFD "\xC2\x80\xE3\x82\xBF", "shift_jis",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xD6\xD0\xFF\x81 \xCE\xC4", CT("gbk"),
                  "\xE4\xB8\xAD" FFFD FFFD " \xE6\x96\x87", "gbk", HV_CHARSET_FROM_HEADER);
    /* A well-formed gb18030 four-byte sequence beyond the table is a single error. */
    EXPECT_DECODE("\x84\x31\xA5\x30"
                  "a",
                  CT("gb18030"), FFFD "a", "gb18030", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xB0\xA1\xFF\xB0\xA1", CT("euc-kr"), "\xEA\xB0\x80" FFFD "\xEA\xB0\x80",
                  "euc-kr", HV_CHARSET_FROM_HEADER);
}

TEST_IMPL(charset_incomplete_trailing_sequence)
{
    EXPECT_DECODE("\x83\x4A\x83", CT("shift_jis"), "\xE3\x82\xAB" FFFD, "shift_jis",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xD6\xD0\xD6", CT("gbk"), "\xE4\xB8\xAD" FFFD, "gbk",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("a\x81\x30\x81", CT("gb18030"), "a" FFFD, "gb18030", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("a\xA4", CT("euc-jp"), "a" FFFD, "euc-jp", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("a\xA4", CT("big5"), "a" FFFD, "big5", HV_CHARSET_FROM_HEADER);
    /* Declared UTF-8 is left to its reader, which repairs what it reads (see unchecked). */
    EXPECT_AS_IS("a\xC3", CT("utf-8"), "utf-8", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xEF\xBB\xBF"
                  "a\xC3",
                  NULL, "a" FFFD, "utf-8", HV_CHARSET_FROM_BOM);
}

/* ---- other single-byte encodings ------------------------------------------------------------- */

TEST_IMPL(charset_single_byte_tables)
{
    EXPECT_DECODE("\xC0\x98", CT("windows-1251"), "\xD0\x90\xC2\x98", "windows-1251",
                  HV_CHARSET_FROM_HEADER);
    /* 0xCA is a WHATWG addition to glibc's table; D9 is undefined. */
    EXPECT_DECODE("\xE0\xCA\xD9", CT("windows-1255"), "\xD7\x90\xD6\xBA" FFFD, "windows-1255",
                  HV_CHARSET_FROM_HEADER);
    /* No composition: a letter and a combining accent stay two code points. */
    EXPECT_DECODE("A\xCC", CT("windows-1258"), "A\xCC\x80", "windows-1258",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x81\xA1\xDB", CT("tis-620"), "\xC2\x81\xE0\xB8\x81" FFFD, "windows-874",
                  HV_CHARSET_FROM_HEADER);
    /* iso-8859-9 is windows-1254 for WHATWG. */
    EXPECT_DECODE("\x80\xF0", CT("iso-8859-9"), "\xE2\x82\xAC\xC4\x9F", "windows-1254",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xB1", CT("latin2"), "\xC4\x85", "iso-8859-2", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xE1\xAE", CT("greek"), "\xCE\xB1" FFFD, "iso-8859-7", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xE0", CT("logical"), "\xD7\x90", "iso-8859-8-i", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xC1", CT("koi8-r"), "\xD0\xB0", "koi8-r", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\xA4\xAE\xBE", CT("koi8-u"), "\xD1\x94\xD1\x9E\xD0\x8E", "koi8-u",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x80\xFF", CT("x-mac-cyrillic"), "\xD0\x90\xE2\x82\xAC", "x-mac-cyrillic",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x8E\xDB", CT("mac"), "\xC3\xA9\xE2\x82\xAC", "macintosh",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x80", CT("866"), "\xD0\x90", "ibm866", HV_CHARSET_FROM_HEADER);
}

TEST_IMPL(charset_x_user_defined)
{
    EXPECT_DECODE("a\x80\xFF", CT("x-user-defined"), "a\xEF\x9E\x80\xEF\x9F\xBF",
                  "x-user-defined", HV_CHARSET_FROM_HEADER);
    /* From a <meta>, the HTML standard reads it as windows-1252. */
    EXPECT_DECODE("<meta charset=\"x-user-defined\">\x80",
                  NULL, "<meta charset=\"x-user-defined\">\xE2\x82\xAC", "windows-1252",
                  HV_CHARSET_FROM_META);
}

TEST_IMPL(charset_replacement)
{
    EXPECT_DECODE("abc\x1B$)C\x0E!!\x0F", CT("iso-2022-kr"), FFFD, "replacement",
                  HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("<meta charset=hz-gb-2312>~{<:~}", NULL, FFFD, "replacement",
                  HV_CHARSET_FROM_META);
    /* Nothing in, nothing out. */
    hv_charset_result_t r;
    hv_charset_decode("", 0, CT("csiso2022kr"), &r);
    ASSERT_STR_EQ("replacement", r.name);
    ASSERT_EQ(0, r.len);
    hv_charset_result_free(&r);
}

/* ---- UTF-8 and UTF-16 ------------------------------------------------------------------------ */

TEST_IMPL(charset_utf8_bom)
{
    EXPECT_DECODE("\xEF\xBB\xBFh\xC3\xA9", NULL, "h\xC3\xA9", "utf-8", HV_CHARSET_FROM_BOM);
    /* The BOM beats the header, and the rest is still repaired if need be. */
    EXPECT_DECODE("\xEF\xBB\xBF"
                  "a\xFF",
                  CT("shift_jis"), "a" FFFD, "utf-8", HV_CHARSET_FROM_BOM);
    EXPECT_DECODE("\xEF\xBB\xBF", NULL, "", "utf-8", HV_CHARSET_FROM_BOM);
}

TEST_IMPL(charset_utf16_bom)
{
    /* "hi" and U+1F600 as a surrogate pair. */
    EXPECT_DECODE("\xFF\xFEh\0i\0\x3D\xD8\x00\xDE", NULL, "hi\xF0\x9F\x98\x80", "utf-16le",
                  HV_CHARSET_FROM_BOM);
    EXPECT_DECODE("\xFE\xFF\0h\x30\x42", CT("windows-1252"), "h\xE3\x81\x82", "utf-16be",
                  HV_CHARSET_FROM_BOM);
}

TEST_IMPL(charset_utf16_header_without_bom)
{
    /* The "utf-16" label means little-endian. */
    EXPECT_DECODE("h\0i\0", CT("utf-16"), "hi", "utf-16le", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\0h\0i", CT("UTF-16BE"), "hi", "utf-16be", HV_CHARSET_FROM_HEADER);
    /* A lone lead surrogate, a lone trail surrogate, an odd byte at the end. */
    EXPECT_DECODE("\x00\xD8"
                  "a\0\x00\xDC"
                  "b\0c",
                  CT("utf-16le"), FFFD "a" FFFD "b" FFFD, "utf-16le", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("a\0\x00\xD8", CT("utf-16le"), "a" FFFD, "utf-16le", HV_CHARSET_FROM_HEADER);
}

TEST_IMPL(charset_utf8_fallback)
{
    /* No declaration and valid UTF-8: the body is used as it is. */
    EXPECT_AS_IS("<p>caf\xC3\xA9</p>", NULL, "utf-8", HV_CHARSET_FROM_DEFAULT);
    EXPECT_AS_IS("plain ascii", "text/html", "utf-8", HV_CHARSET_FROM_DEFAULT);
    /* Declared UTF-8: as it is, unvalidated, whether valid or not (its reader repairs what
     * it reads); after a BOM, which must go, repaired in the copy. */
    EXPECT_AS_IS("caf\xC3\xA9", CT("utf8"), "utf-8", HV_CHARSET_FROM_HEADER);
    EXPECT_AS_IS("a\xFF"
                 "b",
                 CT("UTF-8"), "utf-8", HV_CHARSET_FROM_HEADER);
    EXPECT_AS_IS("<meta charset=utf-8>a\xFF", NULL, "utf-8", HV_CHARSET_FROM_META);
    EXPECT_DECODE("\xEF\xBB\xBF"
                  "a\xFF"
                  "b",
                  NULL, "a" FFFD "b", "utf-8", HV_CHARSET_FROM_BOM);
    hv_charset_result_t r;
    hv_charset_decode("a\xFF", 2, CT("utf-8"), &r);
    ASSERT_EQ(1, r.unchecked);
    hv_charset_decode("ab", 2, NULL, &r);
    ASSERT_EQ(0, r.unchecked); /* validated to be chosen */
    hv_charset_decode("a\xFF", 2, CT("latin1"), &r);
    ASSERT_EQ(0, r.unchecked);
    hv_charset_result_free(&r);
}

TEST_IMPL(charset_windows_1252_fallback)
{
    EXPECT_DECODE("<p>caf\xE9</p>", NULL, "<p>caf\xC3\xA9</p>", "windows-1252",
                  HV_CHARSET_FROM_DEFAULT);
    /* A truncated UTF-8 sequence is not valid UTF-8 either. */
    EXPECT_DECODE("caf\xC3", NULL, "caf\xC3\x83", "windows-1252", HV_CHARSET_FROM_DEFAULT);
}

TEST_IMPL(charset_empty_body)
{
    hv_charset_result_t r;
    hv_charset_decode(NULL, 0, NULL, &r);
    ASSERT_NULL(r.text);
    ASSERT_EQ(0, r.len);
    ASSERT_STR_EQ("utf-8", r.name);
    ASSERT_EQ(HV_CHARSET_FROM_DEFAULT, r.source);
    hv_charset_result_free(&r);

    hv_charset_decode(NULL, 0, CT("shift_jis"), &r);
    ASSERT_NULL(r.text);
    ASSERT_EQ(0, r.len);
    ASSERT_STR_EQ("shift_jis", r.name);
    ASSERT_EQ(HV_CHARSET_FROM_HEADER, r.source);
    hv_charset_result_free(&r);
    hv_charset_result_free(NULL);
}

/* ---- Content-Type ---------------------------------------------------------------------------- */

TEST_IMPL(charset_content_type_parsing)
{
    EXPECT_DECODE("\x83\x4A", "text/html;CHARSET = \"Shift_JIS\" ; foo=bar", "\xE3\x82\xAB",
                  "shift_jis", HV_CHARSET_FROM_HEADER);
    EXPECT_DECODE("\x83\x4A", "text/html ; Charset=sjis", "\xE3\x82\xAB", "shift_jis",
                  HV_CHARSET_FROM_HEADER);
    /* "charset=" inside another parameter's quoted value does not count. */
    EXPECT_DECODE("\xB0\xA1", "text/html; foo=\"a;charset=gbk\"; charset=euc-kr",
                  "\xEA\xB0\x80", "euc-kr", HV_CHARSET_FROM_HEADER);
    /* A backslash escape inside quotes. */
    EXPECT_DECODE("\xD6\xD0", "text/html; charset=\"gb\\2312\"", "\xE4\xB8\xAD", "gbk",
                  HV_CHARSET_FROM_HEADER);
    /* The first charset parameter decides. */
    EXPECT_AS_IS("abc", "text/html; charset=utf-8; charset=gbk", "utf-8",
                 HV_CHARSET_FROM_HEADER);
    /* No parameter section, an empty value, a bare parameter name: no evidence. */
    EXPECT_AS_IS("abc", "charset=gbk", "utf-8", HV_CHARSET_FROM_DEFAULT);
    EXPECT_AS_IS("abc", "text/html; charset=", "utf-8", HV_CHARSET_FROM_DEFAULT);
    EXPECT_AS_IS("abc", "text/html; charset", "utf-8", HV_CHARSET_FROM_DEFAULT);
    EXPECT_AS_IS("abc", "", "utf-8", HV_CHARSET_FROM_DEFAULT);
}

TEST_IMPL(charset_unknown_labels_fall_through)
{
    /* An unknown header label gives way to the <meta>, an unknown <meta> to the fallback. */
    EXPECT_DECODE("<meta charset=gbk>\xD6\xD0", CT("klingon"), "<meta charset=gbk>\xE4\xB8\xAD",
                  "gbk", HV_CHARSET_FROM_META);
    EXPECT_AS_IS("<meta charset=\"utf-7\">ok", CT("x-unknown"), "utf-8",
                 HV_CHARSET_FROM_DEFAULT);
    EXPECT_DECODE("<meta charset=\"nope\">\xE9", CT("nope"), "<meta charset=\"nope\">\xC3\xA9",
                  "windows-1252", HV_CHARSET_FROM_DEFAULT);
    /* A later <meta> is tried when an earlier one names nothing known. */
    EXPECT_DECODE("<meta charset=klingon><meta charset=gbk>\xD6\xD0", NULL,
                  "<meta charset=klingon><meta charset=gbk>\xE4\xB8\xAD", "gbk",
                  HV_CHARSET_FROM_META);
}

/* ---- the <meta> prescan ---------------------------------------------------------------------- */

TEST_IMPL(charset_meta_charset)
{
    EXPECT_DECODE("<html><head><meta charset=\"Shift_JIS\"><title>\x83\x4A</title>", NULL,
                  "<html><head><meta charset=\"Shift_JIS\"><title>\xE3\x82\xAB</title>",
                  "shift_jis", HV_CHARSET_FROM_META);
    /* Unquoted, upper case, a slash right after the tag name. */
    EXPECT_DECODE("<META/CHARSET=GBK>\xD6\xD0", NULL, "<META/CHARSET=GBK>\xE4\xB8\xAD", "gbk",
                  HV_CHARSET_FROM_META);
    /* UTF-16 named in a <meta> means UTF-8: the page is used as it is. */
    EXPECT_AS_IS("<meta charset=\"utf-16le\"><p>hi", NULL, "utf-8", HV_CHARSET_FROM_META);
}

TEST_IMPL(charset_header_beats_meta)
{
    /* 83 is f-hook in windows-1252. */
    EXPECT_DECODE("<meta charset=\"shift_jis\">\x83J", CT("windows-1252"),
                  "<meta charset=\"shift_jis\">\xC6\x92J", "windows-1252",
                  HV_CHARSET_FROM_HEADER);
}

TEST_IMPL(charset_meta_http_equiv)
{
    EXPECT_DECODE("<meta http-equiv=\"Content-Type\" content=\"text/html; charset=euc-jp\">"
                  "\xA4\xA2",
                  NULL,
                  "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=euc-jp\">"
                  "\xE3\x81\x82",
                  "euc-jp", HV_CHARSET_FROM_META);
    /* Attributes in the other order, single quotes, no quotes, spaces around '='. */
    EXPECT_DECODE("<META CONTENT='text/html;charset = gbk' HTTP-EQUIV=content-type>\xD6\xD0",
                  NULL,
                  "<META CONTENT='text/html;charset = gbk' HTTP-EQUIV=content-type>"
                  "\xE4\xB8\xAD",
                  "gbk", HV_CHARSET_FROM_META);
    /* A quoted label inside content. */
    EXPECT_DECODE("<meta http-equiv=content-type content='text/html; charset=\"big5\"'>"
                  "\xA4\x40",
                  NULL,
                  "<meta http-equiv=content-type content='text/html; charset=\"big5\"'>"
                  "\xE4\xB8\x80",
                  "big5", HV_CHARSET_FROM_META);
    /* content= alone, or with another http-equiv, declares nothing. */
    EXPECT_AS_IS("<meta content=\"text/html; charset=gbk\">ok", NULL, "utf-8",
                 HV_CHARSET_FROM_DEFAULT);
    EXPECT_AS_IS("<meta http-equiv=refresh content=\"0; charset=gbk\">ok", NULL, "utf-8",
                 HV_CHARSET_FROM_DEFAULT);
    /* A charset attribute beats content= in the same tag. */
    EXPECT_DECODE("<meta content=\"text/html; charset=gbk\" http-equiv=Content-Type "
                  "charset=big5>\xA4\x40",
                  NULL,
                  "<meta content=\"text/html; charset=gbk\" http-equiv=Content-Type "
                  "charset=big5>\xE4\xB8\x80",
                  "big5", HV_CHARSET_FROM_META);
}

/* A page of `pad` spaces, then `tail`, then one byte that is not valid UTF-8. */
static char *padded_page(size_t pad, const char *tail, size_t *len)
{
    size_t tail_len = strlen(tail);
    char *page = malloc(pad + tail_len + 1);
    ASSERT_NOT_NULL(page);
    memset(page, ' ', pad);
    memcpy(page + pad, tail, tail_len);
    page[pad + tail_len] = '\xE9';
    *len = pad + tail_len + 1;
    return page;
}

TEST_IMPL(charset_meta_only_in_first_1024_bytes)
{
    static const char meta[] = "<meta charset=\"iso-8859-2\">"; /* 27 bytes */
    hv_charset_result_t r;
    size_t len;

    /* Ends at byte 1024 exactly: found. */
    char *page = padded_page(1024 - 27, meta, &len);
    hv_charset_decode(page, len, NULL, &r);
    ASSERT_STR_EQ("iso-8859-2", r.name);
    ASSERT_EQ(HV_CHARSET_FROM_META, r.source);
    hv_charset_result_free(&r);
    free(page);

    /* Starts before byte 1024 but ends after it: not found. */
    page = padded_page(1010, meta, &len);
    hv_charset_decode(page, len, NULL, &r);
    ASSERT_STR_EQ("windows-1252", r.name);
    ASSERT_EQ(HV_CHARSET_FROM_DEFAULT, r.source);
    hv_charset_result_free(&r);
    free(page);

    /* Entirely after: not found. */
    page = padded_page(1100, meta, &len);
    hv_charset_decode(page, len, NULL, &r);
    ASSERT_STR_EQ("windows-1252", r.name);
    ASSERT_EQ(HV_CHARSET_FROM_DEFAULT, r.source);
    hv_charset_result_free(&r);
    free(page);
}

TEST_IMPL(charset_meta_skips_comments_and_attributes)
{
    EXPECT_AS_IS("<!-- <meta charset=\"gbk\"> --><p>ok", NULL, "utf-8", HV_CHARSET_FROM_DEFAULT);
    /* An unterminated comment hides everything after it. */
    EXPECT_AS_IS("<!-- <meta charset=gbk>", NULL, "utf-8", HV_CHARSET_FROM_DEFAULT);
    /* "<!-->" and "<!--->" are complete comments. */
    EXPECT_DECODE("<!--><meta charset=gbk>\xD6\xD0", NULL, "<!--><meta charset=gbk>\xE4\xB8\xAD",
                  "gbk", HV_CHARSET_FROM_META);
    EXPECT_DECODE("<!---><meta charset=gbk>\xD6\xD0", NULL,
                  "<!---><meta charset=gbk>\xE4\xB8\xAD", "gbk", HV_CHARSET_FROM_META);
    /* Inside another tag's quoted attribute value, even with '>' in it. */
    EXPECT_AS_IS("<a title=\"x > <meta charset=gbk>\">ok</a>", NULL, "utf-8",
                 HV_CHARSET_FROM_DEFAULT);
    EXPECT_AS_IS("<img alt='>' <meta charset=gbk>ok", NULL, "utf-8", HV_CHARSET_FROM_DEFAULT);
    /* Not a meta tag, and a declaration-like bogus comment. */
    EXPECT_AS_IS("<metadata charset=gbk>ok", NULL, "utf-8", HV_CHARSET_FROM_DEFAULT);
    EXPECT_AS_IS("<!doctype html charset=gbk><p>", NULL, "utf-8", HV_CHARSET_FROM_DEFAULT);
    /* After all of those, a real one is still found. */
    EXPECT_DECODE("<!doctype html><!-- <meta charset=big5> --><a href='>'></a>"
                  "<meta charset=gbk>\xD6\xD0",
                  NULL,
                  "<!doctype html><!-- <meta charset=big5> --><a href='>'></a>"
                  "<meta charset=gbk>\xE4\xB8\xAD",
                  "gbk", HV_CHARSET_FROM_META);
}

TEST_IMPL(charset_xml_declaration)
{
    EXPECT_DECODE("<?xml version=\"1.0\" encoding=\"Shift_JIS\"?><p>\x83\x4A", NULL,
                  "<?xml version=\"1.0\" encoding=\"Shift_JIS\"?><p>\xE3\x82\xAB", "shift_jis",
                  HV_CHARSET_FROM_META);
    /* A <meta> wins over the declaration. */
    EXPECT_DECODE("<?xml version='1.0' encoding='shift_jis'?><meta charset=gbk>\xD6\xD0", NULL,
                  "<?xml version='1.0' encoding='shift_jis'?><meta charset=gbk>\xE4\xB8\xAD",
                  "gbk", HV_CHARSET_FROM_META);
    /* UTF-16 without a BOM, recognised by "<?x" in UTF-16. */
    EXPECT_DECODE("<\0?\0x\0m\0l\0", NULL, "<?xml", "utf-16le", HV_CHARSET_FROM_META);
    EXPECT_DECODE("\0<\0?\0x\0m\0l", NULL, "<?xml", "utf-16be", HV_CHARSET_FROM_META);
}

/* ---- labels ---------------------------------------------------------------------------------- */

#define LABEL(lit) hv_charset_label(lit, sizeof(lit) - 1)

TEST_IMPL(charset_label)
{
    ASSERT_STR_EQ("windows-1252", LABEL("Latin1"));
    ASSERT_STR_EQ("windows-1252", LABEL("ISO-8859-1"));
    ASSERT_STR_EQ("windows-1252", LABEL("us-ascii"));
    ASSERT_STR_EQ("utf-8", LABEL(" UTF8 "));
    ASSERT_STR_EQ("utf-8", LABEL("\t\n\f\rutf-8\r\n"));
    ASSERT_STR_EQ("shift_jis", LABEL("Shift_JIS"));
    ASSERT_STR_EQ("shift_jis", LABEL("  X-SJIS"));
    ASSERT_STR_EQ("gbk", LABEL("GB2312"));
    ASSERT_STR_EQ("gb18030", LABEL("gb18030"));
    ASSERT_STR_EQ("big5", LABEL("Big5-HKSCS"));
    ASSERT_STR_EQ("euc-kr", LABEL("KS_C_5601-1987"));
    ASSERT_STR_EQ("utf-16le", LABEL("utf-16"));
    ASSERT_STR_EQ("utf-16be", LABEL("UnicodeFFFE"));
    ASSERT_STR_EQ("replacement", LABEL("ISO-2022-KR"));
    ASSERT_STR_EQ("iso-8859-8-i", LABEL("iso-8859-8-i"));
    ASSERT_STR_EQ("windows-874", LABEL("TIS-620"));
    ASSERT_STR_EQ("koi8-u", LABEL("KOI8-RU"));
    ASSERT_STR_EQ("x-user-defined", LABEL("x-user-defined"));
    /* Only `len` bytes count. */
    ASSERT_STR_EQ("utf-8", hv_charset_label("utf-8, gbk", 5));

    ASSERT_NULL(LABEL(""));
    ASSERT_NULL(LABEL("   "));
    ASSERT_NULL(LABEL("utf-7"));
    ASSERT_NULL(LABEL("latin 1"));
    ASSERT_NULL(LABEL("utf-8x"));
    ASSERT_NULL(LABEL("utf\0-8"));
    ASSERT_NULL(LABEL("\vutf-8")); /* vertical tab is not ASCII whitespace here */
    ASSERT_NULL(LABEL("cseucpkdfmtjapanese-and-then-some"));
    ASSERT_NULL(hv_charset_label(NULL, 0));
}

/* Every label of the WHATWG Encoding Standard and the name it resolves to. */
static const struct {
    const char *label;
    const char *name;
} whatwg_labels[] = {
    {"unicode-1-1-utf-8", "utf-8"}, {"unicode11utf8", "utf-8"}, {"unicode20utf8", "utf-8"},
    {"utf-8", "utf-8"}, {"utf8", "utf-8"}, {"x-unicode20utf8", "utf-8"}, {"866", "ibm866"},
    {"cp866", "ibm866"}, {"csibm866", "ibm866"}, {"ibm866", "ibm866"},
    {"csisolatin2", "iso-8859-2"}, {"iso-8859-2", "iso-8859-2"}, {"iso-ir-101", "iso-8859-2"},
    {"iso8859-2", "iso-8859-2"}, {"iso88592", "iso-8859-2"}, {"iso_8859-2", "iso-8859-2"},
    {"iso_8859-2:1987", "iso-8859-2"}, {"l2", "iso-8859-2"}, {"latin2", "iso-8859-2"},
    {"csisolatin3", "iso-8859-3"}, {"iso-8859-3", "iso-8859-3"}, {"iso-ir-109", "iso-8859-3"},
    {"iso8859-3", "iso-8859-3"}, {"iso88593", "iso-8859-3"}, {"iso_8859-3", "iso-8859-3"},
    {"iso_8859-3:1988", "iso-8859-3"}, {"l3", "iso-8859-3"}, {"latin3", "iso-8859-3"},
    {"csisolatin4", "iso-8859-4"}, {"iso-8859-4", "iso-8859-4"}, {"iso-ir-110", "iso-8859-4"},
    {"iso8859-4", "iso-8859-4"}, {"iso88594", "iso-8859-4"}, {"iso_8859-4", "iso-8859-4"},
    {"iso_8859-4:1988", "iso-8859-4"}, {"l4", "iso-8859-4"}, {"latin4", "iso-8859-4"},
    {"csisolatincyrillic", "iso-8859-5"}, {"cyrillic", "iso-8859-5"}, {"iso-8859-5", "iso-8859-5"},
    {"iso-ir-144", "iso-8859-5"}, {"iso8859-5", "iso-8859-5"}, {"iso88595", "iso-8859-5"},
    {"iso_8859-5", "iso-8859-5"}, {"iso_8859-5:1988", "iso-8859-5"}, {"arabic", "iso-8859-6"},
    {"asmo-708", "iso-8859-6"}, {"csiso88596e", "iso-8859-6"}, {"csiso88596i", "iso-8859-6"},
    {"csisolatinarabic", "iso-8859-6"}, {"ecma-114", "iso-8859-6"}, {"iso-8859-6", "iso-8859-6"},
    {"iso-8859-6-e", "iso-8859-6"}, {"iso-8859-6-i", "iso-8859-6"}, {"iso-ir-127", "iso-8859-6"},
    {"iso8859-6", "iso-8859-6"}, {"iso88596", "iso-8859-6"}, {"iso_8859-6", "iso-8859-6"},
    {"iso_8859-6:1987", "iso-8859-6"}, {"csisolatingreek", "iso-8859-7"},
    {"ecma-118", "iso-8859-7"}, {"elot_928", "iso-8859-7"}, {"greek", "iso-8859-7"},
    {"greek8", "iso-8859-7"}, {"iso-8859-7", "iso-8859-7"}, {"iso-ir-126", "iso-8859-7"},
    {"iso8859-7", "iso-8859-7"}, {"iso88597", "iso-8859-7"}, {"iso_8859-7", "iso-8859-7"},
    {"iso_8859-7:1987", "iso-8859-7"}, {"sun_eu_greek", "iso-8859-7"},
    {"csiso88598e", "iso-8859-8"}, {"csisolatinhebrew", "iso-8859-8"}, {"hebrew", "iso-8859-8"},
    {"iso-8859-8", "iso-8859-8"}, {"iso-8859-8-e", "iso-8859-8"}, {"iso-ir-138", "iso-8859-8"},
    {"iso8859-8", "iso-8859-8"}, {"iso88598", "iso-8859-8"}, {"iso_8859-8", "iso-8859-8"},
    {"iso_8859-8:1988", "iso-8859-8"}, {"visual", "iso-8859-8"}, {"csiso88598i", "iso-8859-8-i"},
    {"iso-8859-8-i", "iso-8859-8-i"}, {"logical", "iso-8859-8-i"}, {"csisolatin6", "iso-8859-10"},
    {"iso-8859-10", "iso-8859-10"}, {"iso-ir-157", "iso-8859-10"}, {"iso8859-10", "iso-8859-10"},
    {"iso885910", "iso-8859-10"}, {"l6", "iso-8859-10"}, {"latin6", "iso-8859-10"},
    {"iso-8859-13", "iso-8859-13"}, {"iso8859-13", "iso-8859-13"}, {"iso885913", "iso-8859-13"},
    {"iso-8859-14", "iso-8859-14"}, {"iso8859-14", "iso-8859-14"}, {"iso885914", "iso-8859-14"},
    {"csisolatin9", "iso-8859-15"}, {"iso-8859-15", "iso-8859-15"}, {"iso8859-15", "iso-8859-15"},
    {"iso885915", "iso-8859-15"}, {"iso_8859-15", "iso-8859-15"}, {"l9", "iso-8859-15"},
    {"iso-8859-16", "iso-8859-16"}, {"cskoi8r", "koi8-r"}, {"koi", "koi8-r"}, {"koi8", "koi8-r"},
    {"koi8-r", "koi8-r"}, {"koi8_r", "koi8-r"}, {"koi8-ru", "koi8-u"}, {"koi8-u", "koi8-u"},
    {"csmacintosh", "macintosh"}, {"mac", "macintosh"}, {"macintosh", "macintosh"},
    {"x-mac-roman", "macintosh"}, {"dos-874", "windows-874"}, {"iso-8859-11", "windows-874"},
    {"iso8859-11", "windows-874"}, {"iso885911", "windows-874"}, {"tis-620", "windows-874"},
    {"windows-874", "windows-874"}, {"cp1250", "windows-1250"}, {"windows-1250", "windows-1250"},
    {"x-cp1250", "windows-1250"}, {"cp1251", "windows-1251"}, {"windows-1251", "windows-1251"},
    {"x-cp1251", "windows-1251"}, {"ansi_x3.4-1968", "windows-1252"}, {"ascii", "windows-1252"},
    {"cp1252", "windows-1252"}, {"cp819", "windows-1252"}, {"csisolatin1", "windows-1252"},
    {"ibm819", "windows-1252"}, {"iso-8859-1", "windows-1252"}, {"iso-ir-100", "windows-1252"},
    {"iso8859-1", "windows-1252"}, {"iso88591", "windows-1252"}, {"iso_8859-1", "windows-1252"},
    {"iso_8859-1:1987", "windows-1252"}, {"l1", "windows-1252"}, {"latin1", "windows-1252"},
    {"us-ascii", "windows-1252"}, {"windows-1252", "windows-1252"}, {"x-cp1252", "windows-1252"},
    {"cp1253", "windows-1253"}, {"windows-1253", "windows-1253"}, {"x-cp1253", "windows-1253"},
    {"cp1254", "windows-1254"}, {"csisolatin5", "windows-1254"}, {"iso-8859-9", "windows-1254"},
    {"iso-ir-148", "windows-1254"}, {"iso8859-9", "windows-1254"}, {"iso88599", "windows-1254"},
    {"iso_8859-9", "windows-1254"}, {"iso_8859-9:1989", "windows-1254"}, {"l5", "windows-1254"},
    {"latin5", "windows-1254"}, {"windows-1254", "windows-1254"}, {"x-cp1254", "windows-1254"},
    {"cp1255", "windows-1255"}, {"windows-1255", "windows-1255"}, {"x-cp1255", "windows-1255"},
    {"cp1256", "windows-1256"}, {"windows-1256", "windows-1256"}, {"x-cp1256", "windows-1256"},
    {"cp1257", "windows-1257"}, {"windows-1257", "windows-1257"}, {"x-cp1257", "windows-1257"},
    {"cp1258", "windows-1258"}, {"windows-1258", "windows-1258"}, {"x-cp1258", "windows-1258"},
    {"x-mac-cyrillic", "x-mac-cyrillic"}, {"x-mac-ukrainian", "x-mac-cyrillic"}, {"chinese", "gbk"},
    {"csgb2312", "gbk"}, {"csiso58gb231280", "gbk"}, {"gb2312", "gbk"}, {"gb_2312", "gbk"},
    {"gb_2312-80", "gbk"}, {"gbk", "gbk"}, {"iso-ir-58", "gbk"}, {"x-gbk", "gbk"},
    {"gb18030", "gb18030"}, {"big5", "big5"}, {"big5-hkscs", "big5"}, {"cn-big5", "big5"},
    {"csbig5", "big5"}, {"x-x-big5", "big5"}, {"cseucpkdfmtjapanese", "euc-jp"},
    {"euc-jp", "euc-jp"}, {"x-euc-jp", "euc-jp"}, {"csiso2022jp", "iso-2022-jp"},
    {"iso-2022-jp", "iso-2022-jp"}, {"csshiftjis", "shift_jis"}, {"ms932", "shift_jis"},
    {"ms_kanji", "shift_jis"}, {"shift-jis", "shift_jis"}, {"shift_jis", "shift_jis"},
    {"sjis", "shift_jis"}, {"windows-31j", "shift_jis"}, {"x-sjis", "shift_jis"},
    {"cseuckr", "euc-kr"}, {"csksc56011987", "euc-kr"}, {"euc-kr", "euc-kr"},
    {"iso-ir-149", "euc-kr"}, {"korean", "euc-kr"}, {"ks_c_5601-1987", "euc-kr"},
    {"ks_c_5601-1989", "euc-kr"}, {"ksc5601", "euc-kr"}, {"ksc_5601", "euc-kr"},
    {"windows-949", "euc-kr"}, {"csiso2022kr", "replacement"}, {"hz-gb-2312", "replacement"},
    {"iso-2022-cn", "replacement"}, {"iso-2022-cn-ext", "replacement"},
    {"iso-2022-kr", "replacement"}, {"replacement", "replacement"}, {"unicodefffe", "utf-16be"},
    {"utf-16be", "utf-16be"}, {"csunicode", "utf-16le"}, {"iso-10646-ucs-2", "utf-16le"},
    {"ucs-2", "utf-16le"}, {"unicode", "utf-16le"}, {"unicodefeff", "utf-16le"},
    {"utf-16", "utf-16le"}, {"utf-16le", "utf-16le"}, {"x-user-defined", "x-user-defined"},
};

TEST_IMPL(charset_label_every_whatwg_label)
{
    ASSERT_EQ(228, HV_ARRAY_SIZE(whatwg_labels));
    for (size_t i = 0; i < HV_ARRAY_SIZE(whatwg_labels); i++) {
        const char *label = whatwg_labels[i].label;
        size_t n = strlen(label);
        ASSERT_STR_EQ(whatwg_labels[i].name, hv_charset_label(label, n));

        char upper[32];
        ASSERT_LT(n, sizeof(upper));
        for (size_t k = 0; k <= n; k++)
            upper[k] = (label[k] >= 'a' && label[k] <= 'z') ? (char)(label[k] - 32) : label[k];
        ASSERT_STR_EQ(whatwg_labels[i].name, hv_charset_label(upper, n));
    }
}

/* Multi-byte input reaches iconv in windows: put a character across every nearby boundary. */
TEST_IMPL(charset_sequences_across_iconv_windows)
{
    static const struct {
        const char *content_type;
        const char *seq;
        const char *want;
    } cases[] = {
        {CT("shift_jis"), "\x83\x4A\x83\x5E", "\xE3\x82\xAB\xE3\x82\xBF"},
        {CT("gb18030"), "\x81\x30\x81\x30\xD6\xD0", "\xC2\x80\xE4\xB8\xAD"},
        {CT("euc-jp"), "\x8F\xA2\xAF\xA4\xA2", "\xCB\x98\xE3\x81\x82"},
        {CT("iso-2022-jp"), "\x1B$B$\"\x1B(Bb", "\xE3\x81\x82"
                                               "b"},
    };
    char page[2200], want[2200];

    for (size_t c = 0; c < HV_ARRAY_SIZE(cases); c++) {
        for (size_t pad = 1000; pad < 1040; pad++) {
            size_t seq_len = strlen(cases[c].seq), want_len = strlen(cases[c].want);
            memset(page, 'a', pad);
            memcpy(page + pad, cases[c].seq, seq_len);
            memset(want, 'a', pad);
            memcpy(want + pad, cases[c].want, want_len);

            hv_charset_result_t r;
            hv_charset_decode(page, pad + seq_len, cases[c].content_type, &r);
            ASSERT_NOT_NULL(r.text);
            expect_bytes(__LINE__, want, pad + want_len, r.text, r.len);
            hv_charset_result_free(&r);
        }
    }
}

/* ---- size and threads ------------------------------------------------------------------------ */

TEST_IMPL(charset_large_windows_1252_page_is_linear)
{
    static const char unit[] = "<p>caf\xE9 \x80 na\xEFve</p>\n";
    static const char want[] = "<p>caf\xC3\xA9 \xE2\x82\xAC na\xC3\xAFve</p>\n";
    const size_t unit_len = sizeof(unit) - 1, want_len = sizeof(want) - 1;
    const size_t reps = (1024 * 1024) / unit_len;

    char *page = malloc(reps * unit_len);
    ASSERT_NOT_NULL(page);
    for (size_t i = 0; i < reps; i++)
        memcpy(page + i * unit_len, unit, unit_len);

    uint64_t t0 = hv_mono_ms();
    hv_charset_result_t r;
    hv_charset_decode(page, reps * unit_len, NULL, &r);
    uint64_t elapsed = hv_mono_ms() - t0;

    ASSERT_STR_EQ("windows-1252", r.name);
    ASSERT_EQ(HV_CHARSET_FROM_DEFAULT, r.source);
    ASSERT_EQ(reps * want_len, r.len);
    for (size_t i = 0; i < reps; i++)
        ASSERT_MEM_EQ(want, r.text + i * want_len, want_len);
    ASSERT(hv_utf8_valid(r.text, r.len));
    /* Milliseconds in practice, even under sanitizers; a quadratic loop would take minutes. */
    ASSERT_LT(elapsed, 2000);
    hv_charset_result_free(&r);
    free(page);
}

TEST_IMPL(charset_large_shift_jis_page_with_errors_is_linear)
{
    /* Katakana, ASCII and an invalid byte in every unit: one iconv restart per unit. */
    static const char unit[] = "\x83\x4A\x83\x5E ab\xA0";
    static const char want[] = "\xE3\x82\xAB\xE3\x82\xBF ab" FFFD;
    const size_t unit_len = sizeof(unit) - 1, want_len = sizeof(want) - 1;
    const size_t reps = (1024 * 1024) / unit_len;

    char *page = malloc(reps * unit_len);
    ASSERT_NOT_NULL(page);
    for (size_t i = 0; i < reps; i++)
        memcpy(page + i * unit_len, unit, unit_len);

    uint64_t t0 = hv_mono_ms();
    hv_charset_result_t r;
    hv_charset_decode(page, reps * unit_len, CT("shift_jis"), &r);
    uint64_t elapsed = hv_mono_ms() - t0;

    ASSERT_EQ(reps * want_len, r.len);
    for (size_t i = 0; i < reps; i++)
        ASSERT_MEM_EQ(want, r.text + i * want_len, want_len);
    ASSERT_LT(elapsed, 5000);
    hv_charset_result_free(&r);
    free(page);
}

/*
 * Parse workers decode concurrently, so results must not depend on what other threads do.
 * Only one of the cases goes through iconv: with several converters in turn, glibc unloads
 * and reloads its gconv modules from whichever thread happens to release one, and
 * ThreadSanitizer, which does not see the dynamic loader's own locks, reports that as a race.
 */
static const struct {
    const char *content_type;
    const char *body;
    size_t body_len;
    const char *want;
} concurrent_cases[] = {
#define CONCURRENT_CASE(ct, body, want) {ct, body, sizeof(body) - 1, want}
    CONCURRENT_CASE(CT("shift_jis"), "<p>\x83\x4A\x81 x</p>", "<p>\xE3\x82\xAB" FFFD " x</p>"),
    CONCURRENT_CASE(NULL, "<p>\x80\xE9</p>", "<p>\xE2\x82\xAC\xC3\xA9</p>"),
    CONCURRENT_CASE(CT("utf-16"), "<\0p\0>\0\x3D\xD8", "<p>" FFFD),
    CONCURRENT_CASE(CT("x-user-defined"), "\x80", "\xEF\x9E\x80"),
#undef CONCURRENT_CASE
};

static void *decode_worker(void *arg)
{
    int *failed = arg;

    for (size_t round = 0; round < 400; round++) {
        size_t k = round % HV_ARRAY_SIZE(concurrent_cases);
        hv_charset_result_t r;
        hv_charset_decode(concurrent_cases[k].body, concurrent_cases[k].body_len,
                          concurrent_cases[k].content_type, &r);
        if (r.text == NULL || r.len != strlen(concurrent_cases[k].want) ||
            memcmp(r.text, concurrent_cases[k].want, r.len) != 0)
            *failed = 1;
        hv_charset_result_free(&r);
    }
    return NULL;
}

TEST_IMPL(charset_concurrent_decoding)
{
    pthread_t threads[4];
    int failed[4] = {0, 0, 0, 0};

    for (int i = 0; i < 4; i++)
        ASSERT_OK(pthread_create(&threads[i], NULL, decode_worker, &failed[i]));
    for (int i = 0; i < 4; i++)
        ASSERT_OK(pthread_join(threads[i], NULL));
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(0, failed[i]);
}
