/*
 * charset: encoding sniffing and decoding to UTF-8 (charset.h), and UTF-8 repair (utf8.h).
 *
 * Input: one flags byte; with bit 0 set, a Content-Type header value follows, up to the first
 * '\n' (a header value never holds one); the rest is the body. What charset.h promises:
 *   - the result is valid UTF-8: the decoded copy (NUL-terminated), or the body itself when
 *     no copy was needed, which is then UTF-8 without a BOM, valid unless `unchecked` says
 *     that declared UTF-8 was left to its reader to repair;
 *   - the encoding's name is a WHATWG name (a label of itself), the evidence one of the four;
 *   - decoding the result again as UTF-8 leaves it as it is (a leading BOM aside).
 * And of hv_utf8_sanitize(): valid output, equal to the input when that was valid.
 */
#include <string.h>

#include "fuzz.h"
#include "harvestd/charset.h"
#include "harvestd/common.h"
#include "harvestd/utf8.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    hv_charset_preload(); /* as the daemon does at start-up */
    return 0;
}

static const char bom[] = "\xEF\xBB\xBF";

static void check_sanitize(const char *s, size_t len)
{
    size_t out_len;
    char *out = hv_utf8_sanitize(s, len, &out_len);
    FUZZ_CHECK(out != NULL && out[out_len] == '\0', "sanitize result not terminated");
    FUZZ_CHECK(hv_utf8_valid(out, out_len), "sanitize result not UTF-8");
    if (hv_utf8_valid(s, len))
        FUZZ_CHECK(out_len == len && memcmp(out, s, len) == 0, "valid input changed");
    else
        FUZZ_CHECK(out_len >= 3, "an invalid input without U+FFFD");
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    uint8_t flags = fuzz_byte(&in);
    char *ct = NULL;
    if (flags & 1) {
        const uint8_t *nl = memchr(in.p, '\n', in.left);
        size_t n = nl != NULL ? (size_t)(nl - in.p) : in.left;
        ct = fuzz_strndup(in.p, n);
        in.p += n;
        in.left -= n;
        if (nl != NULL) {
            in.p++;
            in.left--;
        }
    }
    size_t len = in.left;
    char *body = len > 0 ? fuzz_strndup(in.p, len) : NULL;

    hv_charset_result_t r;
    hv_charset_decode(body, len, ct, &r);
    FUZZ_CHECK(memchr(r.name, '\0', sizeof(r.name)) != NULL && r.name[0] != '\0', "no name");
    FUZZ_CHECK(r.source >= HV_CHARSET_FROM_BOM && r.source <= HV_CHARSET_FROM_DEFAULT,
               "source %d", r.source);
    const char *label = hv_charset_label(r.name, strlen(r.name));
    FUZZ_CHECK(label != NULL && strcmp(label, r.name) == 0, "name %s is not a WHATWG name",
               r.name);
    if (r.source == HV_CHARSET_FROM_BOM)
        FUZZ_CHECK(strcmp(r.name, "utf-8") == 0 || strcmp(r.name, "utf-16le") == 0 ||
                       strcmp(r.name, "utf-16be") == 0,
                   "a BOM said %s", r.name);
    const char *text;
    if (r.text == NULL) {
        FUZZ_CHECK(r.len == len, "as is, but %zu of %zu bytes", r.len, len);
        FUZZ_CHECK(strcmp(r.name, "utf-8") == 0, "body used as is for %s", r.name);
        FUZZ_CHECK(r.unchecked ? r.source == HV_CHARSET_FROM_HEADER || r.source == HV_CHARSET_FROM_META
                               : hv_utf8_valid(body, len),
                   "body used as is but not UTF-8 (source %d)", r.source);
        FUZZ_CHECK(len < 3 || memcmp(body, bom, 3) != 0, "body used as is with its BOM");
        text = body != NULL ? body : "";
    } else {
        FUZZ_CHECK(r.text[r.len] == '\0', "decoded text not terminated");
        FUZZ_CHECK(hv_utf8_valid(r.text, r.len), "decoded text not UTF-8 (%s)", r.name);
        text = r.text;
    }

    /* UTF-8 decodes to itself. */
    hv_charset_result_t again;
    hv_charset_decode(r.len > 0 ? text : NULL, r.len, "text/html; charset=utf-8", &again);
    FUZZ_CHECK(strcmp(again.name, "utf-8") == 0, "UTF-8 output read as %s", again.name);
    if (again.text == NULL) {
        FUZZ_CHECK(again.len == r.len, "length changed");
    } else {
        /* Only a leading BOM may go. */
        FUZZ_CHECK(r.len >= 3 && memcmp(text, bom, 3) == 0 && again.len == r.len - 3 &&
                       memcmp(again.text, text + 3, again.len) == 0,
                   "UTF-8 output changed when decoded again");
    }
    hv_charset_result_free(&again);

    if (ct != NULL) {
        const char *l = hv_charset_label(ct, strlen(ct));
        if (l != NULL)
            FUZZ_CHECK(strcmp(hv_charset_label(l, strlen(l)), l) == 0, "%s is not its own label",
                       l);
    }
    check_sanitize(body != NULL ? body : "", len);

    hv_charset_result_free(&r);
    FUZZ_CHECK(r.text == NULL, "result not cleared");
    free(body);
    free(ct);
    return 0;
}
