/*
 * test_merge.c: gathering per-daemon outputs of a batch (merge.h): the fetched_at key, what
 * a line is, which record of a line wins, which files a directory stands for, and the lines
 * that are skipped (torn, too long, of other batches). Files live in the test's temporary
 * directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harvestd/common.h"
#include "harvestd/merge.h"
#include "harvestd/record.h"
#include "harvestd/streamkeys.h"
#include "test.h"

static char err[1024];

/* A path under the test's directory (no limit on how many, unlike hv_test_tmppath()). */
static char *path_of(const char *rel)
{
    size_t n = strlen(hv_test_tmpdir()) + 1 + strlen(rel) + 1;
    char *p = hv_xmalloc(n);
    snprintf(p, n, "%s/%s", hv_test_tmpdir(), rel);
    return p;
}

static void make_dir(const char *rel)
{
    char *p = path_of(rel);
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        hv_test_fail(__FILE__, __LINE__, "mkdir %s: %s", p, strerror(errno));
    free(p);
}

static void put(const char *rel, const char *text)
{
    char *p = path_of(rel);
    hv_test_write_file(p, text, strlen(text));
    free(p);
}

/* The strings up to NULL, each followed by a newline (the caller frees the result). */
static char *lines_of(const char *first, ...)
{
    size_t n = 0, cap = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s != NULL; s = va_arg(ap, const char *))
        cap += strlen(s) + 1;
    va_end(ap);
    char *out = hv_xmalloc(cap);
    va_start(ap, first);
    for (const char *s = first; s != NULL; s = va_arg(ap, const char *)) {
        memcpy(out + n, s, strlen(s));
        n += strlen(s);
        out[n++] = '\n';
    }
    va_end(ap);
    out[n] = '\0';
    return out;
}

#define ASSERT_LINES(text, ...)                                                                    \
    do {                                                                                           \
        char *want_ = lines_of(__VA_ARGS__, (const char *)NULL);                                   \
        ASSERT_STR_EQ(want_, (text));                                                              \
        free(want_);                                                                               \
    } while (0)

#define PUT_LINES(rel, ...)                                                                        \
    do {                                                                                           \
        char *data_ = lines_of(__VA_ARGS__, (const char *)NULL);                                   \
        put((rel), data_);                                                                         \
        free(data_);                                                                               \
    } while (0)

/* Merge `batch` from the inputs (relative paths): the output's text (the caller frees it),
 * and the counts in *st. `depth`: the sort's depth bound (hv_merge__select_depth()), or -1
 * for hv_merge_select()'s own. */
static char *merge_depth(const char *batch, const char *const *inputs, size_t n, int depth,
                         hv_merge_stats_t *st)
{
    static int calls;
    char name[64];
    snprintf(name, sizeof(name), "merged-%d.jsonl", calls++);
    char *out = path_of(name);
    hv_merge_t *m = hv_merge_new(batch);
    for (size_t i = 0; i < n; i++) {
        char *p = path_of(inputs[i]);
        ASSERT_OK(hv_merge_add_input(m, p, err, sizeof(err)));
        free(p);
    }
    ASSERT_OK(hv_merge_index(m, err, sizeof(err)));
    if (depth < 0)
        hv_merge_select(m);
    else
        hv_merge__select_depth(m, (unsigned)depth);
    int fd = open(out, O_WRONLY | O_CREAT | O_EXCL, 0644);
    ASSERT(fd >= 0);
    ASSERT_OK(hv_merge_write(m, fd, out, err, sizeof(err)));
    ASSERT_OK(close(fd));
    hv_merge_get_stats(m, st);
    hv_merge_free(m);
    char *text = hv_test_read_file(out, NULL);
    free(out);
    return text;
}

static char *merge_paths(const char *batch, const char *const *inputs, size_t n,
                         hv_merge_stats_t *st)
{
    return merge_depth(batch, inputs, n, -1, st);
}

static char *merge1(const char *batch, const char *input, hv_merge_stats_t *st)
{
    return merge_paths(batch, &input, 1, st);
}

/* A record of batch "b" whose title tells which it is. */
#define REC(line, at, title)                                                                       \
    "{\"requested_url\":\"http://x.test/" #line "\",\"batch\":\"b\",\"line\":" #line               \
    ",\"status\":\"ok\",\"title\":\"" title "\",\"fetched_at\":\"" at "\"}"
#define REC_NO_AT(line, title)                                                                     \
    "{\"requested_url\":\"http://x.test/" #line "\",\"batch\":\"b\",\"line\":" #line               \
    ",\"status\":\"failed\",\"title\":\"" title "\"}"

#define T1 "2026-12-01T10:00:00.000Z"
#define T2 "2026-12-01T10:00:00.001Z"
#define T3 "2026-12-02T09:00:00.500Z"

/* ------------------------------------------------------------------------ fetched_at */

TEST_IMPL(merge_time_key_orders_like_the_time)
{
    ASSERT_EQ(20261129120000123u, hv_merge_time_key("2026-11-29T12:00:00.123Z"));
    ASSERT_LT(hv_merge_time_key(T1), hv_merge_time_key(T2));
    ASSERT_LT(hv_merge_time_key(T2), hv_merge_time_key(T3));
    ASSERT_LT(hv_merge_time_key("2026-12-31T23:59:59.999Z"),
              hv_merge_time_key("2027-01-01T00:00:00.000Z"));
    /* Other spellings RFC 3339 allows, to the millisecond. */
    ASSERT_EQ(20261129120000000u, hv_merge_time_key("2026-11-29T12:00:00Z"));
    ASSERT_EQ(20261129120000500u, hv_merge_time_key("2026-11-29T12:00:00.5Z"));
    ASSERT_EQ(20261129120000123u, hv_merge_time_key("2026-11-29t12:00:00.123456z"));
    ASSERT_EQ(20161231235960000u, hv_merge_time_key("2016-12-31T23:59:60Z")); /* leap second */
    ASSERT_GT(hv_merge_time_key("0000-01-01T00:00:00.000Z"), 0);
}

