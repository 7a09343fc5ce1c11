/* tmpout.c: a command's output written beside its final name (see commands.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harvestd/commands.h"
#include "harvestd/common.h"

/* The temporary file while it is being written: a signal that ends the command removes it
 * (unlink() is async-signal-safe), then ends the process as the signal would have. One at a
 * time: a command writes one output. */
static const char *volatile pending_tmp;

static const int fatal_signals[HV_CMD_TMP_SIGNALS] = {SIGINT, SIGTERM, SIGHUP};

static void on_fatal_signal(int sig)
{
    const char *tmp = pending_tmp;
    if (tmp != NULL)
        unlink(tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

int hv_cmd_tmp_open(hv_cmd_tmp_t *t, const char *path, char *err, size_t errcap)
{
    size_t n = strlen(path) + 32;
    memset(t, 0, sizeof(*t));
    t->path = hv_xmalloc(n);
    snprintf(t->path, n, "%s.tmp.%ld", path, (long)getpid());
    t->fd = open(t->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (t->fd < 0) {
        int rc = hv_errf(err, errcap, -errno, "cannot create %s: %s", t->path, strerror(errno));
        free(t->path);
        t->path = NULL;
        return rc;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    pending_tmp = t->path;
    for (size_t i = 0; i < HV_ARRAY_SIZE(fatal_signals); i++)
        sigaction(fatal_signals[i], &sa, &t->old[i]);
    return 0;
}

void hv_cmd_tmp_close(hv_cmd_tmp_t *t, int published)
{
    if (t->path == NULL)
        return;
    if (t->fd >= 0)
        close(t->fd);
    if (!published)
        unlink(t->path);
    for (size_t i = 0; i < HV_ARRAY_SIZE(fatal_signals); i++)
        sigaction(fatal_signals[i], &t->old[i], NULL);
    pending_tmp = NULL;
    free(t->path);
    t->path = NULL;
    t->fd = -1;
}
