/*
 * utf8.h: UTF-8 validation and repair. Every string that came from the network or an input
 * file passes through here before it reaches a JSON record (cJSON copies bytes verbatim).
 * Pure functions: safe on any thread.
 */
#ifndef HARVESTD_UTF8_H
#define HARVESTD_UTF8_H

#include <stddef.h>

/**
 * 1 if [s, s+len) is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF), else 0. NUL bytes are valid UTF-8.
 */
int hv_utf8_valid(const char *s, size_t len);

/**
 * A malloc'd, NUL-terminated copy of [s, s+len) in which every maximal ill-formed subsequence
 * is replaced by U+FFFD (Unicode "substitution of maximal subparts", as WHATWG decoders do).
 * *out_len receives the length without the NUL. The caller frees the result. Never fails
 * (allocation failure aborts).
 */
char *hv_utf8_sanitize(const char *s, size_t len, size_t *out_len);

/**
 * The length of the longest prefix of the valid UTF-8 string [s, s+len) that is at most `max`
 * bytes long and ends on a character's boundary (`len` itself when len <= max).
 */
size_t hv_utf8_cut(const char *s, size_t len, size_t max);

#endif
