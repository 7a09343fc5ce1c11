/*
 * fixtures.h: set-up shared by the unit tests of the policy modules.
 */
#ifndef HARVESTD_TEST_FIXTURES_H
#define HARVESTD_TEST_FIXTURES_H

#include "harvestd/record.h"

/**
 * Fail `rec` as the layer that found the failure would: with the detail code whose text is
 * `text` ("http_503", "dns_temporary_failure", "tls_alert_40"), a family's argument taken
 * from the text. Tables of cases read as records print them; a text that no code spells
 * fails the test.
 */
void fx_fail_record(hv_record_t *rec, hv_stage_t stage, hv_error_type_t type, const char *text);

#endif
