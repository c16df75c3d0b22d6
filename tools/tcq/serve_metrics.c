/* /metrics: the scheduler's counters in Prometheus' text exposition format (version 0.0.4). */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>

char *srv_metrics_text(const srv_stats *st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
#define COUNTER(name, help, v)                                                                    \
    fprintf(f, "# HELP tcq_" name " " help "\n# TYPE tcq_" name " counter\ntcq_" name " %llu\n", \
            (unsigned long long)(v))
#define GAUGE(name, help, fmt, v) \
    fprintf(f, "# HELP tcq_" name " " help "\n# TYPE tcq_" name " gauge\ntcq_" name " " fmt "\n", v)
    COUNTER("requests_total", "Completion requests accepted.", st->requests);
    COUNTER("prompt_tokens_total", "Prompt tokens of admitted requests.", st->prompt_tokens);
    COUNTER("prompt_tokens_reused_total", "Prompt tokens taken from a slot's cache instead of prefilled.",
            st->reused_tokens);
    COUNTER("generated_tokens_total", "Tokens generated.", st->generated_tokens);
    COUNTER("prompt_cache_hits_total", "Requests whose prefix came from the prompt cache (beyond the slots).",
            st->cache_hits);
    COUNTER("requests_cancelled_total", "Requests whose client went away before the end.", st->cancelled);
    COUNTER("requests_failed_total", "Requests that ended with an error.", st->failed);
    GAUGE("generated_tokens_per_second", "Generated tokens per second of busy time (a slot in use).", "%.3f",
          st->busy_s > 0 ? (double)st->generated_tokens / st->busy_s : 0.0);
    GAUGE("busy_seconds", "Seconds with at least one slot in use.", "%.3f", st->busy_s);
    GAUGE("slots_busy", "Slots serving a request.", "%d", st->busy_slots);
    GAUGE("slots_total", "Slots (parallel requests).", "%d", st->n_slots);
    GAUGE("queue_length", "Requests waiting for a slot.", "%d", st->queued);
    GAUGE("prompt_cache_entries", "Finished requests' caches kept beyond the slots.", "%d", st->cache_entries);
    GAUGE("prompt_cache_bytes", "Bytes those entries take.", "%zu", st->cache_bytes);
#undef COUNTER
#undef GAUGE
    fclose(f);
    return buf;
}
