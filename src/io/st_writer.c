/* safetensors writer: one file, in the layout Hugging Face's safetensors writes and requires.
 * Its reader rejects holes between spans and bytes after the last one, so alignment cannot come
 * from padding between tensors.  Instead the header is padded with spaces so the data section
 * starts 8-byte aligned, and tensors are laid out contiguously by element size, largest first
 * (then in the order added): every span then starts at a multiple of its own element size.  The
 * file is written to a temporary name in the same folder and renamed into place, so a reader
 * never sees half a file. */
#include "io.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct wtensor {
    char *name;
    tcq_dtype dtype;
    int ndim;
    int64_t shape[TCQ_MAX_DIMS];
    const void *data;
    size_t nbytes;
    void *owned;                 /* tcq_st_writer_add_copy's buffer */
    FILE *src;                   /* tcq_st_writer_add_file: the bytes at src_off of src */
    int64_t src_off;
} wtensor;

struct tcq_st_writer {
    wtensor *t;
    int64_t n, cap;
    char **meta;                 /* [2 * n_meta]: key, value */
    int n_meta, meta_cap;
};

tcq_status tcq_st_writer_create(tcq_st_writer **out)
{
    if (!out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_writer_create: out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? TCQ_OK : tcq_fail(TCQ_ERR_NOMEM, "safetensors writer");
}

void tcq_st_writer_free(tcq_st_writer *w)
{
    if (!w) return;
    for (int64_t i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    for (int i = 0; i < 2 * w->n_meta; i++) free(w->meta[i]);
    free(w->meta);
    free(w->t);
    free(w);
}

tcq_status tcq_st_writer_add(tcq_st_writer *w, const char *name, tcq_dtype dtype, int ndim, const int64_t *shape,
                             const void *data, size_t nbytes)
{
    if (!w || !name) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_writer_add: writer or name is NULL");
    if (!*name || strcmp(name, "__metadata__") == 0)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "safetensors writer: '%s' is not a usable tensor name", name);
    if ((unsigned)dtype >= TCQ_DTYPE_COUNT)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "safetensors writer: tensor '%s': bad dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > TCQ_MAX_DIMS || (ndim && !shape))
        return tcq_fail(TCQ_ERR_INVALID_ARG, "safetensors writer: tensor '%s': ndim %d outside [0, %d]", name, ndim,
                        TCQ_MAX_DIMS);
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0 || __builtin_mul_overflow(numel, (uint64_t)shape[d], &numel))
            return tcq_fail(TCQ_ERR_INVALID_ARG, "safetensors writer: tensor '%s': bad shape[%d] = %lld", name, d,
                            (long long)shape[d]);
    uint64_t want;
    if (__builtin_mul_overflow(numel, (uint64_t)tcq_dtype_size(dtype), &want) || want != nbytes)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "safetensors writer: tensor '%s': %llu elements of %s are not %zu bytes",
                        name, (unsigned long long)numel, tcq_dtype_name(dtype), nbytes);
    if (nbytes && !data) return tcq_fail(TCQ_ERR_INVALID_ARG, "safetensors writer: tensor '%s': data is NULL", name);
    if (w->n == w->cap) {
        int64_t cap = w->cap ? 2 * w->cap : 64;
        wtensor *nt = realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return tcq_fail(TCQ_ERR_NOMEM, "safetensors writer");
        w->t = nt;
        w->cap = cap;
    }
    wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return tcq_fail(TCQ_ERR_NOMEM, "safetensors writer");
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->data = data;
    t->nbytes = nbytes;
    w->n++;
    return TCQ_OK;
}

tcq_status tcq_st_writer_add_copy(tcq_st_writer *w, const char *name, tcq_dtype dtype, int ndim, const int64_t *shape,
                                  const void *data, size_t nbytes)
{
    void *copy = malloc(nbytes ? nbytes : 1);
    if (!copy) return tcq_fail(TCQ_ERR_NOMEM, "safetensors writer: tensor '%s': %zu bytes", name ? name : "?", nbytes);
    if (nbytes && data) memcpy(copy, data, nbytes);
    tcq_status s = tcq_st_writer_add(w, name, dtype, ndim, shape, data ? copy : NULL, nbytes);
    if (s != TCQ_OK) {
        free(copy);
        return s;
    }
    w->t[w->n - 1].owned = copy;
    return TCQ_OK;
}

tcq_status tcq_st_writer_add_file(tcq_st_writer *w, const char *name, tcq_dtype dtype, int ndim, const int64_t *shape,
                                  FILE *src, int64_t off, size_t nbytes)
{
    static const char placeholder;
    if (!src || off < 0) return tcq_fail(TCQ_ERR_INVALID_ARG, "safetensors writer: tensor '%s': no source file", name);
    TCQ_TRY(tcq_st_writer_add(w, name, dtype, ndim, shape, &placeholder, nbytes));
    w->t[w->n - 1].data = NULL;
    w->t[w->n - 1].src = src;
    w->t[w->n - 1].src_off = off;
    return TCQ_OK;
}

