/* CUDA context, device memory, uploads and error strings. */
#include "cuda_internal.h"

#include <stdio.h>
#include <string.h>

tcq_status tcq_cuda_fail(cudaError_t e, const char *what)
{
    return tcq_fail(TCQ_ERR_DEVICE, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

tcq_status tcq_cublas_fail(cublasStatus_t e, const char *what)
{
    return tcq_fail(TCQ_ERR_DEVICE, "%s: cuBLAS: %s", what, cublasGetStatusString(e));
}

int tcq_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n > 0;
}

tcq_status tcq_cuda_ctx_create(int device, tcq_cuda_ctx **out)
{
    if (!out) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda ctx: out is NULL");
    *out = NULL;
    int n = 0;
    CU_TRY(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
    if (device < 0 || device >= n)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda ctx: device %d outside [0, %d)", device, n);
    CU_TRY(cudaSetDevice(device), "cudaSetDevice");
    tcq_cuda_ctx *c = (tcq_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return tcq_fail(TCQ_ERR_NOMEM, "cuda ctx");
    c->device = device;
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(c);
        return tcq_cuda_fail(e, "cuda ctx: device properties / stream");
    }
    c->n_sm = prop.multiProcessorCount;
    c->l2_bytes = prop.l2CacheSize;
    c->smem_optin = (int)prop.sharedMemPerBlockOptin;
    c->wg_pin = c->ws_pin = -1;   /* the built-in dispatcher (tcq_cuda_ctx_set_opts) */
    snprintf(c->name, sizeof c->name, "%s, %d SMs, %d MB L2, cc %d.%d, %.0f GB", prop.name, c->n_sm,
             c->l2_bytes >> 20, prop.major, prop.minor, (double)prop.totalGlobalMem / 1e9);
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetStream(c->blas, c->stream);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        if (c->blas) cublasDestroy(c->blas);
        cudaStreamDestroy(c->stream);
        free(c);
        return tcq_cublas_fail(bs, "cuda ctx: cublasCreate");
    }
    tcq_status ps = tcq_cuda_wg_probe(c);
    if (ps != TCQ_OK) {
        tcq_cuda_ctx_free(c);
        return ps;
    }
    *out = c;
    return TCQ_OK;
}

void tcq_cuda_ctx_free(tcq_cuda_ctx *c)
{
    if (!c) return;
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    cublasDestroy(c->blas);
    cudaFree(c->scratch);
    cudaFree(c->counters);
    cudaFreeHost(c->host_stage);
    cudaStreamDestroy(c->stream);
    free(c);
}

tcq_status tcq_cuda_ctx_set_opts(tcq_cuda_ctx *c, const tcq_cuda_opts *o)
{
    if (!c || !o) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda ctx options: NULL argument");
    if (o->tc_max_m < 0 || o->tc_max_m > 32)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda ctx options: tc_max_m %d outside [0, 32]", o->tc_max_m);
    if (o->im_chunk && (o->im_chunk < 64 || o->im_chunk > 1024 || o->im_chunk % 32))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda ctx options: im_chunk %d is not a multiple of 32 in [64, 1024]",
                        o->im_chunk);
    if (o->wgmma < -1 || o->wgmma > 1 || o->wgmma_ss < -1 || o->wgmma_ss > 1)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda ctx options: wgmma %d / wgmma_ss %d not -1, 0 or 1", o->wgmma,
                        o->wgmma_ss);
    if (o->wg_grid < 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda ctx options: wg_grid %d < 0", o->wg_grid);
    c->kernel_pin = o->pair_table != 0;
    c->tc_max_m = o->tc_max_m;
    c->fast_dp4a = o->fast_dp4a != 0;
    c->chunk_pin = o->im_chunk;
    c->wg_pin = o->wgmma ? o->wgmma > 0 : -1;
    c->ws_pin = o->wgmma_ss ? o->wgmma_ss > 0 : -1;
    c->wg_grid = o->wg_grid;
    return TCQ_OK;
}

void *tcq_cuda_ctx_stream(tcq_cuda_ctx *c) { return c ? (void *)c->stream : NULL; }

tcq_status tcq_cuda_sync(tcq_cuda_ctx *c)
{
    if (!c) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda sync: ctx is NULL");
    CU_TRY(cudaStreamSynchronize(c->stream), "cuda stream (an earlier launch failed?)");
    return TCQ_OK;
}

tcq_status tcq_cuda_describe(tcq_cuda_ctx *c, char *buf, size_t len)
{
    if (!c || !buf || !len) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda describe: NULL");
    snprintf(buf, len, "%s", c->name);
    return TCQ_OK;
}

tcq_status tcq_cuda_malloc(void **ptr, size_t bytes)
{
    if (!ptr) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda malloc: ptr is NULL");
    *ptr = NULL;
    cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return tcq_fail(e == cudaErrorMemoryAllocation ? TCQ_ERR_NOMEM : TCQ_ERR_DEVICE,
                        "cudaMalloc(%zu bytes): %s", bytes, cudaGetErrorString(e));
    }
    return TCQ_OK;
}

void tcq_cuda_free(void *ptr) { cudaFree(ptr); }

