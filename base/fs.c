/* fs.c — file-system helpers shared by the modules. */
#define _XOPEN_SOURCE 700
#include "gt_base.h"

#include <ftw.h>
#include <stdio.h>

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int gt_rmtree(const char *path)
{
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
