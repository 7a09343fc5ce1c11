/*
 * fixtures.h: set-up shared by the unit tests of the policy modules.
 */
#ifndef HARVESTD_TEST_FIXTURES_H
#define HARVESTD_TEST_FIXTURES_H

#include <stddef.h>
#include <uv.h>

#include "harvestd/bhost.h"
#include "harvestd/config.h"
#include "harvestd/engine.h"
#include "harvestd/record.h"
#include "harvestd/source.h"

/**
 * Fail `rec` as the layer that found the failure would: with the detail code whose text is
 * `text` ("http_503", "dns_temporary_failure", "tls_alert_40"), a family's argument taken
 * from the text. Tables of cases read as records print them; a text that no code spells
 * fails the test.
 */
void fx_fail_record(hv_record_t *rec, hv_stage_t stage, hv_error_type_t type, const char *text);

/*
 * The middle of the daemon on a real loop: a configuration (defaults, then `directives`, a
 * NULL-terminated list of name, value pairs set as the config file would), an engine without
 * TLS and a batch host. fx_daemon_close() frees host and engine, runs the loop dry and
 * asserts that it closes (ASSERT_LOOP_CLOSE): the test closes what else it opened first.
 */
typedef struct {
    uv_loop_t loop;
    hv_config_t cfg;
    hv_record_counts_t records;
    hv_engine_t *engine;
    hv_bhost_t *host;
} fx_daemon_t;

void fx_daemon_init(fx_daemon_t *d, const char *const *directives);
void fx_daemon_close(fx_daemon_t *d);

/**
 * A source of `n` lines held in memory (`lines` must outlive it), delivered from an idle
 * handle as hv_source_t asks (never inside start, pausing when the sink says so). `*closed`
 * (NULL: not counted) goes up by one when the source is closed.
 */
hv_source_t *fx_lines_source(uv_loop_t *loop, const char *const *lines, size_t n, int *closed);

#endif
