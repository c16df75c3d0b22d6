/* HTTP on libmicrohttpd (GNU, in Debian, C: it parses HTTP and writes chunked responses, so tcq
 * parses no HTTP itself).  A thread per connection: a handler may block, which keeps a request's
 * life in one place, waiting on its job for text and writing it as it comes.  A stream whose
 * client went away fails its next write; libmicrohttpd then frees the response, which cancels
 * the job, and the scheduler frees the slot at its next step. */
#include "serve.h"
#include "cli.h"
#include "core/internal.h"   /* tcq_fail, TCQ_TRY, TCQ_MIN */

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

struct srv_http {
    struct MHD_Daemon *d;
    srv_config cfg;
    const tcq_tokenizer *tok;
    srv_sched *sched;
    int ctx;
    atomic_int ready;
    atomic_ullong next_id;
    pthread_mutex_t log_mu;
};

typedef struct conn {
    double t_arrive;   /* cli_now() at the request's first call */
    double c_arrive;   /* srv_cpu_now() then */
    char *body;
    size_t len, cap;
    int too_big;
} conn;

/* ---- responses ----------------------------------------------------------------------------- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type, char *text)
{
    if (!text) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return send_text(c, status, "application/json", s);
}

/* OpenAI's error shape */
static json_t *error_json(const char *msg, const char *type, const char *param, const char *code)
{
    return json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", msg, "type", type, "param",
                     param && *param ? param : NULL, "code", code);
}

static enum MHD_Result send_error(srv_http *h, struct MHD_Connection *c, const char *method, const char *url,
                                  unsigned status, const char *msg, const char *param, const char *code)
{
    const char *type = status == 401 ? "authentication_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    if (h->cfg.verbose) {
        pthread_mutex_lock(&h->log_mu);
        fprintf(stderr, "%s %s -> %u: %s\n", method, url, status, msg);
        pthread_mutex_unlock(&h->log_mu);
    }
    return send_json(c, status, error_json(msg, type, param, code));
}

/* JSON string of n bytes; bytes that are not UTF-8 (never expected: the detokenizer gives whole
 * characters) become '?' rather than failing the response */
static json_t *jstr(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    if (v) return v;
    char *t = malloc(n + 1);
    if (!t) return NULL;
    for (size_t i = 0; i < n; i++) t[i] = (unsigned char)s[i] < 0x80 && s[i] ? s[i] : '?';
    v = json_stringn(t, n);
    free(t);
    return v;
}

/* the end of the longest prefix of s[0, n) made of whole UTF-8 characters */
static size_t utf8_whole(const char *s, size_t n)
{
    size_t i = n;
    for (int back = 0; back < 4 && i > 0; back++) {
        unsigned char b = (unsigned char)s[i - 1];
        if (b < 0x80) return n;
        if (b >= 0xC0) {   /* a lead byte: is its sequence complete? */
            size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
            return n - (i - 1) >= need ? n : i - 1;
        }
        i--;
    }
    return n;
}

static json_t *usage_json(int n_prompt, int n_gen)
{
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", n_prompt, "completion_tokens", n_gen, "total_tokens",
                     n_prompt + n_gen);
}

/* ---- completions ---------------------------------------------------------------------------- */

typedef struct call {
    srv_http *h;
    srv_job *job;
    srv_kind kind;
    char id[48];
    long long created;
    int include_usage;
    const char *url;
    /* streaming */
    char *buf;
    size_t blen, bpos, bcap;
    size_t sent;
    int phase;                /* 0: role chunk next, 1: content, 2: all written */
} call;

static json_t *chunk_json(const call *k, json_t *delta_or_text, const char *finish)
{
    json_t *choice;
    if (k->kind == SRV_CHAT)
        choice = json_pack("{s:i, s:o, s:s?, s:n}", "index", 0, "delta", delta_or_text, "finish_reason", finish,
                           "logprobs");
    else
        choice = json_pack("{s:i, s:o, s:s?, s:n}", "index", 0, "text", delta_or_text, "finish_reason", finish,
                           "logprobs");
    return json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", k->id, "object",
                     k->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created", k->created,
                     "model", k->h->cfg.alias, "choices", choice);
}

