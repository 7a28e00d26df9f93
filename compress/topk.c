/* topk.c — the topk codec: keep the k largest magnitudes, send their indices and values.
 *
 * Selection is exact and deterministic: the key of an element is the bit pattern of |v|
 * (finite floats order like their bits, and -0 ties with +0); the k largest keys win, and
 * among equal keys at the threshold the lower indices win. The threshold is found by a
 * three-digit radix select (11 + 10 + 10 bits) that touches the whole vector only twice and
 * then only the candidates of one bucket, so it costs O(n) whatever the data.
 *
 * Payload: [index bytes][values]. Indices ascend; each is sent as the LEB128 varint of its gap
 * to the previous one minus one (first: the index itself). At 1% density a gap is one or two
 * bytes, and zstd squeezes the rest. The values are a dense payload of k elements in the
 * value codec (quant.c), blocks running over the kept values in index order.
 */
#include "compress_internal.h"

#include <math.h>
#include <stdlib.h>

size_t gt_cmp_topk_count(double fraction, size_t n)
{
    if (n == 0) return 0;
    double k = ceil(fraction * (double)n);
    if (k < 1.0) return 1;
    if (k >= (double)n) return n;
    return (size_t)k;
}

static size_t varint_len(uint64_t v)
{
    size_t len = 1;
    while (v >= 0x80) {
        v >>= 7;
        len++;
    }
    return len;
}

size_t gt_cmp_topk_max_size(gt_cmp_codec_t values, uint32_t block, size_t n, size_t k)
{
    size_t vlen = gt_cmp_dense_size(values, block, k);
    if (k > 0 && vlen == 0) return 0;
    size_t per = n ? varint_len((uint64_t)n - 1) : 1;
    if (k > (SIZE_MAX - vlen) / per) return 0;
    return k * per + vlen;
}

static int grow(void **p, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap) return 0;
    void *q = realloc(*p, want * elem);
    if (!q) return -1;
    *p = q;
    *cap = want;
    return 0;
}

void gt_cmp_topk_scratch_free(gt_cmp_topk_scratch_t *sc)
{
    free(sc->keys);
    free(sc->vals);
    free(sc->vres);
    free(sc->idx);
    memset(sc, 0, sizeof(*sc));
}

static gt_status_t scratch_k(gt_cmp_topk_scratch_t *sc, size_t k)
{
    if (k <= sc->k_cap) return GT_OK;
    float *v = realloc(sc->vals, k * sizeof(float));
    if (v) sc->vals = v;
    float *r = v ? realloc(sc->vres, k * sizeof(float)) : NULL;
    if (r) sc->vres = r;
    uint64_t *ix = r ? realloc(sc->idx, k * sizeof(uint64_t)) : NULL;
    if (!ix) {
        GT_ERROR("compress: out of memory for %zu topk entries", k);
        return GT_ERR_NOMEM;
    }
    sc->idx = ix;
    sc->k_cap = k;
    return GT_OK;
}

static inline uint32_t key_of(float v)
{
    return gt_cmp_f2u(v) & 0x7fffffffu;
}

/* Finds the threshold key T and how many elements with key == T to keep (lowest indices).
 * v = x, or, when e != NULL, e <- e + x first (fused into the first pass) and v = e. */
static gt_status_t select_threshold(gt_cmp_topk_scratch_t *sc, const float *x, float *e, size_t n,
                                    size_t k, uint32_t *t_p, size_t *take_eq_p)
{
    size_t *hist = calloc(2048, sizeof(size_t));
    if (!hist) return GT_ERR_NOMEM;
    const float *v = e ? e : x;
    uint32_t mx = 0;
    if (e) {
        for (size_t i = 0; i < n; i++) {
            float s = e[i] + x[i];
            e[i] = s;
            uint32_t key = key_of(s);
            mx = key > mx ? key : mx;
            hist[key >> 20]++;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            uint32_t key = key_of(x[i]);
            mx = key > mx ? key : mx;
            hist[key >> 20]++;
        }
    }
    if (mx >= GT_CMP_ABS_INF) {
        free(hist);
        GT_ERROR("compress: topk input has a NaN/Inf value");
        return GT_ERR_INVALID;
    }
    /* Digit 1: bits 30..20. need = how many still to take from the bucket found. */
    size_t need = k, b1 = 2047;
    while (hist[b1] < need) need -= hist[b1--];
    size_t nc = hist[b1];
    if (grow((void **)&sc->keys, &sc->keys_cap, nc, sizeof(uint32_t))) {
        free(hist);
        return GT_ERR_NOMEM;
    }
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t key = key_of(v[i]);
        if ((key >> 20) == b1) sc->keys[c++] = key;
    }
    /* Digits 2 and 3 (bits 19..10, 9..0) over the candidates only. */
    uint32_t prefix = (uint32_t)b1 << 20;
    for (int shift = 10, mask_hi = 20; shift >= 0; shift -= 10, mask_hi -= 10) {
        memset(hist, 0, 1024 * sizeof(size_t));
        for (size_t i = 0; i < nc; i++)
            if ((sc->keys[i] >> mask_hi) == (prefix >> mask_hi))
                hist[(sc->keys[i] >> shift) & 1023u]++;
        size_t b = 1023;
        while (hist[b] < need) need -= hist[b--];
        prefix |= (uint32_t)b << shift;
    }
    free(hist);
    *t_p = prefix;
    *take_eq_p = need;
    return GT_OK;
}

