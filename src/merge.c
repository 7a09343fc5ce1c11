/* merge.c: `harvestd merge` (lands with its tests). */
#include <stdio.h>

#include "harvestd/commands.h"

int hv_cmd_merge(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "harvestd: merge: not available in this build\n");
    return 2;
}