static void sse_add(call *k, json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    const char *body = s ? s : "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    size_t n = strlen(body) + 8;
    if (k->blen + n + 16 > k->bcap) {
        size_t c = k->bcap ? k->bcap : 1024;
        while (c < k->blen + n + 16) c *= 2;
        char *b = realloc(k->buf, c);
        if (!b) {
            free(s);
            return;
        }
        k->buf = b;
        k->bcap = c;
    }
    k->blen += (size_t)sprintf(k->buf + k->blen, "data: %s\n\n", body);
    free(s);
}

static void log_call(const call *k, const char *mode)
{
    if (!k->h->cfg.verbose) return;
    srv_job *j = k->job;
    pthread_mutex_lock(&j->mu);
    pthread_mutex_lock(&k->h->log_mu);
    fprintf(stderr, "POST %s (%s) %s: prompt %d (reused %d), generated %d, %s; first token %.3f s, total %.3f s\n",
            k->url, mode, k->id, j->n_prompt, j->n_reused, j->n_generated,
            j->cancelled ? "client gone" : j->error[0] ? j->error : j->finish_reason ? j->finish_reason : "?",
            j->t_first > 0 ? j->t_first - j->t_submit : 0.0,
            (j->t_done > 0 ? j->t_done : cli_now()) - j->t_submit);
    pthread_mutex_unlock(&k->h->log_mu);
    pthread_mutex_unlock(&j->mu);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    call *k = cls;
    srv_job *j = k->job;
    while (k->bpos == k->blen) {
        k->bpos = k->blen = 0;
        if (k->phase == 2) return MHD_CONTENT_READER_END_OF_STREAM;
        if (k->phase == 0) {
            k->phase = 1;
            sse_add(k, chunk_json(k, k->kind == SRV_CHAT ? json_pack("{s:s, s:s}", "role", "assistant", "content", "")
                                                         : json_string(""),
                                  NULL));
            continue;
        }
        pthread_mutex_lock(&j->mu);
        while (!j->done && utf8_whole(j->text ? j->text : "", j->len) <= k->sent) pthread_cond_wait(&j->cv, &j->mu);
        const int done = j->done;
        const size_t end = done ? j->len : utf8_whole(j->text, j->len);
        json_t *piece = end > k->sent ? jstr(j->text + k->sent, end - k->sent) : NULL;
        k->sent = end;
        const char *finish = j->finish_reason, *err = j->error[0] ? j->error : NULL;
        const int n_prompt = j->n_prompt, n_gen = j->n_generated;
        pthread_mutex_unlock(&j->mu);
        if (piece) sse_add(k, chunk_json(k, k->kind == SRV_CHAT ? json_pack("{s:o}", "content", piece) : piece, NULL));
        if (!done) continue;
        if (err) sse_add(k, error_json(err, "server_error", NULL, NULL));
        else sse_add(k, chunk_json(k, k->kind == SRV_CHAT ? json_object() : json_string(""), finish));
        if (k->include_usage) {   /* after a failure too: the tokens it did generate */
            json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", k->id, "object",
                                  k->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                                  k->created, "model", k->h->cfg.alias, "choices", "usage", usage_json(n_prompt, n_gen));
            sse_add(k, u);
        }
        if (k->blen + 16 <= k->bcap) k->blen += (size_t)sprintf(k->buf + k->blen, "data: [DONE]\n\n");
        k->phase = 2;
    }
    size_t n = k->blen - k->bpos < max ? k->blen - k->bpos : max;
    memcpy(out, k->buf + k->bpos, n);
    k->bpos += n;
    return (ssize_t)n;
}

static void call_free(void *cls)
{
    call *k = cls;
    pthread_mutex_lock(&k->job->mu);
    const int unfinished = !k->job->done;
    pthread_mutex_unlock(&k->job->mu);
    if (unfinished) srv_job_cancel(k->job);   /* the client went away mid-stream */
    log_call(k, "stream");
    srv_job_unref(k->job);
    free(k->buf);
    free(k);
}

