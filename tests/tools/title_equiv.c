/*
 * title_equiv: the title fast path must agree with the full parse.
 *
 *   title_equiv FILE...        documents to check
 *   title_equiv @LIST...       files holding one path per line (blank lines and lines starting
 *                              with '#' are skipped); may be mixed with FILEs
 *
 * For every document it calls hv_html_title_fast() and hv_html_analyse() on the same bytes.
 * When the fast path returns 1 (it claims to have settled the title), the full parse must
 * agree: both titles NULL or byte-for-byte equal. The fast path parses, and so pre-scans,
 * only a prefix; when the full parse refuses the whole page, the refusal must lie beyond that
 * prefix: the full parse of the prefix must accept it, with the same title (such pages are
 * counted as "beyond"). When the fast path returns 0 it must leave nothing to free (title
 * NULL). Every disagreement is printed on stdout as
 *
 *   MISMATCH <path>: <reason> fast=<title or (null)> full=<title or (null)> rc=<rc>
 *
 * and the last line is always
 *
 *   checked=N fast=M beyond=B mismatches=K
 *
 * (N documents, M of them settled by the fast path, B of those refused by the full parse for
 * what lies after the prefix, K disagreements); nothing else is printed,
 * so the output stays small for a large corpus. Exit status: 0 when every document agrees,
 * 1 on a mismatch, 2 on a usage or I/O error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harvestd/common.h"
#include "harvestd/html.h"

#define TOOL_NAME "title_equiv"
#include "tool.h"

static unsigned long checked, settled, beyond, mismatches;

/* A title for a one-line report: control characters and backslashes escaped, cut at 200
 * bytes. */
static void print_title(const char *t)
{
    if (t == NULL) {
        fputs("(null)", stdout);
        return;
    }
    putchar('"');
    size_t i;
    for (i = 0; t[i] != '\0' && i < 200; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c < 0x20 || c == 0x7f || c == '\\' || c == '"')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    if (t[i] != '\0')
        fputs("...", stdout);
    putchar('"');
}

static void report(const char *path, const char *reason, const char *fast, const char *full,
                   int rc)
{
    mismatches++;
    printf("MISMATCH %s: %s fast=", path, reason);
    print_title(fast);
    fputs(" full=", stdout);
    print_title(full);
    printf(" rc=%d\n", rc);
}

static void check(const char *path)
{
    size_t len;
    char *body = load_file(path, &len);
    hv_html_result_t fast, full;

    memset(&fast, 0, sizeof(fast));
    memset(&full, 0, sizeof(full));
    checked++;
    int took = hv_html_title_fast(body, len, &fast);
    int rc = hv_html_analyse(body, len, &full);
    if (took == 1) {
        settled++;
        if (rc != 0 && fast.parsed > 0 && fast.parsed < len) {
            /* Refused for what follows the prefix? Then the prefix alone must be accepted. */
            beyond++;
            hv_html_result_free(&full);
            rc = hv_html_analyse(body, fast.parsed, &full);
        }
        if (rc == HV_ENESTING)
            report(path, "the full parse refuses the prefix (HV_ENESTING) but the fast path settled it",
                   fast.title, full.title, rc);
        else if (rc != 0)
            report(path, "the full parse failed but the fast path settled the page", fast.title,
                   full.title, rc);
        else if ((fast.title == NULL) != (full.title == NULL) ||
                 (fast.title != NULL && strcmp(fast.title, full.title) != 0))
            report(path, "titles differ", fast.title, full.title, rc);
        hv_html_result_free(&fast);
    } else if (took == 0) {
        if (fast.title != NULL) {
            report(path, "the fast path returned 0 but left a title behind", fast.title,
                   full.title, rc);
            hv_html_result_free(&fast);
        }
    } else {
        report(path, "the fast path returned neither 0 nor 1", fast.title, full.title, took);
        hv_html_result_free(&fast);
    }
    hv_html_result_free(&full);
    free(body);
}

static void check_list(const char *list)
{
    FILE *f = fopen(list, "r");
    if (f == NULL)
        die(strerror(errno), list);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n > 0 && line[0] != '#')
            check(line);
    }
    if (ferror(f))
        die("read error", list);
    free(line);
    fclose(f);
}

int main(int argc, char **argv)
{
    int files = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fprintf(stdout, "usage: title_equiv (FILE | @LIST)...\n");
            return 0;
        }
        files++;
        if (a[0] == '@')
            check_list(a + 1);
        else
            check(a);
    }
    if (files == 0) {
        fprintf(stderr, "usage: title_equiv (FILE | @LIST)...\n");
        return 2;
    }
    printf("checked=%lu fast=%lu beyond=%lu mismatches=%lu\n", checked, settled, beyond, mismatches);
    fflush(stdout);
    return mismatches > 0 ? 1 : 0;
}
