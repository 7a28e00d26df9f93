/* launch_ranks.h — a user's CMD started once per rank of a site, with torchrun's variables
 * (internal to cli/; cmd_launch.c's site child calls it).
 */
#ifndef GT_CLI_LAUNCH_RANKS_H
#define GT_CLI_LAUNCH_RANKS_H

#include <stdint.h>

/* torchrun's variables for a site of `ranks` ranks, in this process's environment: WORLD_SIZE
 * = LOCAL_WORLD_SIZE = ranks, GROUP_RANK = 0, MASTER_ADDR / MASTER_PORT (a free loopback port:
 * the site's own rendezvous) and, for one rank, RANK = LOCAL_RANK = 0. -1 on failure. */
int gt_launch_rank_env(uint32_t ranks, const char *site);

/* Becomes the supervisor of site `site`'s `ranks` processes of argv (NULL-terminated): each
 * gets RANK = LOCAL_RANK = k, WORLD_SIZE = LOCAL_WORLD_SIZE = ranks, GROUP_RANK = 0 and the
 * site's own rendezvous MASTER_ADDR / MASTER_PORT (a free loopback port) on top of the
 * environment it inherits. Never returns: exits as the ranks did (the signal a rank died of,
 * else the first non-zero exit status, else 0). */
void gt_launch_ranks(char *const *argv, uint32_t ranks, const char *site);

#endif /* GT_CLI_LAUNCH_RANKS_H */
