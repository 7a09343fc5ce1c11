/* test_resume.c: repairing an output before a batch resumes (resume.h). */
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/resume.h"
#include "test.h"

#define OK_LINE(u) "{\"requested_url\":\"" u "\",\"status\":\"ok\"}\n"

/* Repair `data` written to a fresh file; returns the file's text afterwards. */
static char *repair(const char *data, hv_okset_t *set, hv_repair_t *out)
{
    const char *path = hv_test_tmppath("out.jsonl");
    char err[256];
    hv_test_write_file(path, data, strlen(data));
    ASSERT_OK(hv_output_repair(path, set, out, err, sizeof(err)));
    return hv_test_read_file(path, NULL);
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
