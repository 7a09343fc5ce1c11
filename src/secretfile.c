/* secretfile.c: a secret's file opened, checked and read within a bound (secretfile.h). */
#include "harvestd/secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <uv.h>

#include "harvestd/common.h"

/* The file's first `cap` bytes (all of it when shorter): the byte count, or a negative
 * errno. */
static ssize_t read_up_to(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if (got == 0)
            break;
        n += (size_t)got;
    }
    return (ssize_t)n;
}

int hv_secret_file_read(const char *path, const char *what, char *buf, size_t cap, size_t *len,
                        char *err, size_t errcap)
{
    struct stat st;
    ssize_t n = 0;
    int rc = -1;
    /* O_NONBLOCK: a FIFO put in the file's place must not hang the start; it is refused
     * below as not a regular file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    *len = 0;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errcap, "cannot read the %s %s: %s", what, path,
                 hv_strerror(uv_translate_sys_error(errno)));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "the %s %s is not a regular file", what, path);
        goto out;
    }
    if (st.st_mode & (S_IRGRP | S_IROTH)) {
        snprintf(err, errcap, "the %s %s is readable by %s (mode %04o): let only its owner "
                 "read it (chmod 600)", what, path,
                 (st.st_mode & S_IRGRP) && (st.st_mode & S_IROTH) ? "its group and others"
                 : (st.st_mode & S_IRGRP)                          ? "its group"
                                                                   : "others",
                 (unsigned)(st.st_mode & 07777));
        goto out;
    }
    n = read_up_to(fd, buf, cap);
    if (n < 0) {
        explicit_bzero(buf, cap);
        snprintf(err, errcap, "cannot read the %s %s: %s", what, path,
                 hv_strerror(uv_translate_sys_error((int)-n)));
        goto out;
    }
    *len = (size_t)n;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    return rc;
}