TEST_IMPL(merge_time_key_is_zero_for_what_is_not_a_utc_time)
{
    static const char *const bad[] = {
        "",
        "2026-11-29",
        "2026-11-29T12:00:00.123",       /* no zone */
        "2026-11-29T12:00:00.123+01:00", /* not UTC */
        "2026-11-29 12:00:00.123Z",
        "2026-11-29T12:00:00.Z", /* a point without digits */
        "2026-11-29T12:00:00.123Z ",
        "2026-13-29T12:00:00.123Z",
        "2026-11-00T12:00:00.123Z",
        "2026-11-29T24:00:00.123Z",
        "2026-11-29T12:60:00.123Z",
        "2026-11-29T12:00:61.123Z",
        "2026-1a-29T12:00:00.123Z",
        "+2026-11-29T12:00:00.123Z",
    };
    ASSERT_EQ(0, hv_merge_time_key(NULL));
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++)
        if (hv_merge_time_key(bad[i]) != 0)
            hv_test_fail(__FILE__, __LINE__, "\"%s\" has a key", bad[i]);
}

/* ------------------------------------------------------------------------ lines */

static hv_merge_line_t kind_of(const char *text, uint64_t *line, uint64_t *at)
{
    uint64_t l = 0, a = 0;
    hv_merge_line_t k =
        hv_merge_parse_line(text, strlen(text), "b", line ? line : &l, at ? at : &a);
    return k;
}

TEST_IMPL(merge_parse_line_takes_records_of_the_batch)
{
    uint64_t line = 0, at = 1;
    ASSERT_EQ(HV_MERGE_LINE_RECORD, kind_of(REC(7, T1, "x"), &line, &at));
    ASSERT_EQ(7, line);
    ASSERT_EQ(hv_merge_time_key(T1), at);
    ASSERT_EQ(HV_MERGE_LINE_RECORD, kind_of(REC_NO_AT(3, "x"), &line, &at));
    ASSERT_EQ(3, line);
    ASSERT_EQ(0, at);
    /* A fetched_at that is not a time counts as none. */
    ASSERT_EQ(HV_MERGE_LINE_RECORD,
              kind_of("{\"batch\":\"b\",\"line\":2,\"fetched_at\":12}", &line, &at));
    ASSERT_EQ(0, at);
    ASSERT_EQ(HV_MERGE_LINE_RECORD,
              kind_of("{\"batch\":\"b\",\"line\":2,\"fetched_at\":\"yesterday\"}", &line, &at));
    ASSERT_EQ(0, at);
    /* Keys in any order, blanks inside the object, the largest exact line. */
    ASSERT_EQ(HV_MERGE_LINE_RECORD, kind_of("{ \"line\" : 1e3 , \"batch\" : \"b\" }", &line, &at));
    ASSERT_EQ(1000, line);
    ASSERT_EQ(HV_MERGE_LINE_RECORD,
              kind_of("{\"batch\":\"b\",\"line\":9007199254740992}", &line, &at));
    ASSERT_EQ(9007199254740992u, line);
}

TEST_IMPL(merge_parse_line_refuses_what_is_not_a_record)
{
    static const char *const bad[] = {
        "",
        " ",
        "not json",
        "[1,2]",
        "\"b\"",
        "{\"batch\":\"b\",\"line\":1",   /* torn */
        "{\"batch\":\"b\",\"line\":1} ", /* anything after the object */
        "{\"batch\":\"b\",\"line\":1}\r",
        "{\"batch\":\"b\",\"line\":1}{}",
        "{\"batch\":\"b\"}", /* no line */
        "{\"batch\":\"b\",\"line\":0}",
        "{\"batch\":\"b\",\"line\":-1}",
        "{\"batch\":\"b\",\"line\":1.5}",
        "{\"batch\":\"b\",\"line\":\"1\"}",
        "{\"batch\":\"b\",\"line\":null}",
        "{\"batch\":\"b\",\"line\":1e300}",
        "{\"batch\":\"b\",\"line\":18014398509481984}", /* 2^54: no longer exact */
        "{\"line\":1}",                                 /* no batch */
        "{\"batch\":1,\"line\":1}",
        "{\"batch\":null,\"line\":1}",
        "{\"Batch\":\"b\",\"line\":1}",
        "{\"requested_url\":\"http://x.test/\",\"status\":\"ok\"}", /* a spool batch's record */
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(bad); i++)
        if (kind_of(bad[i], NULL, NULL) != HV_MERGE_LINE_INVALID)
            hv_test_fail(__FILE__, __LINE__, "'%s' is not refused", bad[i]);
}

TEST_IMPL(merge_parse_line_tells_other_batches)
{
    ASSERT_EQ(HV_MERGE_LINE_OTHER_BATCH, kind_of("{\"batch\":\"c\",\"line\":1}", NULL, NULL));
    ASSERT_EQ(HV_MERGE_LINE_OTHER_BATCH, kind_of("{\"batch\":\"B\",\"line\":1}", NULL, NULL));
    ASSERT_EQ(HV_MERGE_LINE_OTHER_BATCH, kind_of("{\"batch\":\"b \",\"line\":1}", NULL, NULL));
    ASSERT_EQ(HV_MERGE_LINE_OTHER_BATCH, kind_of("{\"batch\":\"\",\"line\":1}", NULL, NULL));
    /* Another batch's, whatever its line. */
    ASSERT_EQ(HV_MERGE_LINE_OTHER_BATCH, kind_of("{\"batch\":\"c\",\"line\":0}", NULL, NULL));
    /* The batch is compared exactly: not as the file name spells it. */
    uint64_t line, at;
    ASSERT_EQ(HV_MERGE_LINE_RECORD,
              hv_merge_parse_line("{\"batch\":\"a b\",\"line\":1}", 24, "a b", &line, &at));
    ASSERT_EQ(HV_MERGE_LINE_OTHER_BATCH,
              hv_merge_parse_line("{\"batch\":\"a%20b\",\"line\":1}", 26, "a b", &line, &at));
}

/* U+FFFD, as repair writes it. */
#define FFFD "\xef\xbf\xbd"

/* A line of `n` bytes (it may hold NULs) to hv_merge_parse_line() for batch "b". */
static hv_merge_line_t kind_of_bytes(const char *text, size_t n, uint64_t *line)
{
    uint64_t l = 0, a = 0;
    hv_merge_line_t k = hv_merge_parse_line(text, n, "b", &l, &a);
    if (line != NULL)
        *line = l;
    return k;
}

