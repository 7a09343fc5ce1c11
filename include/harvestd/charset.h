/*
 * charset.h: decoding a page to UTF-8 before gumbo sees it, following the HTML
 * encoding-sniffing algorithm in spirit. Pure functions: safe on any thread (parse workers).
 *
 * Order of evidence: a byte-order mark (UTF-8, UTF-16LE, UTF-16BE); the charset parameter of
 * the Content-Type header; the HTML standard's prescan of the first 1024 bytes, which finds
 * <meta charset> / <meta http-equiv="Content-Type" content="...charset=..."> outside comments
 * and other tags' attribute values, and failing that an XML declaration
 * (<?xml ... encoding="..."?>) or "<?x" in UTF-16 at the very start; then a fallback: UTF-8
 * when the bytes are valid UTF-8, else windows-1252. An unknown label is no evidence.
 *
 * Labels are mapped as the WHATWG Encoding Standard does ("latin1", "iso-8859-1", "ascii"
 * mean windows-1252; "shift_jis" decodes as CP932; "gb2312" means gbk, which WHATWG decodes
 * with the gb18030 decoder, ...). windows-1252 and x-user-defined are decoded with our own
 * tables; windows-1252's five bytes that glibc rejects (0x81, 0x8D, 0x8F, 0x90, 0x9D) decode
 * to U+0081... as WHATWG says. Other single-byte encodings use a table filled from glibc's
 * iconv on each call, with WHATWG's few differences applied; multi-byte encodings go through
 * glibc's iconv in a loop of our own that writes U+FFFD for each invalid sequence and goes
 * on: a page is never dropped for its encoding. A prescan that names UTF-16 means UTF-8 and
 * one that names x-user-defined means windows-1252 (HTML standard); "replacement" labels
 * (iso-2022-kr, hz-gb-2312, ...) turn a non-empty page into a single U+FFFD (WHATWG).
 */
#ifndef HARVESTD_CHARSET_H
#define HARVESTD_CHARSET_H

#include <stddef.h>

typedef struct {
    char *text;         /* malloc'd UTF-8 (NUL-terminated), or NULL when `body` can be used
                           as it is (UTF-8, no BOM to drop; an empty body) */
    size_t len;         /* length of text (or of body when text is NULL) */
    char name[32];      /* the encoding used, WHATWG name in lower case: "utf-8",
                           "windows-1252", "shift_jis", "gbk", "utf-16le", ... If glibc
                           lacks a converter (no gconv modules), the page is decoded as
                           windows-1252 and the name says so. */
    int source;         /* which evidence decided: see HV_CHARSET_FROM_* */
    int unchecked;      /* text is NULL and the body, declared UTF-8 (by its BOM-less header
                           or <meta>), was not validated: it may hold invalid sequences,
                           which its reader replaces with U+FFFD in the bytes it reads (as
                           html.h does). A page read only in part (the title fast path) is
                           then never validated whole. 0: the bytes are valid UTF-8. */
} hv_charset_result_t;

enum {
    HV_CHARSET_FROM_BOM = 1,
    HV_CHARSET_FROM_HEADER,
    HV_CHARSET_FROM_META,    /* the prescan: <meta>, or an XML declaration */
    HV_CHARSET_FROM_DEFAULT,
};

/**
 * Decode `body` (len bytes, may be NULL when len is 0) given the raw Content-Type header
 * value (NULL if none). Always succeeds: unknown labels fall through to the next evidence,
 * invalid sequences become U+FFFD. A leading BOM is removed from the output. Free with
 * hv_charset_result_free().
 */
void hv_charset_decode(const char *body, size_t len, const char *content_type,
                       hv_charset_result_t *out);

void hv_charset_result_free(hv_charset_result_t *r);

/**
 * Load every iconv converter once and keep it loaded (glibc would otherwise unload and
 * reload modules as encodings rotate, ~1000x slower). Call at start-up, before any worker
 * runs; hv_charset_unload() at exit.
 */
void hv_charset_preload(void);
void hv_charset_unload(void);

/**
 * The WHATWG encoding name for a label ("Latin1" -> "windows-1252", " UTF8 " -> "utf-8"),
 * or NULL if the label is unknown. Matching is ASCII case-insensitive and ignores
 * surrounding whitespace.
 */
const char *hv_charset_label(const char *label, size_t len);

#endif
