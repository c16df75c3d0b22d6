/* safetensors reader: mmap, validate every header field, index tensors by name.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON, then the data section.  Each
 * tensor's data_offsets [begin, end) are relative to the data section.  What is rejected (and
 * why) is listed in tcq_kernels.h; holes between spans are allowed because aligning writers (ours
 * included) pad between tensors, and their total is reported by tcq_st_hole_bytes(). */
#include "../core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER (100u * 1000u * 1000u)

struct tcq_st_file {
    char *label;
    void *map;                     /* our mapping (tcq_st_open), NULL for tcq_st_parse */
    size_t map_len;
    int64_t n;
    tcq_tensor_info *t;            /* [n] in data order */
    const tcq_tensor_info **by_name; /* [n] sorted by name, for bsearch */
    int n_meta;
    char **meta;                   /* [2 * n_meta]: key, value */
    uint64_t hole_bytes;
    uint64_t data_bytes;
    uint64_t header_bytes;
};

typedef struct span {
    uint64_t begin, end;
    int64_t idx;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int info_name_cmp(const void *a, const void *b)
{
    return strcmp((*(const tcq_tensor_info *const *)a)->name, (*(const tcq_tensor_info *const *)b)->name);
}

void tcq_st_close(tcq_st_file *f)
{
    if (!f) return;
    for (int64_t i = 0; i < f->n; i++) free((char *)f->t[i].name);
    for (int i = 0; i < 2 * f->n_meta; i++) free(f->meta[i]);
    free(f->meta);
    free(f->t);
    free(f->by_name);
    if (f->map) munmap(f->map, f->map_len);
    free(f->label);
    free(f);
}

/* Reads a JSON integer that must be a non-negative int64. */
static int json_uint(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static void shape_str(const tcq_tensor_info *t, char *buf, size_t n)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "[");
    for (int d = 0; d < t->ndim && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* One tensor entry: dtype, shape, data_offsets; fills t and its span. */
static tcq_status parse_entry(const char *label, const char *name, json_t *v, const uint8_t *data,
                              uint64_t data_len, tcq_tensor_info *t, span *sp)
{
    if (!json_is_object(v))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': entry is not a JSON object", label, name);
    const char *key;
    json_t *f;
    json_object_foreach(v, key, f)
    {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': unknown field '%.64s'", label, name, key);
    }
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd)) return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': dtype missing or not a string", label, name);
    tcq_status s = tcq_dtype_parse(json_string_value(jd), &t->dtype);
    if (s != TCQ_OK) {
        tcq_error_prefix("%s: tensor '%s'", label, name);
        return s;
    }
    if (!json_is_array(js)) return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': shape missing or not an array", label, name);
    if (json_array_size(js) > TCQ_MAX_DIMS)
        return tcq_fail(TCQ_ERR_UNSUPPORTED, "%s: tensor '%s': %zu dimensions (at most %d)", label, name,
                        json_array_size(js), TCQ_MAX_DIMS);
    t->ndim = (int)json_array_size(js);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t dim;
        if (!json_uint(json_array_get(js, (size_t)d), &dim))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", label, name, d);
        t->shape[d] = (int64_t)dim;
        if (__builtin_mul_overflow(numel, dim, &numel) || numel > (uint64_t)INT64_MAX)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': element count overflows", label, name);
    }
    t->numel = (int64_t)numel;
    const size_t es = tcq_dtype_size(t->dtype);
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, (uint64_t)es, &nbytes))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': byte size overflows", label, name);
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_uint(json_array_get(jo, 0), &sp->begin) ||
        !json_uint(json_array_get(jo, 1), &sp->end))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': data_offsets must be [begin, end] of non-negative integers",
                        label, name);
    if (sp->begin > sp->end)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", label, name,
                        (unsigned long long)sp->begin, (unsigned long long)sp->end);
    char sh[256];
    shape_str(t, sh, sizeof sh);
    if (sp->end - sp->begin != nbytes)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': shape %s x %s = %llu bytes but data_offsets span %llu", label,
                        name, sh, tcq_dtype_name(t->dtype), (unsigned long long)nbytes,
                        (unsigned long long)(sp->end - sp->begin));
    if (sp->end > data_len)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] run past the data section (%llu bytes)",
                        label, name, (unsigned long long)sp->begin, (unsigned long long)sp->end,
                        (unsigned long long)data_len);
    if (sp->begin % es)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': data_offsets begin %llu is not a multiple of the %s element size %zu",
                        label, name, (unsigned long long)sp->begin, tcq_dtype_name(t->dtype), es);
    /* The data pointer is handed out typed, so its address must be aligned too; it is not when
     * the header length leaves the data section misaligned (writers pad the header to 8). */
    if ((uintptr_t)(data + sp->begin) % es)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': data section starts at a misaligned address for %s "
                        "(header length not padded to a multiple of 8)", label, name, tcq_dtype_name(t->dtype));
    t->data = data + sp->begin;
    t->nbytes = (size_t)nbytes;
    return TCQ_OK;
}