#define KIND_OF(lit, line) kind_of_bytes((lit), sizeof(lit) - 1, (line))

/* The repaired form of a line given as a literal, which may hold NULs (the caller frees). */
#define REPAIR(lit, n) hv_merge_repair_line((lit), sizeof(lit) - 1, (n))

/* Bytes that are no JSON text as they stand, in a record cJSON still reads: the record is
 * taken, to be written repaired. */
TEST_IMPL(merge_parse_line_tells_records_to_repair)
{
    static const struct {
        const char *text;
        size_t len;
    } repair[] = {
#define R(lit) {lit, sizeof(lit) - 1}
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"a\0b\"}"),    /* NUL in a string */
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"caf\xe9\"}"), /* Latin-1, not UTF-8 */
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"\xff\xfe\"}"),
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"ab\xe2\x82\"}"),   /* cut in a sequence */
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"\xed\xa0\x80\"}"), /* a surrogate */
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"\xc0\xaf\"}"),     /* overlong */
        R("{\"batch\":\"b\",\"line\":1,\"ti\xfftle\":\"x\"}"),        /* in a key */
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"a\x01\x1f\"}"),    /* control bytes */
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"a\tb\"}"),         /* a raw tab */
        R("{\"batch\":\"b\",\"line\":1,\"title\":\"a\rb\"}"),
        R("{\"batch\":\"b\",\x01\"line\":1}"), /* control bytes between tokens */
        R("{\"batch\":\"b\",\0\"line\":1}"),
        R("\0\0\0{\"batch\":\"b\",\"line\":1}"),       /* zeros a crash left before a record */
        R("\xef\xbb\xbf{\"batch\":\"b\",\"line\":1}"), /* a byte order mark */
        R("{\"batch\":\"b\",\"line\":01}"),            /* number spellings JSON has not */
        R("{\"batch\":\"b\",\"line\":1.}"),
        R("{\"batch\":\"b\",\"line\":1,\"x\":-01}"),
        R("{\"batch\":\"b\",\"line\":1,\"x\":1.e5}"),
        R("{\"batch\":\"b\",\"line\":1,\"x\":[00]}"),
#undef R
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(repair); i++) {
        uint64_t line = 0;
        hv_merge_line_t k = kind_of_bytes(repair[i].text, repair[i].len, &line);
        if (k != HV_MERGE_LINE_REPAIRED || line != 1)
            hv_test_fail(__FILE__, __LINE__, "case %zu: kind %d, line %" PRIu64, i, (int)k, line);
    }
    /* Valid as they are: copied. */
    static const char *const valid[] = {
        "{\"batch\":\"b\",\"line\":1,\"title\":\"\\u0000\\u001f\\t\\\"\\\\\\/\"}",
        "{\"batch\":\"b\",\"line\":1,\"title\":\"\x7f \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
        "\t{ \"batch\" :\t\"b\" ,\r\"line\": 1 }",
        "{\"batch\":\"b\",\"line\":1,\"x\":[0,-0,0.5,-1.5e-7,1E+2,2e3,{},[],true,false,null]}",
        "{\"batch\":\"b\",\"line\":1,\"title\":\"\\ud83d\\ude00\"}",
    };
    for (size_t i = 0; i < HV_ARRAY_SIZE(valid); i++)
        if (kind_of_bytes(valid[i], strlen(valid[i]), NULL) != HV_MERGE_LINE_RECORD)
            hv_test_fail(__FILE__, __LINE__, "'%s' is not taken as it is", valid[i]);
    /* Still no record: what no repair makes one. */
    ASSERT_EQ(HV_MERGE_LINE_INVALID, KIND_OF("{\"batch\":\"b\",\xff\"line\":1}", NULL));
    ASSERT_EQ(HV_MERGE_LINE_INVALID, KIND_OF("{\"batch\":\"b\",\"line\":1}\0", NULL));
    ASSERT_EQ(HV_MERGE_LINE_INVALID,
              KIND_OF("{\"batch\":\"b\",\"line\":1,\"t\":\"\\\xff\"}", NULL));
    ASSERT_EQ(HV_MERGE_LINE_INVALID, KIND_OF("{\"batch\":\"b\",\"line\":0\x01}", NULL));
    /* The batch is the repaired one's: a NUL does not end it. */
    ASSERT_EQ(HV_MERGE_LINE_OTHER_BATCH, KIND_OF("{\"batch\":\"b\0x\",\"line\":1}", NULL));
    ASSERT_EQ(HV_MERGE_LINE_OTHER_BATCH, KIND_OF("{\"batch\":\"b\xff\",\"line\":1}", NULL));
}

TEST_IMPL(merge_repair_keeps_what_it_can)
{
    size_t n = 0;
    char *s = REPAIR("{\"batch\":\"b\",\"line\":1,\"title\":\"a\0b\"}", &n);
    ASSERT_STR_EQ("{\"batch\":\"b\",\"line\":1,\"title\":\"a" FFFD "b\"}", s);
    ASSERT_EQ(strlen(s), n);
    free(s);
    s = REPAIR("{\"batch\":\"b\",\"line\":1,\"title\":\"caf\xe9\"}", &n);
    ASSERT_STR_EQ("{\"batch\":\"b\",\"line\":1,\"title\":\"caf" FFFD "\"}", s);
    free(s);
    /* A sequence cut short at the end of a string: one U+FFFD, and the string still ends. */
    s = REPAIR("{\"batch\":\"b\",\"line\":1,\"title\":\"ab\xf0\x9f\x98\"}", &n);
    ASSERT_STR_EQ("{\"batch\":\"b\",\"line\":1,\"title\":\"ab" FFFD "\"}", s);
    free(s);
    /* Control bytes in strings become escapes; between tokens they go. */
    s = REPAIR("\0 {\"batch\":\"b\",\x01\"line\":1,\"title\":\"a\x01\x1f\tb\r\"}\x7f", &n);
    ASSERT_NULL(s); /* DEL is no blank */
    s = REPAIR("\0 {\"batch\":\"b\",\x01\"line\":1,\"title\":\"a\x01\x1f\tb\r\"}", &n);
    ASSERT_STR_EQ("{\"batch\":\"b\",\"line\":1,\"title\":\"a\\u0001\\u001f\\tb\\r\"}", s);
    free(s);
    s = REPAIR("{\"line\":01,\"batch\":\"b\"}", &n);
    ASSERT_STR_EQ("{\"line\":1,\"batch\":\"b\"}", s);
    free(s);
    ASSERT_NULL(REPAIR("not json", &n));
    ASSERT_NULL(REPAIR("[1]", &n));
}