gt_status_t gt_cmp_topk_encode(gt_cmp_topk_scratch_t *sc, gt_cmp_codec_t values, uint32_t block,
                               const float *x, float *e, size_t n, size_t k, uint8_t *payload,
                               size_t *payload_len_p)
{
    if (n == 0) {
        *payload_len_p = 0;
        return GT_OK;
    }
    gt_status_t st = scratch_k(sc, k);
    if (st != GT_OK) return st;
    const float *v = e ? e : x;
    size_t len = 0;
    if (k > 0) {
        uint32_t t;
        size_t take_eq;
        st = select_threshold(sc, x, e, n, k, &t, &take_eq);
        if (st != GT_OK) return st;
        size_t j = 0;
        uint64_t prev = 0; /* gap to the previous index, minus one; the first: the index */
        int first = 1;
        for (size_t i = 0; i < n; i++) {
            uint32_t key = key_of(v[i]);
            if (key < t || (key == t && take_eq == 0)) continue;
            if (key == t) take_eq--;
            uint64_t d = first ? (uint64_t)i : (uint64_t)i - prev - 1;
            first = 0;
            prev = i;
            while (d >= 0x80) {
                payload[len++] = (uint8_t)(d | 0x80);
                d >>= 7;
            }
            payload[len++] = (uint8_t)d;
            sc->idx[j] = i;
            sc->vals[j] = v[i];
            sc->vres[j] = 0.0f;
            j++;
        }
        if (j != k) {
            GT_ERROR("compress: topk selected %zu of %zu elements", j, k);
            return GT_ERR_INTERNAL;
        }
    }
    /* Values, with their own quantization error kept in vres when error feedback is on. */
    st = gt_cmp_dense_encode(values, block, sc->vals, e ? sc->vres : NULL, k, payload + len);
    if (st != GT_OK) return st;
    if (e)
        for (size_t j = 0; j < k; j++) e[sc->idx[j]] = sc->vres[j];
    *payload_len_p = len + gt_cmp_dense_size(values, block, k);
    return GT_OK;
}

gt_status_t gt_cmp_topk_decode(gt_cmp_topk_scratch_t *sc, gt_cmp_codec_t values, uint32_t block,
                               const uint8_t *payload, size_t payload_len, size_t n, size_t k,
                               float *out)
{
    size_t vlen = gt_cmp_dense_size(values, block, k);
    if ((k > 0 && vlen == 0) || vlen > payload_len) return GT_ERR_CORRUPT;
    size_t ilen = payload_len - vlen;
    if (ilen < k) return GT_ERR_CORRUPT; /* every index takes at least a byte */
    if (n == 0) return payload_len == 0 ? GT_OK : GT_ERR_CORRUPT;
    gt_status_t st = scratch_k(sc, k);
    if (st != GT_OK) return st;
    size_t pos = 0;
    uint64_t next = 0; /* the smallest index the next entry may have */
    for (size_t j = 0; j < k; j++) {
        uint64_t d = 0;
        int shift = 0;
        for (;;) {
            if (pos >= ilen || shift > 63) return GT_ERR_CORRUPT;
            uint8_t b = payload[pos++];
            if (shift == 63 && (b & 0x7e)) return GT_ERR_CORRUPT;
            d |= (uint64_t)(b & 0x7f) << shift;
            shift += 7;
            if (!(b & 0x80)) break;
        }
        if (next >= n || d > (uint64_t)n - 1 - next) return GT_ERR_CORRUPT;
        sc->idx[j] = next + d;
        next = sc->idx[j] + 1;
    }
    if (pos != ilen) return GT_ERR_CORRUPT;
    st = gt_cmp_dense_check(values, block, payload + ilen, k);
    if (st != GT_OK) return st;
    gt_cmp_dense_decode(values, block, payload + ilen, k, sc->vals);
    memset(out, 0, n * sizeof(float));
    for (size_t j = 0; j < k; j++) out[sc->idx[j]] = sc->vals[j];
    return GT_OK;
}
