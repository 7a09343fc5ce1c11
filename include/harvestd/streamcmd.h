/*
 * streamcmd.h: the command lines of `harvestd enqueue` and `harvestd status` (commands.h runs
 * the commands, src/cmd/streamcmd.c), parsed without side effects so that the rules of each
 * option can be tested on their own.
 *
 * Both commands take long options (options.h), as `--name VALUE` or `--name=VALUE`, and enqueue
 * also `-c FILE`; `--` ends the options, and `-` alone is an argument (standard input). The
 * parsed values point into argv, which must outlive them.
 */
#ifndef HARVESTD_STREAMCMD_H
#define HARVESTD_STREAMCMD_H

#include <stddef.h>
#include <stdint.h>

#include "harvestd/redis.h"

/** `harvestd enqueue --redis URL [--redis-password-file FILE] [--ca-file FILE] [--insecure]
 *  [--stream S] [--batch NAME] [--rules NAME] [-c CONFIG] [--timeout D] FILE|-` */
typedef struct {
    const char *redis_url;
    hv_redis_addr_t addr; /* redis_url, parsed (without the password file's password) */
    const char *password_file; /* --redis-password-file, or NULL */
    const char *ca_file;  /* --ca-file (rediss://), or NULL: the system's */
    int insecure;         /* --insecure: the server's certificate is not checked */
    const char *stream;   /* HV_STREAM_DEFAULT unless given */
    const char *batch;    /* --batch, else FILE's base name */
    const char *rules;    /* "" when not given */
    const char *config;   /* -c/--config: the daemons' configuration, or NULL */
    const char *file;     /* a path, or "-" for standard input */
    uint64_t timeout_ms;  /* --timeout; 0: the defaults (5 s to connect, 10 s per reply) */
    int help;             /* --help: nothing else was checked */
} hv_enqueue_args_t;

/** `harvestd status --redis URL [--redis-password-file FILE] [--ca-file FILE] [--insecure]
 *  [--stream S] [--group G] [--batch NAME]... [--json] [--timeout D]` */
typedef struct {
    const char *redis_url;
    hv_redis_addr_t addr;
    const char *password_file;
    const char *ca_file;
    int insecure;
    const char *stream;   /* HV_STREAM_DEFAULT unless given */
    const char *group;    /* HV_STREAM_GROUP_DEFAULT unless given */
    const char **batches; /* every --batch once, in the order given (owned: see _free) */
    size_t nbatches;
    int json;
    uint64_t timeout_ms;
    int help;
} hv_status_args_t;

/**
 * Parse enqueue's arguments (argv[0] is the command's name). 0, or -1 with a usage error in
 * `err` (one line, no "harvestd: " prefix): an unknown option, a missing value or file, a
 * second file, a URL hv_redis_url_parse() refuses, a bad batch name (by
 * hv_streamkeys_batch_name_ok(); standard input needs --batch), a bad duration. The password
 * file is not read here: the command reads it (hv_redis_url_load()) before connecting.
 */
int hv_streamcmd_parse_enqueue(int argc, char **argv, hv_enqueue_args_t *out, char *err,
                               size_t errcap);

/** Parse status's arguments, as above. On success the caller frees with
 *  hv_streamcmd_status_args_free(); on failure nothing is left to free. */
int hv_streamcmd_parse_status(int argc, char **argv, hv_status_args_t *out, char *err,
                              size_t errcap);

void hv_streamcmd_status_args_free(hv_status_args_t *a);

/**
 * enqueue's check of --rules against -c: load the configuration file `config` and find
 * `rules` among its [rules "NAME"] sections ("" is always found: the batch names none). 0, or
 * -1 with a usage error in `err`: the file cannot be read or has an error (its message), or
 * it has no such section (the message lists those it has).
 */
int hv_streamcmd_check_rules(const char *config, const char *rules, char *err, size_t errcap);

#endif