/* ------------------------------------------------------------------------ winners */

TEST_IMPL(merge_later_fetched_at_wins_whatever_the_reading_order)
{
    put("a.jsonl", REC(1, T3, "a1") "\n" REC(2, T1, "a2") "\n");
    put("b.jsonl", REC(1, T2, "b1") "\n" REC(2, T2, "b2") "\n");
    const char *const inputs[] = {"a.jsonl", "b.jsonl"};
    hv_merge_stats_t st;
    char *text = merge_paths("b", inputs, 2, &st);
    ASSERT_STR_EQ(REC(1, T3, "a1") "\n" REC(2, T2, "b2") "\n", text);
    ASSERT_EQ(2, st.files);
    ASSERT_EQ(4, st.records);
    ASSERT_EQ(2, st.winners);
    ASSERT_EQ(2, st.duplicates);
    free(text);
    /* The other way round, the same winners. */
    const char *const reversed[] = {"b.jsonl", "a.jsonl"};
    text = merge_paths("b", reversed, 2, &st);
    ASSERT_STR_EQ(REC(1, T3, "a1") "\n" REC(2, T2, "b2") "\n", text);
    free(text);
}

TEST_IMPL(merge_a_record_without_fetched_at_loses_to_one_with_it)
{
    /* Read later, and still losing; in one file and across files. */
    put("a.jsonl", REC(1, T1, "a1") "\n" REC_NO_AT(1, "a1-none") "\n" REC(2, T1, "a2") "\n");
    put("b.jsonl", REC_NO_AT(2, "b2-none") "\n" REC_NO_AT(3, "b3-none") "\n");
    const char *const inputs[] = {"a.jsonl", "b.jsonl"};
    hv_merge_stats_t st;
    char *text = merge_paths("b", inputs, 2, &st);
    ASSERT_STR_EQ(REC(1, T1, "a1") "\n" REC(2, T1, "a2") "\n" REC_NO_AT(3, "b3-none") "\n", text);
    ASSERT_EQ(2, st.duplicates);
    free(text);
}

TEST_IMPL(merge_ties_go_to_the_record_read_later)
{
    PUT_LINES("a.jsonl", REC(1, T1, "a1-first"), REC(1, T1, "a1-second"), REC_NO_AT(2, "a2-first"),
              REC_NO_AT(2, "a2-second"), REC(3, T2, "a3"), REC_NO_AT(4, "a4"));
    PUT_LINES("b.jsonl", REC(3, T2, "b3"), REC_NO_AT(4, "b4"));
    const char *const inputs[] = {"a.jsonl", "b.jsonl"};
    hv_merge_stats_t st;
    char *text = merge_paths("b", inputs, 2, &st);
    ASSERT_LINES(text, REC(1, T1, "a1-second"), REC_NO_AT(2, "a2-second"), REC(3, T2, "b3"),
                 REC_NO_AT(4, "b4"));
    free(text);
    const char *const reversed[] = {"b.jsonl", "a.jsonl"};
    text = merge_paths("b", reversed, 2, &st);
    ASSERT_LINES(text, REC(1, T1, "a1-second"), REC_NO_AT(2, "a2-second"), REC(3, T2, "a3"),
                 REC_NO_AT(4, "a4"));
    free(text);
}

TEST_IMPL(merge_copies_the_winners_bytes_in_line_order_and_counts_gaps)
{
    /* Spelled as no serialiser would: the bytes are copied, not written again. */
    put("a.jsonl", "{ \"batch\":\"b\", \"line\":9, \"title\":\"\\u00e9t\\u00e9\" }\n"
                   "{\"line\":4,\"batch\":\"b\",\"x\":[1,  2]}\n"
                   "{\"batch\":\"b\",\"line\":2}\n");
    hv_merge_stats_t st;
    char *text = merge1("b", "a.jsonl", &st);
    ASSERT_STR_EQ("{\"batch\":\"b\",\"line\":2}\n"
                  "{\"line\":4,\"batch\":\"b\",\"x\":[1,  2]}\n"
                  "{ \"batch\":\"b\", \"line\":9, \"title\":\"\\u00e9t\\u00e9\" }\n",
                  text);
    ASSERT_EQ(3, st.winners);
    ASSERT_EQ(2, st.first_line);
    ASSERT_EQ(9, st.last_line);
    ASSERT_EQ(6, st.gaps); /* 1, 3, 5, 6, 7, 8 */
    ASSERT_EQ(0, st.duplicates);
    free(text);
}

/* Every line written is JSON: a record that is not as written is re-serialised, a valid
 * one beside it is still copied byte for byte, and the repaired ones are counted. */
TEST_IMPL(merge_writes_only_valid_json)
{
    static const char data[] =
        "{\"batch\":\"b\",\"line\":1,\"title\":\"a\0b\"}\n"
        "{\"batch\":\"b\",\"line\":2,\"title\":\"caf\xe9\"}\n"
        "{ \"batch\":\"b\", \"line\":3, \"title\":\"\\u00e9t\\u00e9 \xc3\xa9\" }\n"
        "{\"batch\":\"b\",\"line\":4,\"title\":\"x\x01y\"}\n"
        "{\"batch\":\"b\",\"line\":5,\"title\":\"ab\xe2\x82\"}\n"
        "\0\0\0\0{\"batch\":\"b\",\"line\":6}\n"
        "{\"batch\":\"b\",\"line\":7,\"title\":\"lost to line 7 below\xff\"}\n"
        "{\"batch\":\"b\",\"line\":7,\"title\":\"ok\"}\n"
        "{\"batch\":\"b\",\"line\":8,\"title\":\"\xff\"}\n"
        "{\"batch\":\"b\",\"line\":8,\"title\":\"wins, repaired\xff\"}\n";
    char *p = path_of("damaged.jsonl");
    hv_test_write_file(p, data, sizeof(data) - 1);
    free(p);
    hv_merge_stats_t st;
    char *text = merge1("b", "damaged.jsonl", &st);
    ASSERT_LINES(text, "{\"batch\":\"b\",\"line\":1,\"title\":\"a" FFFD "b\"}",
                 "{\"batch\":\"b\",\"line\":2,\"title\":\"caf" FFFD "\"}",
                 "{ \"batch\":\"b\", \"line\":3, \"title\":\"\\u00e9t\\u00e9 \xc3\xa9\" }",
                 "{\"batch\":\"b\",\"line\":4,\"title\":\"x\\u0001y\"}",
                 "{\"batch\":\"b\",\"line\":5,\"title\":\"ab" FFFD "\"}",
                 "{\"batch\":\"b\",\"line\":6}", "{\"batch\":\"b\",\"line\":7,\"title\":\"ok\"}",
                 "{\"batch\":\"b\",\"line\":8,\"title\":\"wins, repaired" FFFD "\"}");
    ASSERT_EQ(10, st.records);
    ASSERT_EQ(8, st.winners);
    ASSERT_EQ(6, st.repaired); /* of the winners: 1, 2, 4, 5, 6, 8 */
    ASSERT_EQ(0, st.invalid);
    free(text);
}

