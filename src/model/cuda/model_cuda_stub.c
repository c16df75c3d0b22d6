/* The device forward's entry points in a build without CUDA: every request for the device fails
 * with TCQ_ERR_UNSUPPORTED (the model_cuda*.cu files provide them in a CUDA build). */
#include "model/model.h"

#ifndef TCQ_HAVE_CUDA
static tcq_status no_cuda(void)
{
    return tcq_fail(TCQ_ERR_UNSUPPORTED, "device cuda: this build of tcq has no CUDA (configure with -DTCQ_CUDA=ON)");
}
int tcq_model_cuda_present(int index)
{
    (void)index;
    return 0;
}
tcq_status tcq_model_cuda_init(tcq_model *m, const tcq_model_opts *opts)
{
    (void)m;
    (void)opts;
    return no_cuda();
}
void tcq_model_cuda_free(tcq_model *m) { (void)m; }
tcq_status tcq_model_cuda_rows(tcq_model *m, tcq_session *const *sess, const int *pos, const int32_t *tok, int M,
                               int out_from, float *logits)
{
    (void)m, (void)sess, (void)pos, (void)tok, (void)M, (void)out_from, (void)logits;
    return no_cuda();
}
tcq_status tcq_session_cuda_alloc(const tcq_model *m, tcq_session *s)
{
    (void)m, (void)s;
    return no_cuda();
}
void tcq_session_cuda_release(tcq_session *s) { (void)s; }
#endif