tcq_status tcq_cuda_copy_to_device(tcq_cuda_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!c || (!dst && bytes) || (!src && bytes)) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda copy: NULL");
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "cudaMemcpy host->device");
    return TCQ_OK;
}

tcq_status tcq_cuda_copy_to_host(tcq_cuda_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!c || (!dst && bytes) || (!src && bytes)) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda copy: NULL");
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "cudaMemcpy device->host");
    CU_TRY(cudaStreamSynchronize(c->stream), "cudaMemcpy device->host");
    return TCQ_OK;
}

tcq_status tcq_cuda_memset(tcq_cuda_ctx *c, void *dst, int byte, size_t bytes)
{
    if (!c || (!dst && bytes)) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda memset: NULL");
    CU_TRY(cudaMemsetAsync(dst, byte, bytes, c->stream), "cudaMemset");
    return TCQ_OK;
}

tcq_status tcq_cuda_scratch(tcq_cuda_ctx *c, size_t bytes, void **out)
{
    if (bytes > c->scratch_bytes) {
        /* the old bytes move along: a fused call (linear_io.h) reads the previous call's partials */
        CU_TRY(cudaStreamSynchronize(c->stream), "cuda scratch: sync before growing");
        const size_t want = bytes + bytes / 4;
        void *grown = NULL;
        CU_TRY(cudaMalloc(&grown, want), "cuda scratch");
        if (c->scratch) {
            cudaError_t e = cudaMemcpy(grown, c->scratch, c->scratch_bytes, cudaMemcpyDeviceToDevice);
            if (e != cudaSuccess) {
                cudaFree(grown);
                return tcq_cuda_fail(e, "cuda scratch: keeping its contents");
            }
        }
        cudaFree(c->scratch);
        c->scratch = grown;
        c->scratch_bytes = want;
    }
    *out = c->scratch;
    return TCQ_OK;
}

tcq_status tcq_cuda_host_stage(tcq_cuda_ctx *c, size_t bytes, void **out)
{
    if (bytes > c->host_stage_bytes) {
        CU_TRY(cudaStreamSynchronize(c->stream), "cuda host staging: sync before growing");
        cudaFreeHost(c->host_stage);
        c->host_stage = NULL;
        c->host_stage_bytes = 0;
        size_t want = bytes + bytes / 4;
        CU_TRY(cudaHostAlloc(&c->host_stage, want, cudaHostAllocDefault), "cuda host staging (cudaHostAlloc)");
        c->host_stage_bytes = want;
    }
    *out = c->host_stage;
    return TCQ_OK;
}

tcq_status tcq_cuda_counters(tcq_cuda_ctx *c, size_t n, int **out)
{
    if (n > c->n_counters) {
        CU_TRY(cudaStreamSynchronize(c->stream), "cuda counters: sync before growing");
        cudaFree(c->counters);
        c->counters = NULL;
        c->n_counters = 0;
        size_t want = n + 1024;
        CU_TRY(cudaMalloc(&c->counters, want * sizeof(int)), "cuda counters");
        CU_TRY(cudaMemsetAsync(c->counters, 0, want * sizeof(int), c->stream), "cuda counters");
        c->n_counters = want;
    }
    *out = c->counters;
    return TCQ_OK;
}

size_t tcq_cuda_trellis_bytes(const tcq_trellis *h)
{
    if (!h || h->rows <= 0 || h->cols <= 0) return 0;
    return tcq_align256((size_t)h->rows * (size_t)tcq_trellis_row_words(h) * 4) + (size_t)h->rows * 2;
}

tcq_status tcq_cuda_trellis_upload(tcq_cuda_ctx *c, const tcq_trellis *h, void *dev_buf, size_t dev_bytes,
                                   tcq_trellis *dev)
{
    if (!c || !dev || !dev_buf) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda upload: NULL argument");
    TCQ_TRY(tcq_trellis_check(h));
    const size_t need = tcq_cuda_trellis_bytes(h);
    if (dev_bytes < need)
        return tcq_fail(TCQ_ERR_RANGE, "cuda upload: device buffer holds %zu bytes, tensor [%lld, %lld] needs %zu",
                        dev_bytes, (long long)h->rows, (long long)h->cols, need);
    if (((uintptr_t)dev_buf & 15u) != 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "cuda upload: buffer not 16-byte aligned");
    const size_t code_bytes = (size_t)h->rows * (size_t)tcq_trellis_row_words(h) * 4;
    char *b = (char *)dev_buf;
    CU_TRY(cudaMemcpyAsync(b, h->codes, code_bytes, cudaMemcpyHostToDevice, c->stream), "cuda upload: codes");
    CU_TRY(cudaMemcpyAsync(b + tcq_align256(code_bytes), h->scales, (size_t)h->rows * 2, cudaMemcpyHostToDevice,
                           c->stream), "cuda upload: scales");
    *dev = *h;
    dev->codes = (const uint32_t *)b;
    dev->scales = (const uint16_t *)(b + tcq_align256(code_bytes));
    return TCQ_OK;
}

tcq_status tcq_cuda_check_weight(const tcq_trellis *w)
{
    TCQ_TRY(tcq_trellis_check(w));
    if (w->p.T % 64 != 0)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "cuda kernels need T %% 64 == 0 (got T=%d)", w->p.T);
    return TCQ_OK;
}
