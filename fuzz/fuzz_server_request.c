/* libFuzzer target: tcq serve's request parser (JSON body -> srv_request, tools/tcq/serve_request.c,
 * compiled in here: it is CLI code, not part of the library).  Both kinds of body; a rejection
 * must name what is wrong; an accepted request must hold what the server relies on. */
#include "../tools/tcq/serve_request.c"

#include <stdlib.h>

static void check(const uint8_t *data, size_t size, srv_kind kind)
{
    char err[512], param[128];
    srv_request r;
    if (srv_request_parse((const char *)data, size, kind, &r, err, sizeof err, param, sizeof param)) {
        if (!err[0] || strlen(err) >= sizeof err || strlen(param) >= sizeof param) abort();
        srv_request_free(&r);
        return;
    }
    if (r.kind != kind || r.n_stop < 0 || r.n_stop > SRV_MAX_STOP) abort();
    if (kind == SRV_CHAT && (r.n_msgs < 1 || !r.msgs)) abort();
    if (kind == SRV_COMPLETION && !r.prompt) abort();
    for (int i = 0; i < r.n_msgs; i++)
        if (!r.msgs[i].role || !r.msgs[i].content) abort();
    for (int i = 0; i < r.n_stop; i++)
        if (!r.stop[i] || !r.stop[i][0]) abort();
    if (!(r.temperature >= 0 && r.temperature <= 2) || !(r.top_p >= 0 && r.top_p <= 1) || r.top_k < 0 ||
        (r.max_tokens != -1 && r.max_tokens < 1) || r.enable_thinking < -1 || r.enable_thinking > 1)
        abort();
    srv_request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, SRV_CHAT);
    check(data, size, SRV_COMPLETION);
    return 0;
}