/* A tensor's bytes from its source file, through a bounded buffer. */
static tcq_status copy_from(FILE *fp, const wtensor *t, const char *tmp)
{
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf) return tcq_fail(TCQ_ERR_NOMEM, "%s: copy buffer", tmp);
    tcq_status s = fseeko(t->src, (off_t)t->src_off, SEEK_SET) ? tcq_fail(TCQ_ERR_IO, "tensor '%s': seek in its source: %s",
                                                                         t->name, strerror(errno))
                                                               : TCQ_OK;
    for (size_t done = 0; s == TCQ_OK && done < t->nbytes; done += CHUNK) {
        const size_t n = t->nbytes - done < CHUNK ? t->nbytes - done : CHUNK;
        if (fread(buf, 1, n, t->src) != n) s = tcq_fail(TCQ_ERR_IO, "tensor '%s': short read from its source", t->name);
        else if (fwrite(buf, 1, n, fp) != n) s = tcq_fail(TCQ_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    }
    free(buf);
    return s;
}

tcq_status tcq_st_writer_metadata(tcq_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_writer_metadata: NULL argument");
    for (int i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta[2 * i], key) == 0) {
            char *v = strdup(value);
            if (!v) return tcq_fail(TCQ_ERR_NOMEM, "safetensors writer");
            free(w->meta[2 * i + 1]);
            w->meta[2 * i + 1] = v;
            return TCQ_OK;
        }
    if (w->n_meta == w->meta_cap) {
        int cap = w->meta_cap ? 2 * w->meta_cap : 8;
        char **nm = realloc(w->meta, 2 * (size_t)cap * sizeof *nm);
        if (!nm) return tcq_fail(TCQ_ERR_NOMEM, "safetensors writer");
        w->meta = nm;
        w->meta_cap = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return tcq_fail(TCQ_ERR_NOMEM, "safetensors writer");
    }
    w->meta[2 * w->n_meta] = k;
    w->meta[2 * w->n_meta + 1] = v;
    w->n_meta++;
    return TCQ_OK;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The write order: element size 8, 4, 2, 1, each in the order added. */
static int64_t *layout(const tcq_st_writer *w)
{
    int64_t *order = malloc(((size_t)w->n + 1) * sizeof *order), m = 0;
    if (!order) return NULL;
    for (size_t es = 8; es >= 1; es /= 2)
        for (int64_t i = 0; i < w->n; i++)
            if (tcq_dtype_size(w->t[i].dtype) == es) order[m++] = i;
    return order;
}

/* The header JSON (compact, sorted keys) for the tensors laid out in `order`. */
static tcq_status build_header(const tcq_st_writer *w, const int64_t *order, const char *path, char **out)
{
    json_t *root = json_object(), *meta = json_object();
    int ok = root && meta && json_object_set(root, "__metadata__", meta) == 0;
    int has_format = 0;
    for (int i = 0; ok && i < w->n_meta; i++) {
        ok = json_object_set_new(meta, w->meta[2 * i], json_string(w->meta[2 * i + 1])) == 0;
        has_format |= strcmp(w->meta[2 * i], "format") == 0;
    }
    if (ok && !has_format) ok = json_object_set_new(meta, "format", json_string("pt")) == 0;
    uint64_t off = 0;
    for (int64_t i = 0; ok && i < w->n; i++) {
        const wtensor *t = &w->t[order[i]];
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        ok = e && shape && offs;
        for (int d = 0; ok && d < t->ndim; d++) ok = json_array_append_new(shape, json_integer(t->shape[d])) == 0;
        ok = ok && json_array_append_new(offs, json_integer((json_int_t)off)) == 0 &&
             json_array_append_new(offs, json_integer((json_int_t)(off + t->nbytes))) == 0;
        ok = ok && json_object_set_new(e, "dtype", json_string(tcq_dtype_name(t->dtype))) == 0;
        ok = ok && json_object_set(e, "shape", shape) == 0 && json_object_set(e, "data_offsets", offs) == 0;
        ok = ok && json_object_set(root, t->name, e) == 0;
        json_decref(shape);
        json_decref(offs);
        json_decref(e);
        off += t->nbytes;
    }
    *out = ok ? json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(meta);
    json_decref(root);
    return *out ? TCQ_OK
                : tcq_fail(TCQ_ERR_INVALID_ARG, "%s: cannot build the header (a name or metadata string is not "
                                                "valid UTF-8, or out of memory)", path);
}

