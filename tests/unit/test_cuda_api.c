/* The CUDA API must answer, not crash, in every build: without CUDA (or without a device) it
 * reports the reason; with one it gives a usable context. */
#include "test.h"

int main(void)
{
    tcq_cuda_ctx *ctx = (tcq_cuda_ctx *)1;
    tcq_status s = tcq_cuda_ctx_create(0, &ctx);
    if (!tcq_cuda_available()) {
        CHECK(s != TCQ_OK && ctx == NULL, "ctx_create without a device returned %s", tcq_status_str(s));
        CHECK(*tcq_last_error() != 0, "no message");
        void *p = (void *)1;
        CHECK(tcq_cuda_malloc(&p, 16) != TCQ_OK && p == NULL, "malloc without a device");
        tcq_trellis w;
        memset(&w, 0, sizeof w);
        CHECK(tcq_cuda_linear(NULL, &w, NULL, NULL, 1, TCQ_PATH_AUTO) != TCQ_OK, "linear without a device");
    } else {
        CHECK_OK(s);
        char buf[256];
        if (s == TCQ_OK) CHECK_OK(tcq_cuda_describe(ctx, buf, sizeof buf));
        tcq_cuda_ctx_free(ctx);
    }
    return test_done("test_cuda_api");
}
