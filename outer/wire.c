/* wire.c — the outer-round payloads, packed and unpacked in one place.
 *
 * Every payload the engine sends starts with a magic and the protocol version, then a fixed
 * preamble, all little-endian: DELTA (a site's contribution to one chunk, then the codec frame),
 * RESULT (an owner's aggregate of one chunk, then the codec frame), and three control payloads,
 * each under a message type of its own — JOIN (a site's first round), FIN (the contribution
 * frames a finished site took from the receiver) and PULL (a request to relay a RESULT chunk). Kept
 * here, beside each other, so that the byte layout of the protocol is read in one file, as the
 * frame header's is in wan/channel/frame.c; the engine's files see only the structs.
 *
 * Unpacking checks the length, magic and version only; what the fields mean (a weight that must
 * be positive, a layout that must match) is judged by the caller, which knows the context to
 * log.
 */
#include "outer_internal.h"

#include <string.h>

static void putf64(uint8_t *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    gt_le_put64(p, v);
}

static double getf64(const uint8_t *p)
{
    uint64_t v = gt_le_get64(p);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

static int is(const uint8_t *b, size_t len, size_t min, uint32_t magic)
{
    return len >= min && gt_le_get32(b) == magic && gt_le_get32(b + 4) == PROTO_VERSION;
}

uint32_t outer_wire_magic(const void *buf, size_t len)
{
    return len >= 4 ? gt_le_get32(buf) : 0;
}

/* DELTA: 0 magic, 4 version, 8 weight (f64), 16 anchor hash, 24 n_sites, 28 flags. */
void outer_delta_pack(uint8_t b[DELTA_PRE], const outer_delta_t *d)
{
    gt_le_put32(b, DELTA_MAGIC);
    gt_le_put32(b + 4, PROTO_VERSION);
    putf64(b + 8, d->weight);
    gt_le_put64(b + 16, d->anchor_hash);
    gt_le_put32(b + 24, d->n_sites);
    gt_le_put32(b + 28, d->flags);
}

int outer_delta_unpack(const uint8_t *b, size_t len, outer_delta_t *d_p)
{
    if (!is(b, len, DELTA_PRE, DELTA_MAGIC)) return 0;
    d_p->weight = getf64(b + 8);
    d_p->anchor_hash = gt_le_get64(b + 16);
    d_p->n_sites = gt_le_get32(b + 24);
    d_p->flags = gt_le_get32(b + 28);
    return 1;
}

void outer_delta_set_flags(uint8_t *b, uint32_t flags)
{
    gt_le_put32(b + 28, flags);
}

void outer_delta_set_weight(uint8_t *b, double weight)
{
    putf64(b + 8, weight);
}

/* RESULT: 0 magic, 4 version, 8 owner, 12 contributions, 16 on-time mask, 24 majority hash,
 * 32 its votes, 36 folded, 40 weight sum (f64), 48 tokens (f64); 56 the folded list
 * (RESULT_FOLD_BYTES an entry), then the codec frame. */
void outer_result_pack(uint8_t b[RESULT_PRE], const outer_result_t *r)
{
    gt_le_put32(b, RESULT_MAGIC);
    gt_le_put32(b + 4, PROTO_VERSION);
    gt_le_put32(b + 8, r->owner);
    gt_le_put32(b + 12, r->n_contrib);
    gt_le_put64(b + 16, r->mask);
    gt_le_put64(b + 24, r->best_hash);
    gt_le_put32(b + 32, r->best_votes);
    gt_le_put32(b + 36, r->folded);
    putf64(b + 40, r->wsum);
    putf64(b + 48, r->tokens);
}

int outer_result_unpack(const uint8_t *b, size_t len, outer_result_t *r_p)
{
    if (!is(b, len, RESULT_PRE, RESULT_MAGIC)) return 0;
    uint32_t folded = gt_le_get32(b + 36);
    if (folded > GT_OUTER_MAX_SITES || len < RESULT_PRE + (size_t)folded * RESULT_FOLD_BYTES)
        return 0;
    r_p->owner = gt_le_get32(b + 8);
    r_p->n_contrib = gt_le_get32(b + 12);
    r_p->mask = gt_le_get64(b + 16);
    r_p->best_hash = gt_le_get64(b + 24);
    r_p->best_votes = gt_le_get32(b + 32);
    r_p->folded = gt_le_get32(b + 36);
    r_p->wsum = getf64(b + 40);
    r_p->tokens = getf64(b + 48);
    return 1;
}

uint32_t outer_result_owner(const uint8_t *b)
{
    return gt_le_get32(b + 8);
}

size_t outer_result_frame_at(const uint8_t *b)
{
    return RESULT_PRE + (size_t)gt_le_get32(b + 36) * RESULT_FOLD_BYTES;
}

void outer_result_fold_put(uint8_t *b, uint32_t i, uint32_t sender, uint32_t back)
{
    uint8_t *e = b + RESULT_PRE + (size_t)i * RESULT_FOLD_BYTES;
    e[0] = (uint8_t)sender;
    e[1] = 0;
    gt_le_put16(e + 2, (uint16_t)(back > 0xFFFFu ? 0 : back));
}

void outer_result_fold_get(const uint8_t *b, uint32_t i, uint32_t *sender_p, uint32_t *back_p)
{
    const uint8_t *e = b + RESULT_PRE + (size_t)i * RESULT_FOLD_BYTES;
    *sender_p = e[0];
    *back_p = gt_le_get16(e + 2);
}

/* JOIN and FIN: 0 magic, 4 version, 8 value, 16 reserved (0). */
void outer_control_pack(uint8_t b[CONTROL_PRE], uint32_t magic, uint64_t value)
{
    gt_le_put32(b, magic);
    gt_le_put32(b + 4, PROTO_VERSION);
    gt_le_put64(b + 8, value);
    gt_le_put64(b + 16, 0);
}

int outer_control_unpack(const uint8_t *b, size_t len, uint32_t magic, uint64_t *value_p)
{
    if (len != CONTROL_PRE || gt_le_get32(b) != magic || gt_le_get32(b + 4) != PROTO_VERSION)
        return 0;
    *value_p = gt_le_get64(b + 8);
    return 1;
}

/* PULL: 0 magic, 4 version, 8 reserved (0); the chunk and round are the message header's. */
void outer_pull_pack(uint8_t b[PULL_PRE])
{
    memset(b, 0, PULL_PRE);
    gt_le_put32(b, PULL_MAGIC);
    gt_le_put32(b + 4, PROTO_VERSION);
}

int outer_pull_unpack(const uint8_t *b, size_t len)
{
    return len == PULL_PRE && gt_le_get32(b) == PULL_MAGIC && gt_le_get32(b + 4) == PROTO_VERSION;
}