/* Records of lines 2, 3, 5 and 7 of an enqueued file whose lines 1, 4 and 6 were a comment
 * and blanks (no entries, so no records), and whose line 8 was an entry without a record. */
TEST_IMPL(merge_counts_entries_without_a_record_when_told_their_number)
{
    PUT_LINES("a.jsonl", REC(2, T1, "a2"), REC(5, T1, "a5"), REC(3, T1, "a3"));
    PUT_LINES("b.jsonl", REC(7, T1, "b7"), REC(2, T2, "b2"));
    static const struct {
        int told;
        uint64_t entries, missing;
    } cases[] = {{0, 0, 0}, {1, 5, 1}, {1, 4, 0}, {1, 3, 0}, {1, 100, 96}};
    for (size_t i = 0; i < HV_ARRAY_SIZE(cases); i++) {
        hv_merge_t *m = hv_merge_new("b");
        char *a = path_of("a.jsonl"), *b = path_of("b.jsonl");
        ASSERT_OK(hv_merge_add_input(m, a, err, sizeof(err)));
        ASSERT_OK(hv_merge_add_input(m, b, err, sizeof(err)));
        free(a);
        free(b);
        if (cases[i].told)
            hv_merge_set_entries(m, cases[i].entries);
        ASSERT_OK(hv_merge_index(m, err, sizeof(err)));
        hv_merge_select(m);
        hv_merge_stats_t st;
        hv_merge_get_stats(m, &st);
        ASSERT_EQ(4, st.winners);
        ASSERT_EQ(3, st.gaps); /* line numbers: 1, 4 and 6 */
        ASSERT_EQ(cases[i].told, st.entries_known);
        ASSERT_EQ(cases[i].entries, st.entries);
        ASSERT_EQ(cases[i].missing, st.missing);
        hv_merge_free(m);
    }
    /* No record at all: every entry told of is missing. */
    hv_merge_t *m = hv_merge_new("none");
    hv_merge_set_entries(m, 7);
    ASSERT_OK(hv_merge_index(m, err, sizeof(err)));
    hv_merge_select(m);
    hv_merge_stats_t st;
    hv_merge_get_stats(m, &st);
    ASSERT_EQ(7, st.missing);
    ASSERT_EQ(0, st.gaps);
    hv_merge_free(m);
}

TEST_IMPL(merge_of_nothing_writes_nothing)
{
    put("empty.jsonl", "");
    put("others.jsonl", "{\"batch\":\"c\",\"line\":1}\n");
    const char *const inputs[] = {"empty.jsonl", "others.jsonl"};
    hv_merge_stats_t st;
    char *text = merge_paths("b", inputs, 2, &st);
    ASSERT_STR_EQ("", text);
    ASSERT_EQ(2, st.files);
    ASSERT_EQ(0, st.records);
    ASSERT_EQ(0, st.winners);
    ASSERT_EQ(0, st.first_line);
    ASSERT_EQ(0, st.last_line);
    ASSERT_EQ(0, st.gaps);
    ASSERT_EQ(1, st.other);
    free(text);
}

/* xorshift64*: the same "random" files on every run. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717u;
}

typedef struct {
    uint64_t at;
    char text[160];
} want_t;

/*
 * Many records over three files, with few distinct times so that ties are common, in several
 * shapes (random, ascending, descending, one line only): the output must be what a plain
 * scan in reading order picks, a later read replacing an earlier one unless it is older.
 * Each is sorted with the usual depth bound, and with bounds small enough that heapsort
 * takes over at once or part way.
 */
