/*
 * fuzz.h: what the libFuzzer targets under tests/fuzz share.
 *
 * Each target is one .c file defining LLVMFuzzerTestOneInput(), linked with the project's
 * objects built with -fsanitize=fuzzer-no-link,address,undefined (build-fuzz/). A target
 * checks the properties its module's header promises with FUZZ_CHECK(), which prints what
 * failed and aborts, so that libFuzzer records the input as a crash like any sanitizer report.
 */
#ifndef HARVESTD_FUZZ_H
#define HARVESTD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A cursor over the fuzzer's bytes: small parameters are taken from the front, so that
 * the mutator can change them independently of the payload that follows. */
typedef struct {
    const uint8_t *p;
    size_t left;
} fuzz_input_t;

static inline uint8_t fuzz_byte(fuzz_input_t *in)
{
    if (in->left == 0)
        return 0;
    in->left--;
    return *in->p++;
}

static inline uint16_t fuzz_u16(fuzz_input_t *in)
{
    uint16_t hi = fuzz_byte(in);
    return (uint16_t)(hi << 8 | fuzz_byte(in));
}

/* A malloc'd NUL-terminated copy of [p, p+len): the payload in a buffer of its own size, so
 * that ASan sees any read past its end. */
static inline char *fuzz_strndup(const void *p, size_t len)
{
    char *s = malloc(len + 1);
    if (s == NULL)
        abort();
    if (len > 0)
        __builtin_memcpy(s, p, len);
    s[len] = '\0';
    return s;
}

#endif
