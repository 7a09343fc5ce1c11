/* common.c: errors, allocation wrappers, clocks. */
#include "harvestd/common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

static const struct {
    int code;
    const char *name;
    const char *text;
} hv_errors[] = {
    {HV_ETOOBIG, "HV_ETOOBIG", "limit exceeded"},
    {HV_EPROTO, "HV_EPROTO", "protocol error"},
    {HV_EDECODE, "HV_EDECODE", "content decoding failed"},
    {HV_EURL, "HV_EURL", "malformed URL"},
    {HV_ESCHEME, "HV_ESCHEME", "unsupported URL scheme"},
    {HV_ECLOSED, "HV_ECLOSED", "connection closed before the response completed"},
    {HV_ECANCELLED, "HV_ECANCELLED", "cancelled"},
    {HV_ENESTING, "HV_ENESTING", "document nested too deeply"},
    {HV_ETLS, "HV_ETLS", "TLS failure"},
    {HV_ECERT, "HV_ECERT", "certificate verification failed"},
    {HV_EBLOCKED, "HV_EBLOCKED", "address refused by the address guard"},
    {HV_EREFUSED, "HV_EREFUSED", "refused by the server"},
    {HV_ENOTREADY, "HV_ENOTREADY", "the server is not ready"},
    {HV_EPROXY, "HV_EPROXY", "proxy failure"},
};

const char *hv_strerror(int err)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(hv_errors); i++)
        if (hv_errors[i].code == err)
            return hv_errors[i].text;
    return uv_strerror(err);
}

const char *hv_err_name(int err)
{
    for (size_t i = 0; i < HV_ARRAY_SIZE(hv_errors); i++)
        if (hv_errors[i].code == err)
            return hv_errors[i].name;
    return uv_err_name(err);
}

const char *hv_err_name_arg(char *out, size_t cap, int err, size_t skip)
{
    const char *name = hv_err_name(err);
    size_t n = 0;
    if (strlen(name) > skip)
        name += skip;
    for (; *name != '\0' && n + 1 < cap; name++)
        out[n++] = (char)hv_ascii_lower((unsigned char)*name);
    out[n] = '\0';
    return out;
}

static void oom(size_t size)
{
    fprintf(stderr, "harvestd: out of memory allocating %zu bytes\n", size);
    abort();
}

void *hv_xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p == NULL)
        oom(size);
    return p;
}

void *hv_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *hv_xrealloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (q == NULL)
        oom(size);
    return q;
}

char *hv_xstrndup(const char *s, size_t n)
{
    char *p = hv_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *hv_xstrdup(const char *s)
{
    return hv_xstrndup(s, strlen(s));
}

int64_t hv_now_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t hv_mono_ms(void)
{
    return uv_hrtime() / 1000000u;
}

void hv_format_size(char *out, size_t cap, uint64_t bytes)
{
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(out, cap, "%" PRIu64 "_mib", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(out, cap, "%" PRIu64 "_kib", bytes >> 10);
    else
        snprintf(out, cap, "%" PRIu64 "_bytes", bytes);
}

int hv_errf(char *err, size_t cap, int code, const char *fmt, ...)
{
    va_list ap;
    if (cap > 0) {
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

int hv_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return uv_translate_sys_error(errno);
        if (w == 0)
            return UV_EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int hv_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return uv_translate_sys_error(errno);
    int rc = 0;
    while (fsync(fd) != 0) {
        if (errno != EINTR) {
            rc = uv_translate_sys_error(errno);
            break;
        }
    }
    close(fd);
    return rc;
}

int hv_check_readable(const char *what, const char *path, char *err, size_t errcap)
{
    struct stat st;
    int e = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        e = errno;
    else if (fstat(fd, &st) != 0)
        e = errno;
    else if (S_ISDIR(st.st_mode))
        e = EISDIR;
    if (fd >= 0)
        close(fd);
    if (e == 0)
        return 0;
    return hv_errf(err, errcap, uv_translate_sys_error(e), "cannot read %s %s: %s", what, path,
                   strerror(e));
}

int hv_fsync_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return hv_fsync_dir(".");
    if (slash == path)
        return hv_fsync_dir("/");
    char *dir = hv_xstrndup(path, (size_t)(slash - path));
    int rc = hv_fsync_dir(dir);
    free(dir);
    return rc;
}

int hv_rename_unique(const char *from, const char *dir, const char *name, char **final)
{
    enum { MAX_SUFFIX = 10000 };
    size_t cap = strlen(dir) + strlen(name) + 16;
    char *to = hv_xmalloc(cap);
    int rc = UV_EEXIST;
    for (int i = 0; i < MAX_SUFFIX; i++) {
        int n = i == 0 ? snprintf(to, cap, "%s/%s", dir, name)
                       : snprintf(to, cap, "%s/%s.%d", dir, name, i);
        (void)n; /* `cap` has room for any suffix */
        if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) {
            if (final != NULL)
                *final = hv_xstrdup(to + strlen(dir) + 1);
            rc = 0;
            break;
        }
        if (errno != EEXIST) {
            rc = uv_translate_sys_error(errno);
            break;
        }
    }
    free(to);
    return rc;
}