TEST_IMPL(merge_agrees_with_a_plain_scan_on_many_records)
{
    static const char *const times[] = {NULL, T1, T2, T3};
    enum { LINES = 5000, PER_FILE = 12000, FILES = 3, SHAPES = 4 };
    want_t *want = hv_xcalloc(LINES + 1, sizeof(*want));
    size_t bufcap = (size_t)PER_FILE * 160;
    char *buf = hv_xmalloc(bufcap);
    uint64_t seed = 0x9e3779b97f4a7c15u;

    for (int shape = 0; shape < SHAPES; shape++) {
        char dir[32];
        snprintf(dir, sizeof(dir), "shape%d", shape);
        make_dir(dir);
        memset(want, 0, (LINES + 1) * sizeof(*want));
        const char *inputs[FILES];
        char names[FILES][64];
        uint64_t records = 0;
        for (int f = 0; f < FILES; f++) {
            size_t used = 0;
            for (int i = 0; i < PER_FILE; i++) {
                uint64_t r = next_rand(&seed);
                uint64_t line = shape == 0   ? 1 + r % LINES
                                : shape == 1 ? 1 + (uint64_t)i * LINES / PER_FILE
                                : shape == 2 ? LINES - (uint64_t)i * LINES / PER_FILE
                                             : 42;
                const char *at = times[(r >> 32) % HV_ARRAY_SIZE(times)];
                char rec[160];
                int n = at != NULL
                            ? snprintf(rec, sizeof(rec),
                                       "{\"batch\":\"b\",\"line\":%" PRIu64
                                       ",\"fetched_at\":\"%s\",\"from\":\"f%d-%d\"}",
                                       line, at, f, i)
                            : snprintf(rec, sizeof(rec),
                                       "{\"batch\":\"b\",\"line\":%" PRIu64 ",\"from\":\"f%d-%d\"}",
                                       line, f, i);
                ASSERT(n > 0 && (size_t)n < sizeof(rec));
                memcpy(buf + used, rec, (size_t)n);
                buf[used + (size_t)n] = '\n';
                used += (size_t)n + 1;
                uint64_t key = hv_merge_time_key(at);
                if (want[line].text[0] == '\0' || key >= want[line].at) {
                    want[line].at = key;
                    memcpy(want[line].text, rec, (size_t)n + 1);
                }
                records++;
            }
            snprintf(names[f], sizeof(names[f]), "%s/b.node%d.jsonl", dir, f);
            char *p = path_of(names[f]);
            hv_test_write_file(p, buf, used);
            free(p);
            inputs[f] = names[f];
        }
        static const int depths[] = {-1, 0, 3};
        for (size_t d = 0; d < HV_ARRAY_SIZE(depths); d++) {
            hv_merge_stats_t st;
            char *text = merge_depth("b", inputs, FILES, depths[d], &st);
            size_t used = 0;
            uint64_t winners = 0;
            for (uint64_t line = 1; line <= LINES; line++) {
                if (want[line].text[0] == '\0')
                    continue;
                size_t n = strlen(want[line].text);
                if (strncmp(text + used, want[line].text, n) != 0 || text[used + n] != '\n')
                    hv_test_fail(__FILE__, __LINE__,
                                 "shape %d, depth %d, line %" PRIu64 ": want %s, got %.160s", shape,
                                 depths[d], line, want[line].text, text + used);
                used += n + 1;
                winners++;
            }
            ASSERT_EQ(strlen(text), used);
            ASSERT_EQ(records, st.records);
            ASSERT_EQ(winners, st.winners);
            ASSERT_EQ(records - winners, st.duplicates);
            free(text);
        }
    }
    free(buf);
    free(want);
}

/* ------------------------------------------------------------------------ inputs */

TEST_IMPL(merge_directory_stands_for_the_batch_files_in_it_and_its_out)
{
    make_dir("spool");
    make_dir("spool/out");
    put("spool/b.z.jsonl", REC(1, T1, "z") "\n");
    put("spool/b.a.jsonl", REC(2, T1, "a") "\n");
    put("spool/out/b.m.jsonl", REC(3, T1, "m") "\n");
    put("spool/out/b.c.jsonl", REC(4, T1, "c") "\n");
    /* Not outputs of batch b. */
    put("spool/out/b.x.n1.jsonl", "{\"batch\":\"b.x\",\"line\":5}\n"); /* batch b.x */
    put("spool/out/b.jsonl", REC(6, T1, "no consumer") "\n");
    put("spool/out/b..jsonl", REC(6, T1, "empty consumer") "\n");
    put("spool/out/b.n.jsonl.tmp.12", REC(6, T1, "temporary") "\n");
    put("spool/out/c.n.jsonl", REC(6, T1, "batch c") "\n");
    put("spool/out/B.n.jsonl", REC(6, T1, "batch B") "\n");
    make_dir("spool/incoming");
    put("spool/incoming/b.n.jsonl", REC(6, T1, "not out/") "\n");

    hv_merge_t *m = hv_merge_new("b");
    char *spool = path_of("spool");
    ASSERT_OK(hv_merge_add_input(m, spool, err, sizeof(err)));
    ASSERT_EQ(4, hv_merge_nfiles(m));
    static const char *const order[] = {"spool/b.a.jsonl", "spool/b.z.jsonl", "spool/out/b.c.jsonl",
                                        "spool/out/b.m.jsonl"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(order); i++) {
        char *p = path_of(order[i]);
        ASSERT_STR_EQ(p, hv_merge_file_path(m, i));
        free(p);
    }
    ASSERT_NULL(hv_merge_file_path(m, 4));
    /* Named again, as a file or as a directory: read once. */
    char *again = path_of("spool/out/b.c.jsonl");
    ASSERT_OK(hv_merge_add_input(m, again, err, sizeof(err)));
    ASSERT_OK(hv_merge_add_input(m, spool, err, sizeof(err)));
    ASSERT_EQ(4, hv_merge_nfiles(m));
    free(again);
    /* A file is read whatever its name. */
    char *any = path_of("spool/out/c.n.jsonl");
    ASSERT_OK(hv_merge_add_input(m, any, err, sizeof(err)));
    ASSERT_EQ(5, hv_merge_nfiles(m));
    free(any);
    free(spool);
    hv_merge_free(m);

    /* The out/ directory itself, and a directory without out/. */
    hv_merge_stats_t st;
    char *text = merge1("b", "spool/out", &st);
    ASSERT_STR_EQ(REC(3, T1, "m") "\n" REC(4, T1, "c") "\n", text);
    ASSERT_EQ(2, st.files);
    free(text);
    text = merge1("b", "spool/incoming", &st);
    ASSERT_STR_EQ(REC(6, T1, "not out/") "\n", text);
    free(text);
}

TEST_IMPL(merge_directory_matches_the_batch_name_as_files_spell_it)
{
    static const char *const batches[] = {"urls.txt", "my list/2026", ".hidden", "a%b"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(batches); i++) {
        char dir[32], name[700], rel[800], rec[300];
        snprintf(dir, sizeof(dir), "d%zu", i);
        make_dir(dir);
        ASSERT_OK(hv_streamkeys_output_name(batches[i], "node.1", name, sizeof(name)));
        snprintf(rel, sizeof(rel), "%s/%s", dir, name);
        snprintf(rec, sizeof(rec), "{\"batch\":\"%s\",\"line\":1}\n", batches[i]);
        put(rel, rec);
        hv_merge_stats_t st;
        char *text = merge1(batches[i], dir, &st);
        ASSERT_STR_EQ(rec, text);
        ASSERT_EQ(1, st.files);
        free(text);
    }
    /* "urls" is not "urls.txt": its consumer part would hold a dot. */
    hv_merge_t *m = hv_merge_new("urls");
    char *d0 = path_of("d0");
    ASSERT_OK(hv_merge_add_input(m, d0, err, sizeof(err)));
    ASSERT_EQ(0, hv_merge_nfiles(m));
    free(d0);
    hv_merge_free(m);
}

