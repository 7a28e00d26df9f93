/* membership.c — etcd v3 JSON gateway client: lease, member key, heartbeat, view by CAS.
 *
 * HTTP/1.1 through libcurl, JSON through jansson, base64 through the channel's helpers
 * (base64_internal.h). The heartbeat runs on its own thread with its own curl handle, so a
 * training step that takes longer than the TTL never costs a site its membership; API calls
 * share a second handle under a lock.
 * int64 fields are strings in the gateway's JSON (grpc-gateway's proto3 mapping).
 */
#include "gt_wan.h"
#include "base64_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct gt_wan_member {
    char **endpoints;
    size_t n_endpoints;
    char *tls_ca, *tls_cert, *tls_key;      /* NULL: not given */
    char api_error[CURL_ERROR_SIZE + 1100]; /* the last failed request on `api` */
    size_t good_endpoint;                   /* last endpoint that answered */
    char member_key[512];
    char members_prefix[512];
    char view_key[512];
    char started_key[512];
    char suspects_prefix[512]; /* PREFIX/RUN/suspects/ */
    char retired_prefix[512];  /* PREFIX/RUN/retired/: sites retired for good */
    char added_prefix[512];    /* PREFIX/RUN/added/: sites added mid-run (`geotrain sites add`) */
    char slots_prefix[512];    /* PREFIX/RUN/slots/: the slot each added site took */
    char pinned_prefix[512];   /* PREFIX/RUN/pinned/NAME/BY: BY pinned added site NAME's key */
    char site[GT_WAN_MEMBER_NAME_MAX];
    char address[GT_WAN_MEMBER_ADDR_MAX];
    int64_t lease;
    uint32_t ttl_s, heartbeat_ms, timeout_ms;
    int64_t view_revision;

    CURL *api; /* used under api_lock */
    pthread_mutex_t api_lock;
    pthread_t hb_thread;
    int hb_running;
    int hb_started; /* registration completed */
    pthread_mutex_t hb_lock;
    pthread_cond_t hb_cond;
    int hb_stop;
    volatile int lost;          /* etcd said the lease is gone: the others have removed this site */
    volatile int frozen;        /* etcd has not answered for a TTL: no view can change meanwhile */
    volatile uint64_t hb_count; /* keepalive attempts finished (answered or not) */
    volatile uint64_t hb_answer; /* keepalives etcd answered (lease alive or gone) */
    /* After a request no etcd member answered in time, API calls fail at once until then (or
     * until a heartbeat gets through): the caller's thread (the site's WAN thread) must not
     * block for a request timeout on every call while etcd is away. */
    volatile uint64_t api_quiet_until_ns;
};

typedef struct {
    char *data;
    size_t len, cap;
} buf_t;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    buf_t *b = ud;
    size_t add = size * n;
    if (b->len + add + 1 > (4u << 20)) return 0; /* a gateway reply is never this large */
    if (b->len + add + 1 > b->cap) {
        size_t cap = (b->len + add + 1) * 2;
        char *nd = realloc(b->data, cap);
        if (!nd) return 0;
        b->data = nd;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

/* POSTs `body` to PATH on the first endpoint that answers; *reply_p is the parsed JSON. */
static gt_status_t post(gt_wan_member_t *m, CURL *h, const char *path, json_t *body,
                        json_t **reply_p)
{
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text) return GT_ERR_NOMEM;
    gt_status_t st = GT_ERR_IO;
    for (size_t k = 0; k < m->n_endpoints; k++) {
        size_t e = (m->good_endpoint + k) % m->n_endpoints;
        char url[1024];
        buf_t b = {NULL, 0, 0};
        snprintf(url, sizeof url, "%s%s", m->endpoints[e], path);
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)m->timeout_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)m->timeout_ms);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        if (m->tls_ca) curl_easy_setopt(h, CURLOPT_CAINFO, m->tls_ca);
        if (m->tls_cert) { /* etcd's --client-cert-auth: this site's certificate */
            curl_easy_setopt(h, CURLOPT_SSLCERT, m->tls_cert);
            curl_easy_setopt(h, CURLOPT_SSLKEY, m->tls_key);
        }
        CURLcode rc = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (rc != CURLE_OK) {
            if (h == m->api) /* for the error at create: a refused certificate says so here */
                snprintf(m->api_error, sizeof m->api_error, "%s: %s", url,
                         errbuf[0] ? errbuf : curl_easy_strerror(rc));
            GT_DEBUG("etcd %s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
            st = rc == CURLE_OPERATION_TIMEDOUT ? GT_ERR_TIMEOUT : GT_ERR_IO;
            free(b.data);
            continue;
        }
        json_error_t jerr;
        json_t *reply = b.data ? json_loads(b.data, 0, &jerr) : NULL;
        if (!reply || code != 200) {
            const char *msg = reply ? json_string_value(json_object_get(reply, "message")) : NULL;
            /* a lease to revoke that is gone already (evicted, or run out) is what was wanted */
            if (code == 404 && strcmp(path, "/v3/lease/revoke") == 0)
                GT_DEBUG("etcd %s: the lease is gone already", url);
            else
                GT_WARN("etcd %s answered HTTP %ld: %s", url, code,
                        msg ? msg : (b.data ? b.data : ""));
            json_decref(reply);
            free(b.data);
            st = GT_ERR_IO;
            /* An answer from etcd itself (not a transport failure) is final. */
            if (code >= 400 && code < 500) break;
            continue;
        }
        free(b.data);
        m->good_endpoint = e;
        *reply_p = reply;
        st = GT_OK;
        break;
    }
    free(text);
    return st;
}

/* One request on the API connection (under its lock); consumes req (NULL: out of memory). */
static gt_status_t api_call(gt_wan_member_t *m, const char *path, json_t *req, json_t **reply_p)
{
    if (!req) return GT_ERR_NOMEM;
    if (m->frozen || gt_time_ns() < m->api_quiet_until_ns) {
        json_decref(req);
        return GT_ERR_TIMEOUT; /* etcd is away; the heartbeat thread notices its return */
    }
    pthread_mutex_lock(&m->api_lock);
    gt_status_t st = post(m, m->api, path, req, reply_p);
    pthread_mutex_unlock(&m->api_lock);
    json_decref(req);
    if (st == GT_ERR_TIMEOUT && m->hb_started)
        m->api_quiet_until_ns = gt_time_ns() + (uint64_t)m->ttl_s * 1000000000ull;
    return st;
}

static json_t *b64(const char *s, size_t n)
{
    char *out = gt_wan_base64_encode(s, n);
    if (!out) return NULL;
    json_t *j = json_string(out);
    free(out);
    return j;
}