/* 1 if the peer closed its end (a non-streaming client that gave up waiting) */
static int peer_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static enum MHD_Result completion(srv_http *h, struct MHD_Connection *c, const char *url, srv_kind kind,
                                  const conn *cs)
{
    char err[512], param[128];
    srv_request rq;
    if (srv_request_parse(cs->body ? cs->body : "", cs->len, kind, &rq, err, sizeof err, param, sizeof param)) {
        srv_request_free(&rq);
        return send_error(h, c, "POST", url, 400, err, param, "invalid_request");
    }
    char *rendered = NULL;
    const char *text = rq.prompt;
    unsigned flags = TCQ_TOK_ADD_SPECIAL;
    tcq_status st = TCQ_OK;
    if (kind == SRV_CHAT) {
        tcq_chat_message *msgs = calloc((size_t)rq.n_msgs, sizeof *msgs);
        if (!msgs) st = tcq_fail(TCQ_ERR_NOMEM, "messages");
        for (int i = 0; msgs && i < rq.n_msgs; i++) msgs[i] = (tcq_chat_message){rq.msgs[i].role, rq.msgs[i].content, NULL};
        tcq_chat_opts co = {.add_generation_prompt = 1, .enable_thinking = rq.enable_thinking};
        if (st == TCQ_OK) st = tcq_tokenizer_apply_chat(h->tok, msgs, (size_t)rq.n_msgs, &co, &rendered);
        free(msgs);
        text = rendered;
        flags = 0;   /* the template writes its own special tokens */
        if (st != TCQ_OK) {
            snprintf(err, sizeof err, "the chat template rejected the messages: %s", tcq_last_error());
            srv_request_free(&rq);
            free(rendered);
            return send_error(h, c, "POST", url, 400, err, "messages", "invalid_request");
        }
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    st = tcq_tokenizer_encode_alloc(h->tok, text, strlen(text), flags, &ids, &n_ids);
    free(rendered);
    if (st == TCQ_OK && n_ids == 0 && tcq_tokenizer_bos(h->tok) >= 0) {
        free(ids);
        ids = malloc(sizeof *ids);
        if (ids) ids[0] = tcq_tokenizer_bos(h->tok), n_ids = 1;
    }
    if (st != TCQ_OK || !ids || n_ids == 0) {
        free(ids);
        srv_request_free(&rq);
        return send_error(h, c, "POST", url, 400, st != TCQ_OK ? tcq_last_error() : "the prompt is empty",
                          kind == SRV_CHAT ? "messages" : "prompt", "invalid_request");
    }
    if ((long long)n_ids >= h->ctx) {
        snprintf(err, sizeof err,
                 "the prompt has %zu tokens, the context %d: it must be shorter than the context (room for a reply)",
                 n_ids, h->ctx);
        free(ids);
        srv_request_free(&rq);
        return send_error(h, c, "POST", url, 400, err, kind == SRV_CHAT ? "messages" : "prompt",
                          "context_length_exceeded");
    }
    srv_job *j = srv_job_create(ids, (int)n_ids);
    free(ids);
    if (!j) {
        srv_request_free(&rq);
        return send_error(h, c, "POST", url, 500, "out of memory", NULL, NULL);
    }
    const int room = h->ctx - (int)n_ids;
    j->max_tokens = rq.max_tokens > 0 && rq.max_tokens < room ? rq.max_tokens : room;
    j->ignore_eos = rq.ignore_eos;
    j->sp = (tcq_sampler_params){(float)rq.temperature, rq.top_k, (float)rq.top_p, (float)rq.min_p, 1.0f, 64, rq.seed};
    for (int i = 0; i < rq.n_stop; i++) {
        j->stop[i] = rq.stop[i];
        rq.stop[i] = NULL;
    }
    j->n_stop = rq.n_stop;
    rq.n_stop = 0;
    const int stream = rq.stream, include_usage = rq.include_usage;
    srv_request_free(&rq);
    j->t_arrive = cs->t_arrive;
    j->c_arrive = cs->c_arrive;
    j->id = (unsigned long long)atomic_fetch_add(&h->next_id, 1);

    call *k = calloc(1, sizeof *k);
    if (!k || srv_sched_submit(h->sched, j)) {
        free(k);
        srv_job_unref(j);
        return send_error(h, c, "POST", url, 503, "the server is shutting down", NULL, NULL);
    }
    k->h = h;
    k->job = j;
    k->kind = kind;
    k->created = (long long)time(NULL);
    k->include_usage = include_usage;
    k->url = kind == SRV_CHAT ? "/v1/chat/completions" : "/v1/completions";
    snprintf(k->id, sizeof k->id, "%s-%llu", kind == SRV_CHAT ? "chatcmpl" : "cmpl", j->id);
    if (stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, k, call_free);
        if (!r) {
            call_free(k);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ok;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->done && !j->cancelled) {
            pthread_mutex_unlock(&j->mu);
            if (peer_gone(c)) srv_job_cancel(j);
            pthread_mutex_lock(&j->mu);
        }
    }
    json_t *res;
    unsigned status = 200;
    if (j->error[0]) {
        status = 500;
        res = error_json(j->error, "server_error", NULL, NULL);
    } else {
        json_t *content = jstr(j->text, j->len);
        json_t *choice = kind == SRV_CHAT
                             ? json_pack("{s:i, s:{s:s, s:o}, s:s, s:n}", "index", 0, "message", "role", "assistant",
                                         "content", content, "finish_reason", j->finish_reason, "logprobs")
                             : json_pack("{s:i, s:o, s:s, s:n}", "index", 0, "text", content, "finish_reason",
                                         j->finish_reason, "logprobs");
        res = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", k->id, "object",
                        kind == SRV_CHAT ? "chat.completion" : "text_completion", "created", k->created, "model",
                        h->cfg.alias, "choices", choice, "usage", usage_json(j->n_prompt, j->n_generated));
    }
    pthread_mutex_unlock(&j->mu);
    log_call(k, "whole");
    srv_job_unref(j);
    free(k);
    return send_json(c, status, res);
}

