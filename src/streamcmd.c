/* streamcmd.c: `harvestd enqueue` and `harvestd status` (land with their tests). */
#include <stdio.h>

#include "harvestd/commands.h"

int hv_cmd_enqueue(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "harvestd: enqueue: not available in this build\n");
    return 2;
}

int hv_cmd_status(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "harvestd: status: not available in this build\n");
    return 2;
}