/* Decodes a base64 JSON string into a NUL-terminated malloc'd buffer. */
static char *unb64(json_t *j, size_t *len_p)
{
    const char *s = json_string_value(j);
    if (!s) return NULL;
    size_t n = strlen(s), len = 0;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    if (gt_wan_base64_decode(s, n, out, n, &len) != 0) {
        free(out);
        return NULL;
    }
    out[len] = '\0';
    if (len_p) *len_p = len;
    return out;
}

/* int64 fields arrive as strings (or, from some gateways, numbers). */
static int64_t get_i64(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v)) return (int64_t)json_integer_value(v);
    const char *s = json_string_value(v);
    return s ? strtoll(s, NULL, 10) : 0;
}

static json_t *i64_string(int64_t v)
{
    char s[32];
    snprintf(s, sizeof s, "%lld", (long long)v);
    return json_string(s);
}

/* The range_end for a prefix: the prefix with its last byte incremented. */
static json_t *prefix_end(const char *prefix)
{
    char end[512];
    size_t n = strlen(prefix);
    if (n == 0 || n >= sizeof end) return NULL;
    memcpy(end, prefix, n);
    end[n - 1]++;
    return b64(end, n);
}

/* ---- heartbeat ---- */

static gt_status_t keepalive(gt_wan_member_t *m, CURL *h, int *alive_p)
{
    json_t *req = json_pack("{s:o}", "ID", i64_string(m->lease)), *reply = NULL;
    gt_status_t st = post(m, h, "/v3/lease/keepalive", req, &reply);
    json_decref(req);
    if (st != GT_OK) return st;
    json_t *result = json_object_get(reply, "result");
    *alive_p = get_i64(result ? result : reply, "TTL") > 0;
    json_decref(reply);
    return GT_OK;
}

static void *heartbeat_main(void *arg)
{
    gt_wan_member_t *m = arg;
    CURL *h = curl_easy_init();
    uint64_t last_ok = gt_time_ns();
    pthread_mutex_lock(&m->hb_lock);
    while (!m->hb_stop && h) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)m->heartbeat_ms * 1000000ull;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&m->hb_cond, &m->hb_lock, &ts);
        if (m->hb_stop) break;
        pthread_mutex_unlock(&m->hb_lock);
        int alive = 0;
        gt_status_t st = keepalive(m, h, &alive);
        uint64_t now = gt_time_ns();
        if (st == GT_OK) __atomic_add_fetch(&m->hb_answer, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&m->hb_count, 1, __ATOMIC_SEQ_CST);
        if (st == GT_OK && alive) {
            if (m->frozen)
                GT_WARN("membership: etcd answers again after %.1f s; site %s's lease held, "
                        "membership changes resume",
                        (double)(now - last_ok) * 1e-9, m->site);
            m->frozen = 0;
            m->api_quiet_until_ns = 0;
            last_ok = now;
        } else if (st == GT_OK) {
            if (!m->lost) GT_ERROR("membership: site %s lost its lease (expired)", m->site);
            m->lost = 1;
        } else if (!m->frozen && now - last_ok > (uint64_t)m->ttl_s * 1000000000ull) {
            /* No answer is not an answer: without a quorum etcd can neither renew nor expire
             * a lease (a new leader extends every lease), nor change the view. So the last
             * agreed view still holds for every site that can reach the others: training goes
             * on, and only joins and removals wait. If etcd (with a quorum) did drop this site,
             * it says so when it answers again, and the site is out then. */
            GT_WARN("membership: site %s cannot reach etcd for %u s (%s): membership is frozen; "
                    "training goes on with the last agreed view, joins and removals wait",
                    m->site, m->ttl_s, gt_status_str(st));
            m->frozen = 1;
        }
        pthread_mutex_lock(&m->hb_lock);
    }
    pthread_mutex_unlock(&m->hb_lock);
    if (h) curl_easy_cleanup(h);
    return NULL;
}

static void stop_heartbeat(gt_wan_member_t *m)
{
    if (!m->hb_running) return;
    pthread_mutex_lock(&m->hb_lock);
    m->hb_stop = 1;
    pthread_cond_signal(&m->hb_cond);
    pthread_mutex_unlock(&m->hb_lock);
    pthread_join(m->hb_thread, NULL);
    m->hb_running = 0;
}

/* ---- create / destroy ---- */

/* {name, address} and the fields of the note (a JSON object's text, or NULL). */
static json_t *member_value(const gt_wan_member_t *m, const char *note)
{
    json_t *v = json_object();
    if (note && *note) {
        json_t *n = json_loads(note, 0, NULL);
        if (!json_is_object(n)) {
            GT_ERROR("membership: the note '%.60s' is not a JSON object", note);
            json_decref(n);
            json_decref(v);
            return NULL;
        }
        json_object_update(v, n);
        json_decref(n);
    }
    json_object_set_new(v, "name", json_string(m->site));
    json_object_set_new(v, "address", json_string(m->address));
    json_object_set_new(v, "lease", json_integer((json_int_t)m->lease));
    return v;
}

static int parse_member(const char *text, gt_wan_member_info_t *info);

/* Whether nobody listens at `address` ("host:port", "[v6]:port"): a TCP connection to each
 * address it resolves to is refused (the host's kernel answers for a process that died). An
 * accepted connection, a timeout, no route or an address that does not parse prove nothing. */
static int nobody_listens(const char *address, unsigned timeout_ms)
{
    char host[GT_WAN_MEMBER_ADDR_MAX], service[8];
    uint16_t port = 0;
    if (gt_topo_addr_split(address, host, sizeof host, &port) != GT_OK || !port) return 0;
    snprintf(service, sizeof service, "%u", (unsigned)port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if (getaddrinfo(host, service, &hints, &res) != 0 || !res) return 0;
    /* Every address the name resolves to must refuse (a host name may give an IPv6 and an
     * IPv4 address, and the holder listen on one of them only). */
    int refused = 1;
    for (struct addrinfo *ai = res; ai && refused; ai = ai->ai_next) {
        int one = 0;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
                if (errno == ECONNREFUSED) {
                    one = 1;
                } else if (errno == EINPROGRESS) {
                    struct pollfd pf = {fd, POLLOUT, 0};
                    int err = 0;
                    socklen_t el = sizeof err;
                    if (poll(&pf, 1, (int)timeout_ms) == 1 &&
                        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0)
                        one = err == ECONNREFUSED;
                }
            }
            close(fd);
        }
        refused = one;
    }
    freeaddrinfo(res);
    return refused;
}