/* ---- routing -------------------------------------------------------------------------------- */

static int authorized(const srv_http *h, struct MHD_Connection *c)
{
    if (!h->cfg.api_key) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncmp(a, "Bearer ", 7) != 0) return 0;
    /* constant time in the key's length: no early exit on the first wrong byte */
    const char *k = h->cfg.api_key, *g = a + 7;
    size_t nk = strlen(k), ng = strlen(g);
    unsigned diff = (unsigned)(nk != ng);
    for (size_t i = 0; i < nk; i++) diff |= (unsigned)(k[i] ^ (i < ng ? g[i] : 0));
    return diff == 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)version;
    srv_http *h = cls;
    conn *cs = *con_cls;
    if (!cs) {
        cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        cs->t_arrive = cli_now();
        cs->c_arrive = srv_cpu_now();
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->cfg.body_limit) cs->too_big = 1;
        return MHD_YES;
    }
    if (*upload_data_size) {   /* the body arrives in pieces; past the limit it is read and dropped */
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cs->too_big || cs->len + n > h->cfg.body_limit) {
            cs->too_big = 1;
            return MHD_YES;
        }
        if (cs->len + n + 1 > cs->cap) {
            size_t cap = cs->cap ? cs->cap : 4096;
            while (cap < cs->len + n + 1) cap *= 2;
            char *b = realloc(cs->body, cap);
            if (!b) return MHD_NO;
            cs->body = b;
            cs->cap = cap;
        }
        memcpy(cs->body + cs->len, upload_data, n);
        cs->len += n;
        cs->body[cs->len] = 0;
        return MHD_YES;
    }
    const int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    const int is_chat = !strcmp(url, "/v1/chat/completions"), is_cmpl = !strcmp(url, "/v1/completions");
    const int is_models = !strcmp(url, "/v1/models"), is_metrics = !strcmp(url, "/metrics");
    const int is_health = !strcmp(url, "/health"), is_page = !strcmp(url, "/") || !strcmp(url, "/index.html");
    if (!is_chat && !is_cmpl && !is_models && !is_metrics && !is_health && !is_page) {
        char m[256];
        snprintf(m, sizeof m, "no route %.200s", url);
        return send_error(h, c, method, url, 404, m, NULL, "not_found");
    }
    if (((is_chat || is_cmpl) && !post) || (!(is_chat || is_cmpl) && !get)) {
        char m[256];
        snprintf(m, sizeof m, "%s takes %s, not %.16s", url, is_chat || is_cmpl ? "POST" : "GET", method);
        return send_error(h, c, method, url, 405, m, NULL, "method_not_allowed");
    }
    if (is_page) return send_text(c, 200, "text/html; charset=utf-8", strdup(srv_page_html));
    const int ready = atomic_load(&h->ready);
    if (is_health)
        return send_json(c, ready ? 200 : 503,
                         ready ? json_pack("{s:s}", "status", "ok")
                               : json_pack("{s:s, s:{s:s, s:s}}", "status", "loading", "error", "message",
                                           "the model is loading", "type", "unavailable_error"));
    if (!authorized(h, c)) return send_error(h, c, method, url, 401, "wrong or missing API key", NULL, "invalid_api_key");
    if (cs->too_big) {
        char m[128];
        snprintf(m, sizeof m, "the request body is over the limit of %zu bytes", h->cfg.body_limit);
        return send_error(h, c, method, url, 413, m, NULL, "request_too_large");
    }
    if (is_models)
        return send_json(c, 200, json_pack("{s:s, s:[{s:s, s:s, s:I, s:s}]}", "object", "list", "data", "id",
                                           h->cfg.alias, "object", "model", "created", (json_int_t)time(NULL),
                                           "owned_by", "tcq"));
    if (!ready) return send_error(h, c, method, url, 503, "the model is loading", NULL, "unavailable");
    if (is_metrics) {
        srv_stats st;
        srv_sched_stats(h->sched, &st);
        return send_text(c, 200, "text/plain; version=0.0.4", srv_metrics_text(&st));
    }
    return completion(h, c, url, is_chat ? SRV_CHAT : SRV_COMPLETION, cs);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    conn *cs = *con_cls;
    if (!cs) return;
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

