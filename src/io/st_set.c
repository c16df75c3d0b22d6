/* The tensors of a model: one safetensors file, or shards listed by model.safetensors.index.json.
 * The index is held to be exact: every tensor it names is in the shard it names, and every
 * tensor a shard holds is named by the index for that shard (so no name is in two shards). */
#include "io.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct tcq_st_set {
    char *dir;                        /* folder holding the files ("." for a bare file name) */
    int n_files;
    tcq_st_file **files;
    int64_t n;
    const tcq_tensor_info **t;        /* [n]: files in order, each in data order */
    const tcq_tensor_info **by_name;  /* [n] sorted by name */
};

static int info_name_cmp(const void *a, const void *b)
{
    return strcmp((*(const tcq_tensor_info *const *)a)->name, (*(const tcq_tensor_info *const *)b)->name);
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

void tcq_st_set_close(tcq_st_set *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) tcq_st_close(s->files[i]);
    free(s->files);
    free(s->t);
    free(s->by_name);
    free(s->dir);
    free(s);
}

static char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Fills t and by_name from the open files; duplicate names across files are an error. */
static tcq_status build_index(tcq_st_set *s, const char *label)
{
    int64_t n = 0;
    for (int i = 0; i < s->n_files; i++) n += tcq_st_count(s->files[i]);
    s->t = malloc(((size_t)n + 1) * sizeof *s->t);
    s->by_name = malloc(((size_t)n + 1) * sizeof *s->by_name);
    if (!s->t || !s->by_name) return tcq_fail(TCQ_ERR_NOMEM, "%s: %lld tensors", label, (long long)n);
    for (int i = 0; i < s->n_files; i++)
        for (int64_t j = 0; j < tcq_st_count(s->files[i]); j++) s->t[s->n++] = tcq_st_tensor(s->files[i], j);
    memcpy(s->by_name, s->t, (size_t)n * sizeof *s->t);
    qsort(s->by_name, (size_t)n, sizeof *s->by_name, info_name_cmp);
    for (int64_t i = 1; i < n; i++)
        if (strcmp(s->by_name[i - 1]->name, s->by_name[i]->name) == 0)
            return tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s' is in both %s and %s", label, s->by_name[i]->name,
                            s->by_name[i - 1]->file, s->by_name[i]->file);
    return TCQ_OK;
}

static tcq_status open_single(tcq_st_set *s, const char *path)
{
    s->files = calloc(1, sizeof *s->files);
    if (!s->files) return tcq_fail(TCQ_ERR_NOMEM, "%s", path);
    TCQ_TRY(tcq_st_open(path, &s->files[0]));
    s->n_files = 1;
    return build_index(s, path);
}

static tcq_status open_index_json(tcq_st_set *s, const char *ipath, json_t *root)
{
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(root) || !json_is_object(wm))
        return tcq_fail(TCQ_ERR_FORMAT, "%s: no \"weight_map\" object", ipath);
    size_t nw = json_object_size(wm);
    if (nw == 0) return tcq_fail(TCQ_ERR_FORMAT, "%s: \"weight_map\" is empty", ipath);
    const char **shards = malloc(nw * sizeof *shards);
    if (!shards) return tcq_fail(TCQ_ERR_NOMEM, "%s", ipath);
    size_t ns = 0;
    const char *key;
    json_t *v;
    tcq_status st = TCQ_OK;
    json_object_foreach(wm, key, v)
    {
        const char *sh = json_string_value(v);
        if (!sh) {
            st = tcq_fail(TCQ_ERR_FORMAT, "%s: weight_map value of '%s' is not a string", ipath, key);
            goto done;
        }
        if (!*sh || strchr(sh, '/') || strcmp(sh, ".") == 0 || strcmp(sh, "..") == 0) {
            st = tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s': shard '%.128s' is not a file name in the model directory",
                          ipath, key, sh);
            goto done;
        }
        shards[ns++] = sh;
    }
    qsort(shards, ns, sizeof *shards, str_cmp);
    size_t u = 0;
    for (size_t i = 0; i < ns; i++)
        if (u == 0 || strcmp(shards[u - 1], shards[i])) shards[u++] = shards[i];
    s->files = calloc(u, sizeof *s->files);
    if (!s->files) {
        st = tcq_fail(TCQ_ERR_NOMEM, "%s", ipath);
        goto done;
    }
    for (size_t i = 0; i < u; i++) {
        char *p = path_join(s->dir, shards[i]);
        if (!p) {
            st = tcq_fail(TCQ_ERR_NOMEM, "%s", ipath);
            goto done;
        }
        st = tcq_st_open(p, &s->files[i]);
        free(p);
        if (st != TCQ_OK) {
            tcq_error_prefix("%s: shard '%s'", ipath, shards[i]);
            goto done;
        }
        s->n_files++;
        /* Every tensor of the shard must be listed for this shard. */
        for (int64_t j = 0; j < tcq_st_count(s->files[i]); j++) {
            const tcq_tensor_info *t = tcq_st_tensor(s->files[i], j);
            const char *listed = json_string_value(json_object_get(wm, t->name));
            if (!listed) {
                st = tcq_fail(TCQ_ERR_FORMAT, "%s: shard '%s' holds tensor '%s', which the index does not list", ipath,
                              shards[i], t->name);
                goto done;
            }
            if (strcmp(listed, shards[i])) {
                st = tcq_fail(TCQ_ERR_FORMAT, "%s: tensor '%s' is listed in shard '%s' but also stored in shard '%s'",
                              ipath, t->name, listed, shards[i]);
                goto done;
            }
        }
    }
    /* Every listed tensor must be in its shard. */
    json_object_foreach(wm, key, v)
    {
        const char *sh = json_string_value(v);
        const char **hit = bsearch(&sh, shards, u, sizeof *shards, str_cmp);
        if (!hit || !tcq_st_find(s->files[hit - shards], key)) {
            st = tcq_fail(TCQ_ERR_NOT_FOUND, "%s: index names tensor '%s' in shard '%s', which does not hold it", ipath,
                          key, sh);
            goto done;
        }
    }
    st = build_index(s, ipath);