TEST_IMPL(merge_refuses_inputs_it_cannot_read_twice)
{
    hv_merge_t *m = hv_merge_new("b");
    char *missing = path_of("missing");
    ASSERT_EQ(UV_ENOENT, hv_merge_add_input(m, missing, err, sizeof(err)));
    ASSERT(strstr(err, "missing") != NULL);
    free(missing);

    char *fifo = path_of("fifo");
    ASSERT_OK(mkfifo(fifo, 0600));
    ASSERT_EQ(UV_EFTYPE, hv_merge_add_input(m, fifo, err, sizeof(err)));
    ASSERT(strstr(err, "not a regular file") != NULL);
    free(fifo);

    /* A directory's entry named like an output but not a file. */
    make_dir("spool");
    make_dir("spool/out");
    make_dir("spool/out/b.n1.jsonl");
    char *spool = path_of("spool");
    ASSERT_EQ(UV_EFTYPE, hv_merge_add_input(m, spool, err, sizeof(err)));
    ASSERT(strstr(err, "spool/out/b.n1.jsonl: not a regular file") != NULL);
    free(spool);
    ASSERT_EQ(0, hv_merge_nfiles(m));
    hv_merge_free(m);
}

static void link_to(const char *target, const char *rel)
{
    char *p = path_of(rel);
    if (symlink(target, p) != 0)
        hv_test_fail(__FILE__, __LINE__, "symlink %s: %s", p, strerror(errno));
    free(p);
}

/* UV_ENOENT is kept for an input that is not there at all (the command calls it a usage
 * error). A name that is there but cannot be followed is an input that cannot be read: the
 * failure names it, and its code is not UV_ENOENT. */
TEST_IMPL(merge_inputs_that_lead_nowhere_cannot_be_read)
{
    /* An entry named like an output, a symbolic link to nothing. */
    make_dir("spool");
    make_dir("spool/out");
    put("spool/out/b.a.jsonl", REC(1, T1, "a") "\n");
    link_to("missing", "spool/out/b.c.jsonl");
    hv_merge_t *m = hv_merge_new("b");
    char *spool = path_of("spool");
    ASSERT_EQ(UV_EIO, hv_merge_add_input(m, spool, err, sizeof(err)));
    ASSERT(strstr(err, "cannot read ") != NULL);
    ASSERT(strstr(err, "spool/out/b.c.jsonl: dangling symbolic link (to missing)") != NULL);
    free(spool);
    hv_merge_free(m);

    /* The input itself such a link; a name that is not there at all is still UV_ENOENT. */
    link_to("nowhere.jsonl", "dangling.jsonl");
    m = hv_merge_new("b");
    char *dangling = path_of("dangling.jsonl"), *missing = path_of("missing.jsonl");
    ASSERT_EQ(UV_EIO, hv_merge_add_input(m, dangling, err, sizeof(err)));
    ASSERT(strstr(err, "dangling.jsonl: dangling symbolic link (to nowhere.jsonl)") != NULL);
    ASSERT_EQ(UV_ENOENT, hv_merge_add_input(m, missing, err, sizeof(err)));
    free(dangling);
    free(missing);
    hv_merge_free(m);

    /* A spool whose out/ is a link to nothing: not a spool without out/. */
    make_dir("spool2");
    put("spool2/b.a.jsonl", REC(1, T1, "a") "\n");
    link_to("/nonexistent/out", "spool2/out");
    m = hv_merge_new("b");
    char *spool2 = path_of("spool2");
    ASSERT_EQ(UV_EIO, hv_merge_add_input(m, spool2, err, sizeof(err)));
    ASSERT(strstr(err, "cannot read directory ") != NULL);
    ASSERT(strstr(err, "spool2/out: dangling symbolic link (to /nonexistent/out)") != NULL);
    free(spool2);
    hv_merge_free(m);

    /* A link that leads round in a circle. */
    make_dir("spool3");
    link_to("b.loop.jsonl", "spool3/b.loop.jsonl");
    m = hv_merge_new("b");
    char *spool3 = path_of("spool3");
    ASSERT_EQ(UV_ELOOP, hv_merge_add_input(m, spool3, err, sizeof(err)));
    ASSERT(strstr(err, "spool3/b.loop.jsonl: ") != NULL);
    free(spool3);
    hv_merge_free(m);

    /* A file that may not be read (root may read anything: nothing to see then). */
    if (geteuid() != 0) {
        make_dir("spool4");
        put("spool4/b.a.jsonl", REC(1, T1, "a") "\n");
        char *f = path_of("spool4/b.a.jsonl"), *spool4 = path_of("spool4");
        ASSERT_OK(chmod(f, 0));
        m = hv_merge_new("b");
        ASSERT_OK(hv_merge_add_input(m, spool4, err, sizeof(err)));
        ASSERT_EQ(UV_EACCES, hv_merge_index(m, err, sizeof(err)));
        ASSERT(strstr(err, "spool4/b.a.jsonl: Permission denied") != NULL);
        hv_merge_free(m);
        free(f);
        free(spool4);
    }
}

/* ------------------------------------------------------------------------ skipped lines */

TEST_IMPL(merge_counts_torn_invalid_and_other_lines)
{
    char *data = lines_of(REC(1, T1, "a1"), "not json", "", "{\"batch\":\"c\",\"line\":2}",
                          "{\"batch\":\"b\",\"line\":0}", REC(3, T1, "a3") "\r", REC(4, T1, "a4"),
                          "{\"requested_url\":\"http://x.te", (const char *)NULL);
    data[strlen(data) - 1] = '\0'; /* the last line without its newline */
    put("a.jsonl", data);
    free(data);
    hv_merge_stats_t st;
    char *text = merge1("b", "a.jsonl", &st);
    ASSERT_LINES(text, REC(1, T1, "a1"), REC(4, T1, "a4"));
    ASSERT_EQ(2, st.records);
    ASSERT_EQ(4, st.invalid);
    ASSERT_EQ(1, st.other);
    ASSERT_EQ(1, st.torn);
    ASSERT_EQ(2, st.gaps);
    free(text);
}