tcq_status srv_http_start(const srv_config *cfg, srv_http **out, int *port_out)
{
    *out = NULL;
    srv_http *h = calloc(1, sizeof *h);
    if (!h) return tcq_fail(TCQ_ERR_NOMEM, "serve: http");
    h->cfg = *cfg;
    pthread_mutex_init(&h->log_mu, NULL);
    atomic_init(&h->ready, 0);
    atomic_init(&h->next_id, 1);
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    const char *host = !strcmp(cfg->host, "localhost") ? "127.0.0.1" : cfg->host;
    const struct sockaddr *sa;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)cfg->port);
        sa = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)cfg->port);
        sa = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        free(h);
        return tcq_fail(TCQ_ERR_INVALID_ARG, "serve: --host %s is not an IPv4 or IPv6 address", cfg->host);
    }
    h->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, handler, h, MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, h, MHD_OPTION_CONNECTION_LIMIT, 512u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 600u, MHD_OPTION_END);
    if (!h->d) {
        pthread_mutex_destroy(&h->log_mu);
        free(h);
        return tcq_fail(TCQ_ERR_IO, "serve: cannot listen on %s port %d (in use?)", cfg->host, cfg->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : cfg->port;
    *out = h;
    return TCQ_OK;
}

void srv_http_ready(srv_http *h, const tcq_tokenizer *tok, srv_sched *sched, int ctx)
{
    h->ctx = ctx;   /* read by the handlers only once ready is set (the atomic store orders it) */
    h->tok = tok;
    h->sched = sched;
    atomic_store(&h->ready, 1);
}

void srv_http_stop(srv_http *h)
{
    if (!h) return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->log_mu);
    free(h);
}