done:
    free(shards);
    return st;
}

static tcq_status open_index(tcq_st_set *s, const char *ipath)
{
    char *text;
    size_t len;
    TCQ_TRY(tcq_io_read_file(ipath, &text, &len));
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root)
        return tcq_fail(TCQ_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", ipath, jerr.text, jerr.line,
                        jerr.column);
    tcq_status st = open_index_json(s, ipath, root);
    json_decref(root);
    return st;
}

tcq_status tcq_st_set_open(const char *path, tcq_st_set **out)
{
    if (!path || !out) return tcq_fail(TCQ_ERR_INVALID_ARG, "tcq_st_set_open: path or out is NULL");
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return tcq_fail(errno == ENOENT ? TCQ_ERR_NOT_FOUND : TCQ_ERR_IO, "%s: %s", path, strerror(errno));
    tcq_st_set *s = calloc(1, sizeof *s);
    if (!s) return tcq_fail(TCQ_ERR_NOMEM, "%s", path);
    tcq_status r;
    char *ipath = NULL, *mpath = NULL;
    if (S_ISDIR(st.st_mode)) {
        s->dir = strdup(path);
        ipath = path_join(path, "model.safetensors.index.json");
        mpath = path_join(path, "model.safetensors");
        if (!s->dir || !ipath || !mpath)
            r = tcq_fail(TCQ_ERR_NOMEM, "%s", path);
        else if (is_file(ipath))
            r = open_index(s, ipath);
        else if (is_file(mpath))
            r = open_single(s, mpath);
        else
            r = tcq_fail(TCQ_ERR_NOT_FOUND, "%s: neither model.safetensors.index.json nor model.safetensors is there",
                         path);
    } else {
        const char *slash = strrchr(path, '/');
        s->dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
        if (!s->dir)
            r = tcq_fail(TCQ_ERR_NOMEM, "%s", path);
        else if (ends_with(path, ".index.json"))
            r = open_index(s, path);
        else
            r = open_single(s, path);
    }
    free(ipath);
    free(mpath);
    if (r != TCQ_OK) {
        tcq_st_set_close(s);
        return r;
    }
    *out = s;
    return TCQ_OK;
}

int64_t tcq_st_set_count(const tcq_st_set *s) { return s ? s->n : 0; }

const tcq_tensor_info *tcq_st_set_tensor(const tcq_st_set *s, int64_t i)
{
    return (s && i >= 0 && i < s->n) ? s->t[i] : NULL;
}

const tcq_tensor_info *tcq_st_set_find(const tcq_st_set *s, const char *name)
{
    if (!s || !name || !s->n) return NULL;
    tcq_tensor_info key = {.name = name};
    const tcq_tensor_info *kp = &key;
    const tcq_tensor_info **hit = bsearch(&kp, s->by_name, (size_t)s->n, sizeof *s->by_name, info_name_cmp);
    return hit ? *hit : NULL;
}

const char *tcq_st_set_dir(const tcq_st_set *s) { return s ? s->dir : NULL; }
int tcq_st_set_file_count(const tcq_st_set *s) { return s ? s->n_files : 0; }
const tcq_st_file *tcq_st_set_file(const tcq_st_set *s, int i)
{
    return (s && i >= 0 && i < s->n_files) ? s->files[i] : NULL;
}