static tcq_status parse_metadata(tcq_st_file *f, json_t *m)
{
    if (!json_is_object(m)) return tcq_fail(TCQ_ERR_FORMAT, "%s: __metadata__ is not an object", f->label);
    f->meta = calloc(2 * json_object_size(m) + 1, sizeof *f->meta);
    if (!f->meta) return tcq_fail(TCQ_ERR_NOMEM, "%s: metadata", f->label);
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v)
    {
        if (!json_is_string(v))
            return tcq_fail(TCQ_ERR_FORMAT, "%s: __metadata__ value of '%.64s' is not a string", f->label, key);
        f->meta[2 * f->n_meta] = strdup(key);
        f->meta[2 * f->n_meta + 1] = strdup(json_string_value(v));
        f->n_meta++;
        if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1])
            return tcq_fail(TCQ_ERR_NOMEM, "%s: metadata", f->label);
    }
    return TCQ_OK;
}

static tcq_status parse_header(tcq_st_file *f, const uint8_t *buf, size_t len)
{
    if (len < 8)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: file is %zu bytes, too short for the 8-byte header length", f->label, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > ST_MAX_HEADER)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: header length %llu exceeds the limit of %u bytes", f->label,
                        (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > len - 8)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes): truncated?",
                        f->label, (unsigned long long)hlen, len);
    f->header_bytes = hlen;
    const uint8_t *data = buf + 8 + hlen;
    const uint64_t data_len = len - 8 - hlen;
    f->data_bytes = data_len;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: header is not valid JSON: %s (line %d, column %d)", f->label, jerr.text,
                        jerr.line, jerr.column);
    tcq_status s = TCQ_OK;
    span *sp = NULL;
    if (!json_is_object(root)) {
        s = tcq_fail(TCQ_ERR_FORMAT, "%s: header is not a JSON object", f->label);
        goto done;
    }
    size_t cap = json_object_size(root);
    f->t = calloc(cap + 1, sizeof *f->t);
    sp = calloc(cap + 1, sizeof *sp);
    if (!f->t || !sp) {
        s = tcq_fail(TCQ_ERR_NOMEM, "%s: %zu tensors", f->label, cap);
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "__metadata__") == 0) {
            if ((s = parse_metadata(f, v)) != TCQ_OK) goto done;
            continue;
        }
        if (!*key) {
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: a tensor has an empty name", f->label);
            goto done;
        }
        tcq_tensor_info *t = &f->t[f->n];
        if ((s = parse_entry(f->label, key, v, data, data_len, t, &sp[f->n])) != TCQ_OK) goto done;
        if (!(t->name = strdup(key))) {
            s = tcq_fail(TCQ_ERR_NOMEM, "%s: names", f->label);
            goto done;
        }
        t->file = f->label;
        sp[f->n].idx = f->n;
        f->n++;
    }

    /* Data order, then overlaps and holes between neighbours. */
    qsort(sp, (size_t)f->n, sizeof *sp, span_cmp);
    uint64_t prev_end = 0;
    int64_t prev = -1;
    for (int64_t i = 0; i < f->n; i++) {
        if (sp[i].begin < prev_end) {
            s = tcq_fail(TCQ_ERR_FORMAT, "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", f->label,
                         f->t[sp[prev].idx].name, (unsigned long long)sp[prev].begin,
                         (unsigned long long)sp[prev].end, f->t[sp[i].idx].name, (unsigned long long)sp[i].begin,
                         (unsigned long long)sp[i].end);
            goto done;
        }
        f->hole_bytes += sp[i].begin - prev_end;
        prev_end = sp[i].end;
        prev = i;
    }
    f->hole_bytes += data_len - prev_end;
    tcq_tensor_info *sorted = calloc((size_t)f->n + 1, sizeof *sorted);
    f->by_name = calloc((size_t)f->n + 1, sizeof *f->by_name);
    if (!sorted || !f->by_name) {
        free(sorted);
        s = tcq_fail(TCQ_ERR_NOMEM, "%s: index", f->label);
        goto done;
    }
    for (int64_t i = 0; i < f->n; i++) sorted[i] = f->t[sp[i].idx];
    free(f->t);
    f->t = sorted;
    for (int64_t i = 0; i < f->n; i++) f->by_name[i] = &f->t[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, info_name_cmp);
