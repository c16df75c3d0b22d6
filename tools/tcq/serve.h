/* tcq serve: an OpenAI-compatible HTTP server with continuous batching.
 *   serve_request.c  JSON body -> srv_request (pure: no I/O, no model; the fuzz target's subject)
 *   serve_sched.c    slots and the one scheduling loop (batched decode, chunked prefill, prefix reuse)
 *   serve_http.c     routes, responses and server-sent events on libmicrohttpd
 *   serve_metrics.c  the Prometheus text of /metrics
 *   serve_page.c     the chat page served at GET /
 *   cmd_serve.c      options, model loading, signals */
#ifndef TCQ_SERVE_H
#define TCQ_SERVE_H

#include "tcq_kernels.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ---- requests ---------------------------------------------------------------------------- */

typedef enum srv_kind { SRV_CHAT = 0, SRV_COMPLETION } srv_kind;

#define SRV_MAX_STOP 8      /* stop strings per request (OpenAI allows 4) */
#define SRV_MAX_MESSAGES 1024

typedef struct srv_message {
    char *role;             /* system, developer (as system), user, assistant, tool */
    char *content;          /* text parts joined; "" for null content */
} srv_message;

typedef struct srv_request {
    srv_kind kind;
    char *model;            /* as sent (NULL if absent); any name is accepted */
    srv_message *msgs;      /* chat */
    int n_msgs;
    char *prompt;           /* completion */
    int stream;
    int include_usage;      /* stream_options.include_usage */
    int max_tokens;         /* -1: up to the context */
    double temperature;     /* OpenAI defaults: 1, top_p 1; top_k and min_p off */
    double top_p, min_p;
    int top_k;
    uint64_t seed;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int enable_thinking;    /* chat_template_kwargs.enable_thinking: -1 absent, 0, 1 */
    int ignore_eos;         /* llama-server's extension: end tokens do not end the reply */
} srv_request;

/* Parse a request body.  Returns 0, or -1 with err (NUL-terminated) saying what is wrong and
 * param the offending field ("messages[1].content", "temperature", ...; "" for the body as a
 * whole).  *out is always safe to pass to srv_request_free. */
int srv_request_parse(const char *body, size_t len, srv_kind kind, srv_request *out, char *err, size_t err_cap,
                      char *param, size_t param_cap);
void srv_request_free(srv_request *r);

/* ---- jobs: one request in flight, shared by its HTTP connection and the scheduler ----------- */

typedef struct srv_job {
    /* inputs, fixed before submission */
    int32_t *prompt;
    int n_prompt;
    int max_tokens;         /* >= 1 */
    int ignore_eos;         /* end tokens do not end it (benchmarks) */
    tcq_sampler_params sp;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    /* output, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *text;             /* everything emitted so far */
    size_t len, cap;
    int n_generated;
    int n_reused;           /* prompt tokens taken from a slot's cache */
    int done;
    const char *finish_reason;   /* "stop", "length" or NULL (error) */
    char error[256];             /* set when the job failed */
    int cancelled;               /* the client went away */
    int refs;
    double t_arrive;        /* the request's first byte in (HTTP); 0 when not from HTTP */
    double c_arrive;        /* the process's CPU seconds then (--trace) */
    double t_submit, t_admit, t_first, t_done;   /* cli_now() */
    unsigned long long id;  /* for --trace lines */
} srv_job;

/* CPU seconds of the whole process, every thread (--trace) */
double srv_cpu_now(void);
/* A job for the given prompt (copied); refs = 1 for the caller. */
srv_job *srv_job_create(const int32_t *prompt, int n_prompt);
void srv_job_unref(srv_job *j);
/* Append text / mark done; both signal the waiting connection.  Called by the scheduler. */
void srv_job_emit(srv_job *j, const char *t, size_t n);
void srv_job_finish(srv_job *j, const char *finish_reason, const char *error);
/* The connection gave up on it: the scheduler frees its slot at the next step. */
void srv_job_cancel(srv_job *j);

/* ---- scheduler --------------------------------------------------------------------------- */

typedef struct srv_sched_opts {
    int n_slots;            /* sessions (parallel requests) */
    int ctx;                /* positions per session */
    tcq_kv_dtype kv;
    int max_batch;          /* rows per batched decode call, 1..TCQ_MAX_BATCH */
    int prefill_chunk;      /* prompt tokens per prefill call; a step prefills about this many */
    int prefill_batch;      /* slots prefilled by one call, 1..max_batch (0: max_batch) */
    int prefill_merge;      /* their rows through the layers together (tcq_model_prefill_batch) */
    int admit_wait_ms;      /* after an idle spell, wait up to this long for the slots to fill */
    size_t cache_bytes;     /* prompt cache: finished requests' caches kept beyond the slots (0: none) */
    int trace;              /* a timing line per scheduler step and per first token on stderr */
} srv_sched_opts;

typedef struct srv_stats {
    uint64_t requests, prompt_tokens, reused_tokens, generated_tokens, cancelled, failed;
    int busy_slots, n_slots, queued;
    double busy_s;          /* seconds with at least one slot busy */
    uint64_t cache_hits;    /* requests that took their prefix from the prompt cache */
    int cache_entries;
    size_t cache_bytes;
    double decode_steps;
} srv_stats;

typedef struct srv_sched srv_sched;
/* tok NULL: no text, only tokens (tcq bench serve); jobs then end by max_tokens or the context. */
tcq_status srv_sched_create(tcq_model *m, const tcq_tokenizer *tok, const srv_sched_opts *o, srv_sched **out);
/* Queue a job (takes a reference).  Returns 0, or -1 once the scheduler is stopping. */
int srv_sched_submit(srv_sched *s, srv_job *j);
void srv_sched_stats(srv_sched *s, srv_stats *st);
/* Stop the loop: jobs still queued or running finish with an error. */
void srv_sched_stop(srv_sched *s);
void srv_sched_free(srv_sched *s);

/* ---- metrics ----------------------------------------------------------------------------- */

/* Prometheus text exposition of st into a malloc'd string. */
char *srv_metrics_text(const srv_stats *st);

/* ---- HTTP -------------------------------------------------------------------------------- */

typedef struct srv_config {
    const char *host;
    int port;               /* 0: any free port */
    const char *api_key;    /* NULL: no auth */
    const char *alias;      /* model id in /v1/models and responses */
    size_t body_limit;      /* bytes */
    int verbose;            /* a line per request on stderr */
} srv_config;

typedef struct srv_http srv_http;
/* Listen; /health answers 503 until srv_http_ready.  *port_out receives the bound port. */
tcq_status srv_http_start(const srv_config *cfg, srv_http **out, int *port_out);
/* The model is loaded: requests are served from now on (tok and sched stay owned by the caller). */
void srv_http_ready(srv_http *h, const tcq_tokenizer *tok, srv_sched *sched, int ctx);
void srv_http_stop(srv_http *h);

/* The chat page (serve_page.c). */
extern const char srv_page_html[];

#endif