/* The writer ends every record with its newline in the same write, and an entry is
 * acknowledged only once its record is durable: a last line without one was cut short, even
 * if what is there parses (resume.c cuts it away too). */
TEST_IMPL(merge_last_line_without_newline_is_torn_even_if_it_parses)
{
    put("a.jsonl", REC(1, T1, "a1") "\n" REC(1, T3, "a1-later-but-torn"));
    hv_merge_stats_t st;
    char *text = merge1("b", "a.jsonl", &st);
    ASSERT_STR_EQ(REC(1, T1, "a1") "\n", text);
    ASSERT_EQ(1, st.torn);
    ASSERT_EQ(0, st.duplicates);
    free(text);
}

/* Lines up to HV_RECORD_LINE_MAX (newline included) are records; a longer one is skipped
 * without being held, and the lines after it are read as usual. */
TEST_IMPL(merge_lines_longer_than_a_record_are_skipped)
{
    static const char head[] = "{\"batch\":\"b\",\"line\":1,\"title\":\"";
    size_t max = HV_RECORD_LINE_MAX; /* with its newline */
    size_t total = 2 * (max + 1) + 64;
    char *data = hv_xmalloc(total);
    size_t n = 0;
    /* Line 1: exactly max bytes with its newline. */
    memcpy(data, head, sizeof(head) - 1);
    n = max - 3;
    memset(data + sizeof(head) - 1, 'x', n - (sizeof(head) - 1));
    memcpy(data + n, "\"}\n", 3);
    n += 3;
    /* Line 2: one byte more. */
    size_t start2 = n;
    memcpy(data + n, head, sizeof(head) - 1);
    data[n + sizeof("{\"batch\":\"b\",\"line\":") - 1] = '2';
    n = start2 + max - 2;
    memset(data + start2 + sizeof(head) - 1, 'y', n - start2 - (sizeof(head) - 1));
    memcpy(data + n, "\"}\n", 3);
    n += 3;
    static const char tail[] = "{\"batch\":\"b\",\"line\":3}\n";
    memcpy(data + n, tail, sizeof(tail) - 1);
    n += sizeof(tail) - 1;
    char *p = path_of("long.jsonl");
    hv_test_write_file(p, data, n);
    free(p);

    hv_merge_stats_t st;
    char *text = merge1("b", "long.jsonl", &st);
    ASSERT_EQ(max + sizeof(tail) - 1, strlen(text));
    ASSERT_MEM_EQ(data, text, max);
    ASSERT_STR_EQ(tail, text + max);
    ASSERT_EQ(2, st.records);
    ASSERT_EQ(1, st.invalid);
    ASSERT_EQ(0, st.torn);
    free(text);

    /* Too long and without its newline at the end of the file: torn. */
    p = path_of("long-torn.jsonl");
    hv_test_write_file(p, data + start2, max);
    free(p);
    text = merge1("b", "long-torn.jsonl", &st);
    ASSERT_STR_EQ("", text);
    ASSERT_EQ(1, st.torn);
    ASSERT_EQ(0, st.invalid);
    free(text);
    free(data);
}

/* ------------------------------------------------------------------------ writing */

TEST_IMPL(merge_write_fails_when_an_input_changed)
{
    put("a.jsonl", REC(1, T1, "a1") "\n" REC(2, T1, "a2") "\n");
    char *a = path_of("a.jsonl"), *b = path_of("b.jsonl");
    int out = open("/dev/null", O_WRONLY);
    ASSERT(out >= 0);

    /* Cut short (a restarted daemon repairing it, say). */
    hv_merge_t *m = hv_merge_new("b");
    ASSERT_OK(hv_merge_add_input(m, a, err, sizeof(err)));
    ASSERT_OK(hv_merge_index(m, err, sizeof(err)));
    hv_merge_select(m);
    ASSERT_OK(truncate(a, (off_t)strlen(REC(1, T1, "a1") "\n") + 10));
    ASSERT_EQ(UV_EIO, hv_merge_write(m, out, "/dev/null", err, sizeof(err)));
    ASSERT(strstr(err, "changed while merging") != NULL);
    hv_merge_free(m);

    /* Rewritten: the same length, but the record does not end where it did. */
    put("a.jsonl", REC(1, T1, "a1") "\n" REC(2, T1, "a2") "\n");
    m = hv_merge_new("b");
    ASSERT_OK(hv_merge_add_input(m, a, err, sizeof(err)));
    ASSERT_OK(hv_merge_index(m, err, sizeof(err)));
    hv_merge_select(m);
    put("a.jsonl", REC(1, T1, "a1-") "\n" REC(2, T1, "a") "\n");
    ASSERT_EQ(UV_EIO, hv_merge_write(m, out, "/dev/null", err, sizeof(err)));
    hv_merge_free(m);

    /* Replaced by another file. */
    put("a.jsonl", REC(1, T1, "a1") "\n");
    m = hv_merge_new("b");
    ASSERT_OK(hv_merge_add_input(m, a, err, sizeof(err)));
    ASSERT_OK(hv_merge_index(m, err, sizeof(err)));
    hv_merge_select(m);
    put("b.jsonl", REC(1, T1, "a1") "\n");
    ASSERT_OK(rename(b, a));
    ASSERT_EQ(UV_EIO, hv_merge_write(m, out, "/dev/null", err, sizeof(err)));
    ASSERT(strstr(err, "replaced") != NULL);
    hv_merge_free(m);

    close(out);
    free(a);
    free(b);
}

TEST_IMPL(merge_write_reports_the_output_that_failed)
{
    put("a.jsonl", REC(1, T1, "a1") "\n");
    char *a = path_of("a.jsonl");
    hv_merge_t *m = hv_merge_new("b");
    ASSERT_OK(hv_merge_add_input(m, a, err, sizeof(err)));
    ASSERT_OK(hv_merge_index(m, err, sizeof(err)));
    hv_merge_select(m);
    int full = open("/dev/full", O_WRONLY);
    if (full < 0) {
        hv_merge_free(m);
        free(a);
        RETURN_SKIP("no /dev/full");
    }
    ASSERT_EQ(UV_ENOSPC, hv_merge_write(m, full, "the-output", err, sizeof(err)));
    ASSERT(strstr(err, "cannot write the-output") != NULL);
    close(full);
    hv_merge_free(m);
    free(a);
}