done:
    free(sp);
    json_decref(root);
    return s;
}

tcq_status tcq_st_parse(const void *buf, size_t len, const char *label, tcq_st_file **out)
{
    if (!out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_parse: out is NULL");
    *out = NULL;
    if (!buf && len) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_parse: buffer is NULL");
    tcq_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->label = strdup(label ? label : "<memory>"))) {
        free(f);
        return tcq_fail(TCQ_ERR_NOMEM, "safetensors file object");
    }
    tcq_status s = parse_header(f, buf ? buf : "", len);
    if (s != TCQ_OK) {
        tcq_st_close(f);
        return s;
    }
    *out = f;
    return TCQ_OK;
}

tcq_status tcq_st_open(const char *path, tcq_st_file **out)
{
    if (!path || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_open: path or out is NULL");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tcq_fail(errno == ENOENT ? TCQ_ERR_NOT_FOUND : TCQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tcq_fail(TCQ_ERR_IO, "%s: not a regular file", path);
    }
    size_t len = (size_t)st.st_size;
    if (len < 8) {
        close(fd);
        return tcq_fail(TCQ_ERR_FORMAT, "%s: file is %zu bytes, too short for the 8-byte header length", path, len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) return tcq_fail(TCQ_ERR_IO, "%s: mmap of %zu bytes failed: %s", path, len, strerror(err));
    tcq_st_file *f;
    tcq_status s = tcq_st_parse(map, len, path, &f);
    if (s != TCQ_OK) {
        munmap(map, len);
        return s;
    }
    f->map = map;
    f->map_len = len;
    *out = f;
    return TCQ_OK;
}

int64_t tcq_st_count(const tcq_st_file *f) { return f ? f->n : 0; }

const tcq_tensor_info *tcq_st_tensor(const tcq_st_file *f, int64_t i)
{
    return (f && i >= 0 && i < f->n) ? &f->t[i] : NULL;
}

const tcq_tensor_info *tcq_st_find(const tcq_st_file *f, const char *name)
{
    if (!f || !name || !f->n) return NULL;
    tcq_tensor_info key = {.name = name};
    const tcq_tensor_info *kp = &key;
    const tcq_tensor_info **hit = bsearch(&kp, f->by_name, (size_t)f->n, sizeof *f->by_name, info_name_cmp);
    return hit ? *hit : NULL;
}

const char *tcq_st_metadata(const tcq_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

const char *tcq_st_path(const tcq_st_file *f) { return f ? f->label : NULL; }

uint64_t tcq_st_hole_bytes(const tcq_st_file *f) { return f ? f->hole_bytes : 0; }
