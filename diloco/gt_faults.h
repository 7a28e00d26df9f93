/* gt_faults.h — fault injection: the chaos and emulation hooks of a site, for tests,
 * benchmarks and `geotrain launch`; never needed to train.
 *
 * A site can be made slow (every step, or in windows of rounds), can flip one bit of its
 * anchor after a round (the hash vote must catch it and re-fetch), and can stop dead at a round
 * so that its supervisor kills it there. The library never kills its own process: at the kill
 * point it appends a line to the supervisor's notice file and stops itself (SIGSTOP, every
 * thread at once, as a crashed machine goes silent), and the supervisor — `geotrain launch`,
 * which passes the notice file — SIGKILLs the site's whole process tree on reading the line.
 *
 * The launcher sets them through the environment, one variable each; this is their one table
 * (docs/api.md#environment lists every GT_ variable geotrain reads):
 *
 *   GT_SLOW           FACTOR in [1, 1000]: every step FACTOR times longer
 *   GT_SLOW_WINDOWS   "FACTOR@FROM-TO,...": steps FACTOR times slower from the step where
 *                     step / H reaches FROM, for TO - FROM rounds of wall time at the site's
 *                     usual speed (fractions allowed; at most 16 windows; launch --chaos)
 *   GT_CORRUPT_ANCHOR ROUND: flip one bit of the anchor after applying that round
 *   GT_KILL_AT_ROUND  ROUNDS: stop once this many rounds are applied, for the supervisor to kill
 *   GT_FAULT_NOTIFY   PATH: the supervisor's notice file (needed with GT_KILL_AT_ROUND)
 *   GT_CHAOS_CUTS     PATH: a file of emulated link cuts the launcher appends to while the run
 *                     goes on, one line each, "cut A B START_S DURATION_S" (B "*": every
 *                     other site; seconds on the GT_EMU_START_NS clock); the WAN thread reads
 *                     new lines every 100 ms and adds the windows to its emulated links
 *                     (launch --chaos fires its cuts at their rounds this way)
 *
 * A gt_diloco_t made with params.env = 1 reads them at create (gt_faults_from_env); any other
 * gets them from gt_diloco_set_faults.
 */
#ifndef GT_FAULTS_H
#define GT_FAULTS_H

#include "gt_base.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GT_FAULTS_MAX_WINDOWS 16

typedef struct {
    double factor;   /* steps this many times slower */
    double from, to; /* rounds: from step / H = from, for (to - from) rounds of wall time */
} gt_fault_window_t;

typedef struct {
    double slow;                  /* >= 1: every step this many times longer (1: not slowed) */
    int64_t corrupt_anchor_round; /* flip one bit of the anchor after this round (-1: never) */
    int64_t kill_at_round;        /* stop for the supervisor to kill once this many rounds are
                                     applied (-1: never); needs notify */
    char notify[4096];            /* the supervisor's notice file ("": none) */
    char cuts[4096];              /* GT_CHAOS_CUTS: the launcher's file of link cuts ("": none) */
    uint32_t n_windows;
    gt_fault_window_t windows[GT_FAULTS_MAX_WINDOWS];
} gt_faults_t;

/* No fault: not slowed, nothing corrupted, never killed. */
GT_API void gt_faults_init(gt_faults_t *f);

/* The faults the environment asks for (the table above), over gt_faults_init's defaults.
 * GT_ERR_INVALID, naming the variable and what it expects, when a value is malformed or out of
 * range, or GT_KILL_AT_ROUND comes without GT_FAULT_NOTIFY (nobody would kill the site). */
GT_API gt_status_t gt_faults_from_env(gt_faults_t *f);

/* Checks f as gt_faults_from_env checks what it reads. */
GT_API gt_status_t gt_faults_check(const gt_faults_t *f);

struct gt_diloco;

/* Replaces the faults of a site made by gt_diloco_create (copied; checked as above). Call it
 * before the first gt_diloco_step. */
GT_API gt_status_t gt_diloco_set_faults(struct gt_diloco *d, const gt_faults_t *f);

#ifdef __cplusplus
}
#endif

#endif /* GT_FAULTS_H */