static tcq_status write_all(FILE *fp, const void *p, size_t n, const char *tmp)
{
    if (n && fwrite(p, 1, n, fp) != n) return tcq_fail(TCQ_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    return TCQ_OK;
}

static tcq_status write_body(const tcq_st_writer *w, const int64_t *order, FILE *fp, const char *hdr,
                             const char *tmp)
{
    static const char spaces[8] = "        ";
    size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    TCQ_TRY(write_all(fp, lenb, 8, tmp));
    TCQ_TRY(write_all(fp, hdr, hl, tmp));
    TCQ_TRY(write_all(fp, spaces, padded - hl, tmp));
    for (int64_t i = 0; i < w->n; i++) {
        const wtensor *t = &w->t[order[i]];
        TCQ_TRY(t->src ? copy_from(fp, t, tmp) : write_all(fp, t->data, t->nbytes, tmp));
    }
    return TCQ_OK;
}

tcq_status tcq_st_writer_write(tcq_st_writer *w, const char *path)
{
    if (!w || !path) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_writer_write: writer or path is NULL");
    /* Names must be unique. */
    char **names = malloc(((size_t)w->n + 1) * sizeof *names);
    if (!names) return tcq_fail(TCQ_ERR_NOMEM, "%s", path);
    for (int64_t i = 0; i < w->n; i++) names[i] = w->t[i].name;
    qsort(names, (size_t)w->n, sizeof *names, name_cmp);
    for (int64_t i = 1; i < w->n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) {
            tcq_status s = tcq_fail(TCQ_ERR_INVALID_ARG, "%s: tensor '%s' added twice", path, names[i]);
            free(names);
            return s;
        }
    free(names);

    int64_t *order = layout(w);
    if (!order) return tcq_fail(TCQ_ERR_NOMEM, "%s", path);
    char *hdr;
    tcq_status hs = build_header(w, order, path, &hdr);
    if (hs != TCQ_OK) {
        free(order);
        return hs;
    }
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) {
        free(hdr);
        return tcq_fail(TCQ_ERR_NOMEM, "%s", path);
    }
    snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    tcq_status s = TCQ_OK;
    if (fd < 0) {
        s = tcq_fail(TCQ_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        goto out;
    }
    fchmod(fd, 0644);
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        close(fd);
        s = tcq_fail(TCQ_ERR_IO, "%s: fdopen: %s", tmp, strerror(errno));
    } else {
        s = write_body(w, order, fp, hdr, tmp);
        if (fclose(fp) != 0 && s == TCQ_OK) s = tcq_fail(TCQ_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    }
    if (s == TCQ_OK && rename(tmp, path) != 0)
        s = tcq_fail(TCQ_ERR_IO, "%s: rename from %s failed: %s", path, tmp, strerror(errno));
    if (s != TCQ_OK) unlink(tmp);
out:
    free(tmp);
    free(hdr);
    free(order);
    return s;
}

int64_t tcq_st_writer_count(const tcq_st_writer *w) { return w ? w->n : 0; }

uint64_t tcq_st_writer_data_bytes(const tcq_st_writer *w)
{
    uint64_t n = 0;
    for (int64_t i = 0; w && i < w->n; i++) n += w->t[i].nbytes;
    return n;
}

tcq_status tcq_st_index_write(const char *path, int n_shards, const char *const *shard_names,
                              const tcq_st_writer *const *shards)
{
    if (!path || n_shards <= 0 || !shard_names || !shards)
        return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_index_write: bad arguments");
    json_t *root = json_object(), *meta = json_object(), *wm = json_object();
    int ok = root && meta && wm;
    uint64_t total = 0;
    tcq_status s = TCQ_OK;
    for (int i = 0; ok && i < n_shards; i++) {
        const char *sh = shard_names[i];
        if (!sh || !*sh || strchr(sh, '/') || !shards[i]) {
            s = tcq_fail(TCQ_ERR_INVALID_ARG, "%s: shard %d: name must be a plain file name", path, i);
            goto out;
        }
        for (int64_t j = 0; ok && j < shards[i]->n; j++) {
            const char *name = shards[i]->t[j].name;
            if (json_object_get(wm, name)) {
                s = tcq_fail(TCQ_ERR_INVALID_ARG, "%s: tensor '%s' is in two shards", path, name);
                goto out;
            }
            ok = json_object_set_new(wm, name, json_string(sh)) == 0;
            total += shards[i]->t[j].nbytes;
        }
    }
    ok = ok && json_object_set_new(meta, "total_size", json_integer((json_int_t)total)) == 0 &&
         json_object_set(root, "metadata", meta) == 0 && json_object_set(root, "weight_map", wm) == 0;
    char *text = ok ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (!text) {
        s = tcq_fail(TCQ_ERR_INVALID_ARG, "%s: cannot build the index (name not UTF-8, or out of memory)", path);
        goto out;
    }
    size_t n = strlen(text);
    text[n] = '\n';   /* json_dumps leaves room only for its NUL, which this replaces */
    s = tcq_io_write_file(path, text, n + 1);
    free(text);
out:
    json_decref(wm);
    json_decref(meta);
    json_decref(root);
    return s;
}
