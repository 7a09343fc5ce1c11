/* test_resume.c: repairing an output before a batch resumes (resume.h). */
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/resume.h"
#include "test.h"

#define OK_LINE(u) "{\"requested_url\":\"" u "\",\"status\":\"ok\"}\n"

/* Repair `data` written to a fresh file; returns the file's text afterwards. */
static char *repair_both(const char *data, hv_okset_t *set, hv_okset_t *crashed,
                         hv_repair_t *out)
{
    const char *path = hv_test_tmppath("out.jsonl");
    char err[256];
    hv_test_write_file(path, data, strlen(data));
    ASSERT_OK(hv_output_repair(path, set, crashed, out, err, sizeof(err)));
    return hv_test_read_file(path, NULL);
}

static char *repair(const char *data, hv_okset_t *set, hv_repair_t *out)
{
    return repair_both(data, set, NULL, out);
}

TEST_IMPL(resume_keeps_complete_records_and_counts_ok_urls)
{
    hv_okset_t *set = hv_okset_new();
    hv_repair_t r;
    static const char data[] = OK_LINE("http://a.test/") OK_LINE("http://a.test/")
        "{\"requested_url\":\"http://b.test/\",\"status\":\"failed\"}\n";
    char *text = repair(data, set, &r);
    ASSERT_STR_EQ(data, text);
    ASSERT_EQ(3, r.records);
    ASSERT_EQ(2, r.ok);
    ASSERT_EQ(0, r.truncated);
    ASSERT_EQ(1, hv_okset_take(set, "http://a.test/", 14));
    ASSERT_EQ(1, hv_okset_take(set, "http://a.test/", 14));
    ASSERT_EQ(0, hv_okset_take(set, "http://b.test/", 14));
    free(text);
    hv_okset_free(set);
}

TEST_IMPL(resume_cuts_a_torn_last_line)
{
    hv_okset_t *set = hv_okset_new();
    hv_repair_t r;
    char *text = repair(OK_LINE("http://a.test/") "{\"requested_url\":\"http://b.te", set, &r);
    ASSERT_STR_EQ(OK_LINE("http://a.test/"), text);
    ASSERT_EQ(1, r.records);
    ASSERT_EQ(29, r.truncated);
    free(text);
    hv_okset_free(set);
}

/* One JSON object and then more is not a record: were it taken as one, its URL would never
 * be fetched again and the finished output would keep a line that is not JSON. */
TEST_IMPL(resume_cuts_a_last_line_with_garbage_after_the_object)
{
    static const char *const tails[] = {"garbage", " ", "{}", "\r"};
    for (size_t i = 0; i < HV_ARRAY_SIZE(tails); i++) {
        hv_okset_t *set = hv_okset_new();
        hv_repair_t r;
        char data[512];
        snprintf(data, sizeof(data), "%s{\"requested_url\":\"http://b.test/\",\"status\":\"ok\"}%s\n",
                 OK_LINE("http://a.test/"), tails[i]);
        char *text = repair(data, set, &r);
        ASSERT_STR_EQ(OK_LINE("http://a.test/"), text);
        ASSERT_EQ(1, r.records);
        ASSERT_EQ(1, r.ok);
        ASSERT_EQ(0, hv_okset_take(set, "http://b.test/", 14));
        free(text);
        hv_okset_free(set);
    }
}

/* A page that crashed the parser has its final record once ParserCrashed is written: the
 * restart must not fetch it into the same crash, whether or not the crash note survived. */
TEST_IMPL(resume_counts_a_parser_crashed_record_as_final)
{
    hv_okset_t *set = hv_okset_new(), *crashed = hv_okset_new();
    hv_repair_t r;
    static const char data[] = "{\"requested_url\":\"http://c.test/\",\"status\":\"failed\","
                               "\"stage\":\"parse\",\"error_type\":\"ParserCrashed\","
                               "\"error\":\"parser_crashed_on_this_page\"}\n"
                               "{\"requested_url\":\"http://d.test/\",\"status\":\"failed\","
                               "\"stage\":\"parse\",\"error_type\":\"MissingTitle\"}\n";
    char *text = repair_both(data, set, crashed, &r);
    ASSERT_STR_EQ(data, text);
    ASSERT_EQ(1, r.crashed);
    ASSERT_EQ(0, hv_okset_take(set, "http://c.test/", 14)); /* not an ok record */
    ASSERT_EQ(1, hv_okset_take(crashed, "http://c.test/", 14));
    ASSERT_EQ(0, hv_okset_take(crashed, "http://d.test/", 14));
    free(text);
    hv_okset_free(set);
    hv_okset_free(crashed);
}

/* A resumed batch counts the ok records it keeps as its own: the repair gathers what each
 * carries, as the batch counted it when it wrote the record; failed records are fetched
 * again, so they are not kept. */
TEST_IMPL(resume_gathers_the_figures_of_the_ok_records)
{
    hv_okset_t *set = hv_okset_new();
    hv_repair_t r;
    static const char data[] =
        "{\"requested_url\":\"http://a.test/\",\"status\":\"ok\",\"http_status\":200,\"bytes\":100}\n"
        "{\"requested_url\":\"http://b.test/\",\"status\":\"failed\",\"http_status\":404,"
        "\"bytes\":7,\"error_type\":\"HttpStatus\"}\n"
        "{\"requested_url\":\"http://c.test/\",\"status\":\"ok\",\"http_status\":304,\"bytes\":50,"
        "\"not_modified\":true}\n"
        "{\"requested_url\":\"http://d.test/\",\"status\":\"ok\",\"http_status\":200,\"bytes\":300,"
        "\"unchanged\":true}\n"
        "{\"requested_url\":\"http://e.test/\",\"status\":\"ok\",\"bytes\":20,\"from_cache\":true}\n";
    char *text = repair(data, set, &r);
    ASSERT_EQ(5, r.records);
    ASSERT_EQ(4, r.ok);
    ASSERT_EQ(4, r.kept.records);
    ASSERT_EQ(2, r.kept.by_status[200]);
    ASSERT_EQ(1, r.kept.by_status[304]);
    ASSERT_EQ(0, r.kept.by_status[404]);
    ASSERT_EQ(470, r.kept.body_bytes);
    ASSERT_EQ(4, r.kept.with_bytes);
    ASSERT_EQ(1, r.kept.not_modified);
    ASSERT_EQ(1, r.kept.unchanged);
    ASSERT_EQ(1, r.kept.from_cache);
    /* The pages downloaded: not the 304, not the answer from the store. */
    ASSERT_EQ(2, r.kept.ok_sizes.count);
    ASSERT_EQ(400, r.kept.ok_sizes.sum);
    free(text);
    hv_okset_free(set);
}