/* The member key is held by another lease. With replace_gone, when that lease's holder is
 * provably gone — it published this process's own address (which this process now listens on)
 * or nobody listens at the address it published — the lease is revoked, and 1 returned: the
 * caller puts its key again instead of waiting up to a TTL (and, after an etcd leader change,
 * longer: a new leader extends every lease) for it to run out. A holder that is frozen
 * (SIGSTOP) still has its listener, so it is never taken for gone. */
static int take_over_gone(gt_wan_member_t *m, json_t *txn_reply)
{
    json_t *resp = json_array_get(json_object_get(txn_reply, "responses"), 0);
    json_t *rr = json_object_get(resp, "response_range");
    if (!rr) rr = json_object_get(resp, "responseRange");
    json_t *kv = json_array_get(json_object_get(rr, "kvs"), 0);
    int64_t old = get_i64(kv, "lease");
    char *text = unb64(json_object_get(kv, "value"), NULL);
    gt_wan_member_info_t info;
    int parsed = text && parse_member(text, &info);
    free(text);
    if (!old || old == m->lease || !parsed) return 0;
    int own = m->address[0] && strcmp(info.address, m->address) == 0;
    if (!own && !nobody_listens(info.address, m->timeout_ms)) return 0;
    json_t *req = json_pack("{s:o}", "ID", i64_string(old)), *reply = NULL;
    gt_status_t st = post(m, m->api, "/v3/lease/revoke", req, &reply);
    json_decref(req);
    json_decref(reply);
    if (st != GT_OK) return 0;
    GT_WARN("membership: site %s: its previous process is gone (%s %s): revoked its lease %lld "
            "instead of waiting for it to run out",
            m->site,
            own ? "it published the address this process listens on," : "nobody listens at",
            own ? "" : info.address, (long long)old);
    return 1;
}

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static void curl_global(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The member's endpoints, keys and API connection from params: no lease, nothing registered
 * (gt_wan_member_destroy frees it). */
static gt_status_t member_new(const gt_wan_member_params_t *p, gt_wan_member_t **m_p)
{
    gt_status_t st = GT_OK;
    pthread_once(&g_curl_once, curl_global);
    gt_wan_member_t *m = calloc(1, sizeof *m);
    if (!m) return GT_ERR_NOMEM;
    pthread_mutex_init(&m->api_lock, NULL);
    pthread_mutex_init(&m->hb_lock, NULL);
    pthread_cond_init(&m->hb_cond, NULL);
    m->endpoints = calloc(p->n_endpoints, sizeof *m->endpoints);
    GT_REQUIRE_GOTO(m->endpoints, st, GT_ERR_NOMEM, fail, "membership: out of memory");
    for (size_t i = 0; i < p->n_endpoints; i++) {
        m->endpoints[i] = strdup(p->endpoints[i]);
        GT_REQUIRE_GOTO(m->endpoints[i], st, GT_ERR_NOMEM, fail, "membership: out of memory");
        size_t n = strlen(m->endpoints[i]);
        if (n && m->endpoints[i][n - 1] == '/') m->endpoints[i][n - 1] = '\0';
        m->n_endpoints++;
    }
    GT_REQUIRE_GOTO(
        (p->tls_cert && *p->tls_cert) == (p->tls_key && *p->tls_key), st, GT_ERR_INVALID, fail,
        "membership: a TLS client certificate needs its key, and a key its certificate");
    if (p->tls_ca && *p->tls_ca) m->tls_ca = strdup(p->tls_ca);
    if (p->tls_cert && *p->tls_cert) m->tls_cert = strdup(p->tls_cert);
    if (p->tls_key && *p->tls_key) m->tls_key = strdup(p->tls_key);
    GT_REQUIRE_GOTO((!p->tls_ca || !*p->tls_ca || m->tls_ca) &&
                        (!p->tls_cert || !*p->tls_cert || m->tls_cert) &&
                        (!p->tls_key || !*p->tls_key || m->tls_key),
                    st, GT_ERR_NOMEM, fail, "membership: out of memory");
    snprintf(m->site, sizeof m->site, "%s", p->site);
    snprintf(m->address, sizeof m->address, "%s", p->address ? p->address : "");
    snprintf(m->members_prefix, sizeof m->members_prefix, "%s/%s/members/", p->prefix, p->run_id);
    snprintf(m->member_key, sizeof m->member_key, "%s%s", m->members_prefix, p->site);
    snprintf(m->view_key, sizeof m->view_key, "%s/%s/view", p->prefix, p->run_id);
    snprintf(m->started_key, sizeof m->started_key, "%s/%s/started", p->prefix, p->run_id);
    snprintf(m->suspects_prefix, sizeof m->suspects_prefix, "%s/%s/suspects/", p->prefix,
             p->run_id);
    snprintf(m->retired_prefix, sizeof m->retired_prefix, "%s/%s/retired/", p->prefix, p->run_id);
    snprintf(m->added_prefix, sizeof m->added_prefix, "%s/%s/added/", p->prefix, p->run_id);
    snprintf(m->slots_prefix, sizeof m->slots_prefix, "%s/%s/slots/", p->prefix, p->run_id);
    snprintf(m->pinned_prefix, sizeof m->pinned_prefix, "%s/%s/pinned/", p->prefix, p->run_id);
    m->ttl_s = p->lease_ttl_s;
    m->heartbeat_ms = p->heartbeat_ms;
    m->timeout_ms = p->request_timeout_ms ? p->request_timeout_ms : 2000;
    m->api = curl_easy_init();
    GT_REQUIRE_GOTO(m->api, st, GT_ERR_NOMEM, fail, "membership: curl_easy_init failed");
    *m_p = m;
    return GT_OK;
fail:
    gt_wan_member_destroy(m);
    return st;
}

gt_status_t gt_wan_member_create(const gt_wan_member_params_t *p, gt_wan_member_t **member_p)
{
    gt_status_t st = GT_OK;
    json_t *req = NULL, *reply = NULL, *value = NULL;
    char *value_text = NULL;
    if (!p || !p->n_endpoints || !p->site || !p->site[0] || !p->prefix || p->prefix[0] != '/' ||
        !p->run_id || p->lease_ttl_s == 0 || p->heartbeat_ms == 0 ||
        p->heartbeat_ms * 2u > p->lease_ttl_s * 1000u) {
        GT_ERROR("membership: invalid parameters (endpoints, site, prefix, and a heartbeat of at "
                 "most half the lease TTL are required)");
        return GT_ERR_INVALID;
    }
    gt_wan_member_t *m = NULL;
    if ((st = member_new(p, &m)) != GT_OK) return st;

    /* Lease. A member key put with a lease a follower has not applied yet (or that ran out
     * meanwhile on a loaded machine) is refused "requested lease not found": a fresh lease is
     * asked for, a few times, before that counts as an error. */
    int attempts = 0;
again:
    req = json_pack("{s:I}", "TTL", (json_int_t)p->lease_ttl_s);
    st = post(m, m->api, "/v3/lease/grant", req, &reply);
    json_decref(req);
    req = NULL;
    if (st != GT_OK) {
        GT_ERROR("membership: no etcd endpoint answered (first: %s): %s%s%s%s", m->endpoints[0],
                 gt_status_str(st), m->api_error[0] ? " (" : "", m->api_error,
                 m->api_error[0] ? (strncmp(m->api_error, "https", 5) == 0
                                        ? "; with TLS, check membership.tls: ca, cert, key)"
                                        : ")")
                                 : "");
        goto fail;
    }
    m->lease = get_i64(reply, "ID");
    json_decref(reply);
    reply = NULL;
    GT_REQUIRE_GOTO(m->lease != 0, st, GT_ERR_IO, fail, "membership: etcd granted no lease");

    /* Member key, created only if absent: two live sites cannot share a name. */
    value = member_value(m, p->note);
    value_text = value ? json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    GT_REQUIRE_GOTO(value && value_text, st, GT_ERR_NOMEM, fail, "membership: out of memory");
    req = json_pack("{s:[{s:s,s:o,s:s}],s:[{s:{s:o,s:o,s:o}}],s:[{s:{s:o}}]}", "compare", "target",
                    "CREATE", "key", b64(m->member_key, strlen(m->member_key)), "create_revision",
                    "0", "success", "request_put", "key", b64(m->member_key, strlen(m->member_key)),
                    "value", b64(value_text, strlen(value_text)), "lease", i64_string(m->lease),
                    "failure", "request_range", "key", b64(m->member_key, strlen(m->member_key)));
    GT_REQUIRE_GOTO(req, st, GT_ERR_NOMEM, fail, "membership: out of memory");
    int took_over = 0;
put:
    st = post(m, m->api, "/v3/kv/txn", req, &reply);
    if (st == GT_ERR_IO && ++attempts < 5) {
        json_decref(req);
        json_decref(value);
        free(value_text);
        req = value = NULL;
        value_text = NULL;
        GT_WARN("membership: site %s: etcd refused the member key's lease; asking for a new one",
                m->site);
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
        goto again;
    }
    if (st != GT_OK) goto fail;
    if (!json_is_true(json_object_get(reply, "succeeded")) && p->replace_gone && !took_over &&
        take_over_gone(m, reply)) {
        took_over = 1;
        json_decref(reply);
        reply = NULL;
        goto put;
    }
    if (!json_is_true(json_object_get(reply, "succeeded"))) {
        GT_ERROR("membership: a live site named '%s' is already registered under %s", m->site,
                 m->member_key);
        st = GT_ERR_EXISTS;
        goto fail;
    }
    if (pthread_create(&m->hb_thread, NULL, heartbeat_main, m) != 0) {
        GT_ERROR("membership: cannot start the heartbeat thread");
        st = GT_ERR_INTERNAL;
        goto fail;
    }
    m->hb_running = 1;
    m->hb_started = 1;
    GT_INFO("membership: site %s registered (lease %lld, TTL %u s)", m->site, (long long)m->lease,
            m->ttl_s);
    json_decref(req);
    json_decref(reply);
    json_decref(value);
    free(value_text);
    *member_p = m;
    return GT_OK;
fail:
    json_decref(req);
    json_decref(reply);
    json_decref(value);
    free(value_text);
    gt_wan_member_destroy(m);
    return st;
}

/* A client of the run's keys that does not register (clear_run, retire, sites): params' etcd,
 * prefix and run id; `site` names the member key it may touch (NULL: none). */
static gt_status_t run_client(const gt_wan_member_params_t *p, const char *site,
                              gt_wan_member_t **m_p)
{
    if (!p || !p->n_endpoints || !p->prefix || p->prefix[0] != '/' || !p->run_id)
        return GT_ERR_INVALID;
    gt_wan_member_params_t q = *p;
    q.site = site ? site : "-"; /* "-": the member key is not used */
    return member_new(&q, m_p);
}

gt_status_t gt_wan_member_clear_run(const gt_wan_member_params_t *p, int *cleared_p)
{
    if (!cleared_p) return GT_ERR_INVALID;
    gt_wan_member_t *m = NULL;
    gt_status_t st = run_client(p, NULL, &m);
    if (st != GT_OK) return st;
    json_t *reply = NULL;
    int registered = 1, started = 0;
    st = api_call(m, "/v3/kv/range",
                  json_pack("{s:o,s:o,s:b}", "key",
                            b64(m->members_prefix, strlen(m->members_prefix)), "range_end",
                            prefix_end(m->members_prefix), "count_only", 1),
                  &reply);
    if (st == GT_OK) registered = get_i64(reply, "count") > 0;
    json_decref(reply);
    reply = NULL;
    if (st == GT_OK && !registered) st = gt_wan_member_started(m, &started);
    /* Nobody registered: what is left is a finished or abandoned run's (the sites of a new run
     * under this id delete before they register, and mark it started only once all have). */
    const char *keys[7] = {m->started_key,  m->view_key,     m->suspects_prefix, m->retired_prefix,
                           m->added_prefix, m->slots_prefix, m->pinned_prefix};
    for (int i = 0; st == GT_OK && !registered && started && i < 7; i++) {
        const char *k = keys[i];
        json_t *req = json_pack("{s:o}", "key", b64(k, strlen(k)));
        if (req && i >= 2) json_object_set_new(req, "range_end", prefix_end(k));
        st = api_call(m, "/v3/kv/deleterange", req, &reply);
        json_decref(reply);
        reply = NULL;
    }
    gt_wan_member_destroy(m);
    if (st != GT_OK) return st;
    *cleared_p = !registered && started;
    return registered ? GT_ERR_EXISTS : GT_OK;
}

gt_status_t gt_wan_run_retire(const gt_wan_member_params_t *p, const char *name, int *was_live_p)
{
    if (!name || !*name || strchr(name, '/') || !was_live_p) return GT_ERR_INVALID;
    gt_wan_member_t *m = NULL;
    gt_status_t st = run_client(p, name, &m);
    if (st != GT_OK) return st;
    *was_live_p = 0;
    char key[1024];
    int n = snprintf(key, sizeof key, "%s%s", m->retired_prefix, name);
    json_t *reply = NULL;
    if (n <= 0 || (size_t)n >= sizeof key) st = GT_ERR_INVALID;
    /* the mark first: a site that sees its lease go looks for it (no lease: it stays) */
    if (st == GT_OK) {
        char val[64];
        snprintf(val, sizeof val, "{\"retired_unix\":%.3f}", gt_unix_time());
        st = api_call(
            m, "/v3/kv/put",
            json_pack("{s:o,s:o}", "key", b64(key, strlen(key)), "value", b64(val, strlen(val))),
            &reply);
        json_decref(reply);
        reply = NULL;
    }
    /* then its member key, if it is registered: deleted with its lease revoked, as an eviction */
    int64_t lease = 0;
    if (st == GT_OK) {
        st = api_call(m, "/v3/kv/range",
                      json_pack("{s:o}", "key", b64(m->member_key, strlen(m->member_key))), &reply);
        json_t *kv = st == GT_OK ? json_array_get(json_object_get(reply, "kvs"), 0) : NULL;
        if (kv) lease = get_i64(kv, "lease");
        json_decref(reply);
        reply = NULL;
    }
    if (st == GT_OK && lease) {
        json_t *req = json_pack("{s:[{s:s,s:o,s:o}],s:[{s:{s:o}}]}", "compare", "target", "LEASE",
                                "key", b64(m->member_key, strlen(m->member_key)), "lease",
                                i64_string(lease), "success", "request_delete_range", "key",
                                b64(m->member_key, strlen(m->member_key)));
        st = api_call(m, "/v3/kv/txn", req, &reply);
        if (st == GT_OK) *was_live_p = json_is_true(json_object_get(reply, "succeeded"));
        json_decref(reply);
        reply = NULL;
        if (st == GT_OK && *was_live_p) {
            st = api_call(m, "/v3/lease/revoke", json_pack("{s:o}", "ID", i64_string(lease)),
                          &reply);
            json_decref(reply);
        }
    }
    gt_wan_member_destroy(m);
    return st;
}

gt_status_t gt_wan_run_sites(const gt_wan_member_params_t *p, gt_wan_view_t *registered_p,
                             char ***retired_p, size_t *n_retired_p)
{
    if (!registered_p || !retired_p || !n_retired_p) return GT_ERR_INVALID;
    *retired_p = NULL;
    *n_retired_p = 0;
    gt_wan_member_t *m = NULL;
    gt_status_t st = run_client(p, NULL, &m);
    if (st != GT_OK) return st;
    st = gt_wan_member_list(m, registered_p);
    json_t *reply = NULL;
    if (st == GT_OK)
        st = api_call(m, "/v3/kv/range",
                      json_pack("{s:o,s:o,s:b}", "key",
                                b64(m->retired_prefix, strlen(m->retired_prefix)), "range_end",
                                prefix_end(m->retired_prefix), "keys_only", 1),
                      &reply);
    json_t *kvs = st == GT_OK ? json_object_get(reply, "kvs") : NULL;
    size_t n = json_array_size(kvs), plen = strlen(m->retired_prefix);
    char **names = n ? calloc(n, sizeof *names) : NULL;
    if (n && !names) st = GT_ERR_NOMEM;
    for (size_t i = 0; st == GT_OK && i < n; i++) {
        size_t klen = 0;
        char *key = unb64(json_object_get(json_array_get(kvs, i), "key"), &klen);
        if (key && klen > plen) names[(*n_retired_p)++] = strdup(key + plen);
        free(key);
    }
    json_decref(reply);
    gt_wan_member_destroy(m);
    *retired_p = names;
    return st;
}

gt_status_t gt_wan_member_retired(gt_wan_member_t *m, int *retired_p)
{
    if (!m || !retired_p) return GT_ERR_INVALID;
    char key[1024];
    int n = snprintf(key, sizeof key, "%s%s", m->retired_prefix, m->site);
    if (n <= 0 || (size_t)n >= sizeof key) return GT_ERR_INVALID;
    json_t *reply = NULL;
    gt_status_t st =
        api_call(m, "/v3/kv/range",
                 json_pack("{s:o,s:b}", "key", b64(key, strlen(key)), "count_only", 1), &reply);
    if (st == GT_OK) *retired_p = get_i64(reply, "count") > 0;
    json_decref(reply);
    return st;
}

/* ---- sites added mid-run (`geotrain sites add`) ---- */

gt_status_t gt_wan_run_add(const gt_wan_member_params_t *p, const char *name, uint32_t slot,
                           const char *value)
{
    if (!name || !*name || strchr(name, '/') || !value) return GT_ERR_INVALID;
    gt_wan_member_t *m = NULL;
    gt_status_t st = run_client(p, NULL, &m);
    if (st != GT_OK) return st;
    char key[1024], skey[1024];
    int n = snprintf(key, sizeof key, "%s%s", m->added_prefix, name);
    int k = snprintf(skey, sizeof skey, "%s%u", m->slots_prefix, (unsigned)slot);
    json_t *reply = NULL;
    if (n <= 0 || (size_t)n >= sizeof key || k <= 0 || (size_t)k >= sizeof skey) {
        st = GT_ERR_INVALID;
    } else {
        /* Both keys or neither, and only when neither exists: two operators adding at once
         * cannot give one slot (or one name) twice. */
        json_t *req = json_pack(
            "{s:[{s:s,s:s,s:o,s:o},{s:s,s:s,s:o,s:o}],s:[{s:{s:o,s:o}},{s:{s:o,s:o}}]}", "compare",
            "target", "CREATE", "result", "EQUAL", "key", b64(key, strlen(key)), "create_revision",
            i64_string(0), "target", "CREATE", "result", "EQUAL", "key", b64(skey, strlen(skey)),
            "create_revision", i64_string(0), "success", "request_put", "key",
            b64(key, strlen(key)), "value", b64(value, strlen(value)), "request_put", "key",
            b64(skey, strlen(skey)), "value", b64(name, strlen(name)));
        st = api_call(m, "/v3/kv/txn", req, &reply);
        if (st == GT_OK && !json_is_true(json_object_get(reply, "succeeded"))) st = GT_ERR_EXISTS;
        json_decref(reply);
    }
    gt_wan_member_destroy(m);
    return st;
}

/* The values under `prefix` as a JSON array (malformed base64 left out): of strings, or with
 * `objects` of the JSON objects they hold (any other value logged and left out). */
static gt_status_t range_values(gt_wan_member_t *m, const char *prefix, int objects, char **json_p)
{
    json_t *reply = NULL;
    gt_status_t st = api_call(
        m, "/v3/kv/range",
        json_pack("{s:o,s:o}", "key", b64(prefix, strlen(prefix)), "range_end", prefix_end(prefix)),
        &reply);
    if (st != GT_OK) return st;
    json_t *out = json_array();
    size_t i;
    json_t *kv;
    json_array_foreach(json_object_get(reply, "kvs"), i, kv)
    {
        char *val = unb64(json_object_get(kv, "value"), NULL);
        json_t *j = !val ? NULL : objects ? json_loads(val, 0, NULL) : json_string(val);
        if (j && (!objects || json_is_object(j)))
            json_array_append(out, j);
        else if (objects)
            GT_WARN("membership: ignoring a malformed entry under %s", prefix);
        json_decref(j);
        free(val);
    }
    json_decref(reply);
    char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    if (!text) return GT_ERR_NOMEM;
    *json_p = text;
    return GT_OK;
}

gt_status_t gt_wan_member_added(gt_wan_member_t *m, char **json_p)
{
    if (!m || !json_p) return GT_ERR_INVALID;
    return range_values(m, m->added_prefix, 0, json_p);
}

gt_status_t gt_wan_run_added(const gt_wan_member_params_t *p, char **json_p)
{
    if (!json_p) return GT_ERR_INVALID;
    gt_wan_member_t *m = NULL;
    gt_status_t st = run_client(p, NULL, &m);
    if (st == GT_OK) st = range_values(m, m->added_prefix, 0, json_p);
    gt_wan_member_destroy(m);
    return st;
}

gt_status_t gt_wan_run_values(const gt_wan_member_params_t *p, char **json_p)
{
    if (!json_p) return GT_ERR_INVALID;
    gt_wan_member_t *m = NULL;
    gt_status_t st = run_client(p, NULL, &m);
    if (st == GT_OK) st = gt_wan_member_values(m, json_p);
    gt_wan_member_destroy(m);
    return st;
}

gt_status_t gt_wan_member_ack_added(gt_wan_member_t *m, const char *name)
{
    if (!m || !name || !*name || strchr(name, '/')) return GT_ERR_INVALID;
    char key[1024];
    int n = snprintf(key, sizeof key, "%s%s/%s", m->pinned_prefix, name, m->site);
    if (n <= 0 || (size_t)n >= sizeof key) return GT_ERR_INVALID;
    json_t *req = json_pack("{s:o,s:o}", "key", b64(key, strlen(key)), "value",
                            b64(m->site, strlen(m->site)));
    if (req && m->lease) json_object_set_new(req, "lease", i64_string(m->lease));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/put", req, &reply);
    json_decref(reply);
    return st;
}

gt_status_t gt_wan_run_pinned(const gt_wan_member_params_t *p, const char *name, char **json_p)
{
    if (!name || !*name || strchr(name, '/') || !json_p) return GT_ERR_INVALID;
    gt_wan_member_t *m = NULL;
    gt_status_t st = run_client(p, NULL, &m);
    if (st != GT_OK) return st;
    char prefix[1024];
    int n = snprintf(prefix, sizeof prefix, "%s%s/", m->pinned_prefix, name);
    st = n <= 0 || (size_t)n >= sizeof prefix ? GT_ERR_INVALID : range_values(m, prefix, 0, json_p);
    gt_wan_member_destroy(m);
    return st;
}

static void revoke_lease(gt_wan_member_t *m)
{
    if (!m->lease || !m->api) return;
    json_t *req = json_pack("{s:o}", "ID", i64_string(m->lease)), *reply = NULL;
    pthread_mutex_lock(&m->api_lock);
    if (post(m, m->api, "/v3/lease/revoke", req, &reply) == GT_OK && m->hb_started)
        GT_INFO("membership: site %s left (lease revoked)", m->site);
    pthread_mutex_unlock(&m->api_lock);
    json_decref(req);
    json_decref(reply);
    m->lease = 0;
}

void gt_wan_member_abandon(gt_wan_member_t *m)
{
    if (!m) return;
    stop_heartbeat(m);
    m->lease = 0; /* never revoked: the TTL removes it, as after a crash */
}

void gt_wan_member_destroy(gt_wan_member_t *m)
{
    if (!m) return;
    stop_heartbeat(m);
    if (!m->lost) revoke_lease(m); /* a lost lease is already gone */
    if (m->api) curl_easy_cleanup(m->api);
    for (size_t i = 0; i < m->n_endpoints; i++) free(m->endpoints[i]);
    free(m->endpoints);
    free(m->tls_ca);
    free(m->tls_cert);
    free(m->tls_key);
    pthread_mutex_destroy(&m->api_lock);
    pthread_mutex_destroy(&m->hb_lock);
    pthread_cond_destroy(&m->hb_cond);
    free(m);
}

gt_status_t gt_wan_member_health(const gt_wan_member_t *m)
{
    return m->lost ? GT_ERR_PEER_LOST : GT_OK;
}

uint64_t gt_wan_member_heartbeats(const gt_wan_member_t *m)
{
    return m ? __atomic_load_n(&m->hb_count, __ATOMIC_SEQ_CST) : 0;
}

uint64_t gt_wan_member_answers(const gt_wan_member_t *m)
{
    return m ? __atomic_load_n(&m->hb_answer, __ATOMIC_SEQ_CST) : 0;
}

int gt_wan_member_frozen(const gt_wan_member_t *m)
{
    return m && m->frozen && !m->lost;
}

/* ---- members and views ---- */

static int cmp_member(const void *a, const void *b)
{
    return strcmp(((const gt_wan_member_info_t *)a)->name, ((const gt_wan_member_info_t *)b)->name);
}

/* Fills `info` from a member value {name, address, lease[, first_round]}. */
static int parse_member(const char *text, gt_wan_member_info_t *info)
{
    json_t *j = json_loads(text, 0, NULL);
    const char *name = json_string_value(json_object_get(j, "name"));
    const char *addr = json_string_value(json_object_get(j, "address"));
    int ok =
        name && addr && strlen(name) < sizeof info->name && strlen(addr) < sizeof info->address;
    if (ok) {
        snprintf(info->name, sizeof info->name, "%s", name);
        snprintf(info->address, sizeof info->address, "%s", addr);
        json_t *lease = json_object_get(j, "lease");
        info->lease = json_is_integer(lease) ? (int64_t)json_integer_value(lease) : 0;
        json_t *first = json_object_get(j, "first_round");
        info->first_round = json_is_integer(first) && json_integer_value(first) > 0
                                ? (uint64_t)json_integer_value(first)
                                : 0;
    }
    json_decref(j);
    return ok;
}

gt_status_t gt_wan_member_list(gt_wan_member_t *m, gt_wan_view_t *live_p)
{
    json_t *req = json_pack("{s:o,s:o}", "key", b64(m->members_prefix, strlen(m->members_prefix)),
                            "range_end", prefix_end(m->members_prefix));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/range", req, &reply);
    if (st != GT_OK) return st;
    gt_wan_view_t live;
    memset(&live, 0, sizeof live);
    json_t *kvs = json_object_get(reply, "kvs");
    size_t i;
    json_t *kv;
    json_array_foreach(kvs, i, kv)
    {
        char *val = unb64(json_object_get(kv, "value"), NULL);
        if (val && live.n_members < GT_WAN_MAX_MEMBERS &&
            parse_member(val, &live.members[live.n_members]))
            live.n_members++;
        else
            GT_WARN("membership: ignoring a malformed member entry");
        free(val);
    }
    json_decref(reply);
    qsort(live.members, live.n_members, sizeof live.members[0], cmp_member);
    *live_p = live;
    return GT_OK;
}

gt_status_t gt_wan_member_view(gt_wan_member_t *m, gt_wan_view_t *view_p)
{
    json_t *req = json_pack("{s:o}", "key", b64(m->view_key, strlen(m->view_key)));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/range", req, &reply);
    if (st != GT_OK) return st;
    gt_wan_view_t view;
    memset(&view, 0, sizeof view);
    json_t *kv = json_array_get(json_object_get(reply, "kvs"), 0);
    m->view_revision = 0;
    if (kv) {
        char *text = unb64(json_object_get(kv, "value"), NULL);
        json_t *j = text ? json_loads(text, 0, NULL) : NULL;
        json_t *arr = json_object_get(j, "members");
        view.epoch = (uint64_t)get_i64(j, "epoch");
        size_t i;
        json_t *item;
        st = j && view.epoch > 0 ? GT_OK : GT_ERR_CORRUPT;
        json_array_foreach(arr, i, item)
        {
            char *mt = json_dumps(item, JSON_COMPACT);
            if (!mt || view.n_members == GT_WAN_MAX_MEMBERS ||
                !parse_member(mt, &view.members[view.n_members]))
                st = GT_ERR_CORRUPT;
            else
                view.n_members++;
            free(mt);
        }
        m->view_revision = get_i64(kv, "mod_revision");
        json_decref(j);
        free(text);
        if (st != GT_OK) GT_ERROR("membership: the view at %s is malformed", m->view_key);
    }
    json_decref(reply);
    if (st == GT_OK) *view_p = view;
    return st;
}

int64_t gt_wan_member_view_revision(const gt_wan_member_t *m)
{
    return m->view_revision;
}

gt_status_t gt_wan_member_propose(gt_wan_member_t *m, const gt_wan_view_t *next,
                                  int64_t expected_revision)
{
    json_t *members = json_array();
    for (uint32_t i = 0; i < next->n_members; i++)
        json_array_append_new(members, json_pack("{s:s,s:s,s:I}", "name", next->members[i].name,
                                                 "address", next->members[i].address, "lease",
                                                 (json_int_t)next->members[i].lease));
    json_t *value = json_pack("{s:I,s:o}", "epoch", (json_int_t)next->epoch, "members", members);
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(value);
    if (!text) return GT_ERR_NOMEM;
    /* No view yet: the key must not exist; else its mod_revision must be unchanged. */
    json_t *cmp = expected_revision == 0
                      ? json_pack("{s:s,s:o,s:s}", "target", "CREATE", "key",
                                  b64(m->view_key, strlen(m->view_key)), "create_revision", "0")
                      : json_pack("{s:s,s:o,s:o}", "target", "MOD", "key",
                                  b64(m->view_key, strlen(m->view_key)), "mod_revision",
                                  i64_string(expected_revision));
    json_t *req =
        json_pack("{s:[o],s:[{s:{s:o,s:o}}]}", "compare", cmp, "success", "request_put", "key",
                  b64(m->view_key, strlen(m->view_key)), "value", b64(text, strlen(text)));
    free(text);
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/txn", req, &reply);
    if (st != GT_OK) return st;
    int won = json_is_true(json_object_get(reply, "succeeded"));
    json_decref(reply);
    if (won)
        GT_INFO("membership: %s moved the view to epoch %llu (%u sites)", m->site,
                (unsigned long long)next->epoch, next->n_members);
    return won ? GT_OK : GT_ERR_AGAIN;
}

static int same_members(const gt_wan_view_t *a, const gt_wan_view_t *b)
{
    if (a->n_members != b->n_members) return 0;
    for (uint32_t i = 0; i < a->n_members; i++)
        if (strcmp(a->members[i].name, b->members[i].name) != 0 ||
            strcmp(a->members[i].address, b->members[i].address) != 0 ||
            a->members[i].lease != b->members[i].lease)
            return 0;
    return 1;
}

gt_status_t gt_wan_member_sync_view(gt_wan_member_t *m, gt_wan_view_t *view_p, int *changed_p)
{
    gt_wan_view_t view, live;
    gt_status_t st;
    uint64_t first_epoch = 0;
    for (int attempt = 0; attempt < 8; attempt++) {
        if ((st = gt_wan_member_view(m, &view)) != GT_OK) return st;
        if (attempt == 0) first_epoch = view.epoch;
        if ((st = gt_wan_member_list(m, &live)) != GT_OK) return st;
        if (view.epoch > 0 && same_members(&view, &live)) break;
        live.epoch = view.epoch + 1;
        st = gt_wan_member_propose(m, &live, m->view_revision);
        if (st == GT_OK) {
            view = live;
            break;
        }
        if (st != GT_ERR_AGAIN) return st;
        /* Another site moved the view first: read it again and compare. */
    }
    /* The view was written when its members registered; a joiner's first round comes later,
     * in its member value: take it from the live entry of the same incarnation. */
    for (uint32_t i = 0; i < view.n_members; i++) {
        view.members[i].first_round = 0;
        for (uint32_t k = 0; k < live.n_members; k++)
            if (strcmp(view.members[i].name, live.members[k].name) == 0 &&
                view.members[i].lease == live.members[k].lease)
                view.members[i].first_round = live.members[k].first_round;
    }
    *view_p = view;
    if (changed_p) *changed_p = view.epoch != first_epoch;
    return GT_OK;
}

gt_status_t gt_wan_member_mark_started(gt_wan_member_t *m)
{
    json_t *req = json_pack("{s:o,s:o}", "key", b64(m->started_key, strlen(m->started_key)),
                            "value", b64(m->site, strlen(m->site)));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/put", req, &reply);
    json_decref(reply);
    return st;
}

gt_status_t gt_wan_member_started(gt_wan_member_t *m, int *started_p)
{
    json_t *req = json_pack("{s:o}", "key", b64(m->started_key, strlen(m->started_key)));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/range", req, &reply);
    if (st == GT_OK) *started_p = json_array_size(json_object_get(reply, "kvs")) > 0;
    json_decref(reply);
    return st;
}

gt_status_t gt_wan_member_run_live(gt_wan_member_t *m, int *live_p)
{
    json_t *reply = NULL;
    gt_status_t st =
        api_call(m, "/v3/kv/range",
                 json_pack("{s:o}", "key", b64(m->started_key, strlen(m->started_key))), &reply);
    if (st != GT_OK) return st;
    json_t *kv = json_array_get(json_object_get(reply, "kvs"), 0);
    int64_t mark = kv ? get_i64(kv, "mod_revision") : 0;
    json_decref(reply);
    reply = NULL;
    int live = 0;
    if (mark) {
        st = api_call(m, "/v3/kv/range",
                      json_pack("{s:o,s:o,s:b}", "key",
                                b64(m->members_prefix, strlen(m->members_prefix)), "range_end",
                                prefix_end(m->members_prefix), "keys_only", 1),
                      &reply);
        if (st != GT_OK) return st;
        size_t i;
        json_t *k;
        json_array_foreach(json_object_get(reply, "kvs"), i, k)
        {
            size_t n = 0;
            char *key = unb64(json_object_get(k, "key"), &n);
            int self = key && n == strlen(m->member_key) && memcmp(key, m->member_key, n) == 0;
            free(key);
            if (!self && get_i64(k, "create_revision") < mark) live = 1;
        }
        json_decref(reply);
    }
    *live_p = live;
    return GT_OK;
}

gt_status_t gt_wan_member_values(gt_wan_member_t *m, char **json_p)
{
    return range_values(m, m->members_prefix, 1, json_p);
}

gt_status_t gt_wan_member_set_note(gt_wan_member_t *m, const char *note)
{
    json_t *value = member_value(m, note);
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(value);
    if (!text) return note ? GT_ERR_INVALID : GT_ERR_NOMEM;
    json_t *req = json_pack("{s:o,s:o,s:o}", "key", b64(m->member_key, strlen(m->member_key)),
                            "value", b64(text, strlen(text)), "lease", i64_string(m->lease));
    free(text);
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/put", req, &reply);
    json_decref(reply);
    return st;
}

/* ---- eviction by the majority ---- */

/* PREFIX/RUN/suspects/TARGET/ (accuser empty) or PREFIX/RUN/suspects/TARGET/ACCUSER; 0 when a
 * name does not fit or contains '/'. */
static int suspect_key(const gt_wan_member_t *m, const char *target, const char *accuser, char *key,
                       size_t cap)
{
    if (!target[0] || strchr(target, '/') || strchr(accuser, '/')) return 0;
    int n = snprintf(key, cap, "%s%s/%s", m->suspects_prefix, target, accuser);
    return n > 0 && (size_t)n < cap;
}

gt_status_t gt_wan_member_accuse(gt_wan_member_t *m, const char *target, int64_t target_lease)
{
    char key[1024], val[32];
    if (!m || !target || !suspect_key(m, target, m->site, key, sizeof key)) return GT_ERR_INVALID;
    snprintf(val, sizeof val, "%lld", (long long)target_lease);
    json_t *req = json_pack("{s:o,s:o,s:o}", "key", b64(key, strlen(key)), "value",
                            b64(val, strlen(val)), "lease", i64_string(m->lease));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/put", req, &reply);
    json_decref(reply);
    return st;
}

gt_status_t gt_wan_member_withdraw(gt_wan_member_t *m, const char *target)
{
    char key[1024];
    if (!m || !target || !suspect_key(m, target, m->site, key, sizeof key)) return GT_ERR_INVALID;
    json_t *req = json_pack("{s:o}", "key", b64(key, strlen(key)));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/deleterange", req, &reply);
    json_decref(reply);
    return st;
}

gt_status_t gt_wan_member_accusers(gt_wan_member_t *m, const char *target, int64_t target_lease,
                                   gt_wan_view_t *accusers_p)
{
    char prefix[1024];
    if (!m || !target || !accusers_p || !suspect_key(m, target, "", prefix, sizeof prefix))
        return GT_ERR_INVALID;
    json_t *req =
        json_pack("{s:o,s:o}", "key", b64(prefix, strlen(prefix)), "range_end", prefix_end(prefix));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/range", req, &reply);
    if (st != GT_OK) return st;
    memset(accusers_p, 0, sizeof *accusers_p);
    size_t i, plen = strlen(prefix);
    json_t *kv;
    json_array_foreach(json_object_get(reply, "kvs"), i, kv)
    {
        size_t klen = 0;
        char *k = unb64(json_object_get(kv, "key"), &klen);
        char *v = unb64(json_object_get(kv, "value"), NULL);
        /* an accusation of another incarnation (a lease before a restart) does not count */
        if (k && v && klen > plen && klen - plen < GT_WAN_MEMBER_NAME_MAX &&
            strtoll(v, NULL, 10) == target_lease && accusers_p->n_members < GT_WAN_MAX_MEMBERS)
            snprintf(accusers_p->members[accusers_p->n_members++].name, GT_WAN_MEMBER_NAME_MAX,
                     "%s", k + plen);
        free(k);
        free(v);
    }
    json_decref(reply);
    qsort(accusers_p->members, accusers_p->n_members, sizeof accusers_p->members[0], cmp_member);
    return GT_OK;
}

gt_status_t gt_wan_member_evict(gt_wan_member_t *m, const char *target, int64_t target_lease)
{
    char key[1024];
    if (!m || !target || !target[0] || strchr(target, '/') || target_lease == 0)
        return GT_ERR_INVALID;
    int n = snprintf(key, sizeof key, "%s%s", m->members_prefix, target);
    if (n <= 0 || (size_t)n >= sizeof key) return GT_ERR_INVALID;
    /* Deletes the member key only while it is still held by that lease (a restarted target
     * holds another one, and two accusers may evict at once), then revokes the lease: the target
     * hears it at its next keep-alive. */
    json_t *req = json_pack("{s:[{s:s,s:o,s:o}],s:[{s:{s:o}}]}", "compare", "target", "LEASE",
                            "key", b64(key, strlen(key)), "lease", i64_string(target_lease),
                            "success", "request_delete_range", "key", b64(key, strlen(key)));
    json_t *reply = NULL;
    gt_status_t st = api_call(m, "/v3/kv/txn", req, &reply);
    if (st != GT_OK) return st;
    int won = json_is_true(json_object_get(reply, "succeeded"));
    json_decref(reply);
    if (!won) return GT_ERR_NOT_FOUND;
    req = json_pack("{s:o}", "ID", i64_string(target_lease));
    reply = NULL;
    st = api_call(m, "/v3/lease/revoke", req, &reply);
    json_decref(reply);
    GT_WARN("membership: %s evicted site %s (lease %lld): its member key deleted, its lease %s",
            m->site, target, (long long)target_lease,
            st == GT_OK ? "revoked" : "not revoked (it runs out)");
    return GT_OK;
}
