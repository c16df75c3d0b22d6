/* safetensors reader, writer and model sets: round trips and rejection messages. */
#include "test.h"

#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static char *tpath(const char *name)
{
    static char buf[4][256];
    static int i;
    i = (i + 1) & 3;
    snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, name);
    return buf[i];
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fwrite(p, 1, n, f);
    fclose(f);
}

/* A safetensors image: header padded to 8 bytes (so the data section is aligned), data_len zero
 * bytes. The caller frees *buf. */
static size_t make_image(const char *hdr, size_t data_len, uint8_t **buf)
{
    size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
    size_t n = 8 + padded + data_len;
    *buf = calloc(1, n + 1);
    for (int i = 0; i < 8; i++) (*buf)[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(*buf + 8, hdr, hl);
    memset(*buf + 8 + hl, ' ', padded - hl);
    return n;
}

/* Expects the parse of (hdr, data_len) to fail with status want and a message containing sub. */
static void expect_reject(const char *what, const char *hdr, size_t data_len, tcq_status want, const char *sub)
{
    uint8_t *buf;
    size_t n = make_image(hdr, data_len, &buf);
    tcq_st_file *f = NULL;
    tcq_status s = tcq_st_parse(buf, n, "bad.safetensors", &f);
    CHECK(s == want, "%s: got %s (%s), want %s", what, tcq_status_str(s), tcq_last_error(), tcq_status_str(want));
    CHECK(f == NULL, "%s: object returned on failure", what);
    CHECK(strstr(tcq_last_error(), sub) != NULL, "%s: message '%s' lacks '%s'", what, tcq_last_error(), sub);
    CHECK(strstr(tcq_last_error(), "bad.safetensors") != NULL, "%s: message '%s' does not name the file", what,
          tcq_last_error());
    tcq_st_close(f);
    free(buf);
}

static void test_rejects(void)
{
    expect_reject("non-JSON", "{\"a\": ", 0, TCQ_ERR_FORMAT, "not valid JSON");
    expect_reject("array header", "[1, 2]", 0, TCQ_ERR_FORMAT, "not a JSON object");
    expect_reject("duplicate keys",
                  "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                  "\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                  8, TCQ_ERR_FORMAT, "duplicate");
    expect_reject("overlap",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                  16, TCQ_ERR_FORMAT, "overlap");
    expect_reject("span mismatch", "{\"x.weight\":{\"dtype\":\"F32\",\"shape\":[4,5],\"data_offsets\":[0,76]}}", 80,
                  TCQ_ERR_FORMAT, "tensor 'x.weight': shape [4, 5] x F32 = 80 bytes but data_offsets span 76");
    expect_reject("misaligned", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[2,10]}}", 16,
                  TCQ_ERR_FORMAT, "not a multiple of the F32 element size 4");
    expect_reject("unknown dtype", "{\"w\":{\"dtype\":\"F99\",\"shape\":[2],\"data_offsets\":[0,2]}}", 8,
                  TCQ_ERR_FORMAT, "tensor 'w': unknown dtype 'F99'");
    expect_reject("unsupported dtype", "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 8,
                  TCQ_ERR_UNSUPPORTED, "F8_E4M3");
    expect_reject("negative shape", "{\"w\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 8,
                  TCQ_ERR_FORMAT, "shape[0] is not a non-negative integer");
    expect_reject("real shape", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,0]}}", 8,
                  TCQ_ERR_FORMAT, "shape[0]");
    expect_reject("past data", "{\"w\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]}}", 8, TCQ_ERR_FORMAT,
                  "run past the data section");
    expect_reject("begin > end", "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,2]}}", 8, TCQ_ERR_FORMAT,
                  "end before they begin");
    expect_reject("offsets shape", "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4]}}", 8, TCQ_ERR_FORMAT,
                  "data_offsets must be");
    expect_reject("numel overflow",
                  "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 8,
                  TCQ_ERR_FORMAT, "overflow");
    expect_reject("bytes overflow", "{\"w\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}",
                  8, TCQ_ERR_FORMAT, "overflow");
    expect_reject("too many dims", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 8,
                  TCQ_ERR_UNSUPPORTED, "dimensions");
    expect_reject("unknown field", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 8,
                  TCQ_ERR_FORMAT, "unknown field 'x'");
    expect_reject("entry not object", "{\"w\":[1]}", 8, TCQ_ERR_FORMAT, "not a JSON object");
    expect_reject("metadata value", "{\"__metadata__\":{\"format\":1}}", 0, TCQ_ERR_FORMAT, "__metadata__");
    expect_reject("metadata kind", "{\"__metadata__\":[]}", 0, TCQ_ERR_FORMAT, "__metadata__");
    expect_reject("empty name", "{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 8, TCQ_ERR_FORMAT,
                  "empty name");
    expect_reject("trailing garbage", "{} x", 0, TCQ_ERR_FORMAT, "not valid JSON");

    /* Header length fields. */
    uint8_t img[16] = {0};
    tcq_st_file *f = NULL;
    CHECK(tcq_st_parse(img, 5, "short.safetensors", &f) == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "too short"),
          "5-byte file: %s", tcq_last_error());
    img[0] = 100;   /* 100-byte header in a 16-byte file */
    CHECK(tcq_st_parse(img, 16, "cut.safetensors", &f) == TCQ_ERR_FORMAT &&
              strstr(tcq_last_error(), "runs past the end of the file"),
          "header past end: %s", tcq_last_error());
    memset(img, 0, 8);
    img[3] = 0x10;  /* 268 MB */
    CHECK(tcq_st_parse(img, 16, "big.safetensors", &f) == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "exceeds the limit"),
          "oversized header: %s", tcq_last_error());
    CHECK(f == NULL, "no object on failure");

    /* An unpadded header leaves the data section misaligned for wide types. */
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    size_t hl = strlen(h);
    uint64_t *al = calloc(1, 8 + hl + 8 + 8);
    uint8_t *b = (uint8_t *)al;
    b[0] = (uint8_t)hl;
    memcpy(b + 8, h, hl);
    tcq_status s = tcq_st_parse(b, 8 + hl + 4, "unpadded.safetensors", &f);
    if ((8 + hl) % 4)
        CHECK(s == TCQ_ERR_FORMAT && strstr(tcq_last_error(), "misaligned address"), "unpadded: %s", tcq_last_error());
    else
        CHECK(s == TCQ_OK, "unpadded but aligned: %s", tcq_last_error());
    tcq_st_close(f);
    free(al);
}

static void test_holes_and_empty(void)
{
    /* A 4-byte hole between two tensors, a trailing hole, a zero-size tensor, metadata. */
    uint8_t *buf;
    size_t n = make_image("{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},"
                          "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                          "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]}}",
                          16, &buf);
    tcq_st_file *f = NULL;
    CHECK_OK(tcq_st_parse(buf, n, "holes", &f));
    if (f) {
        CHECK(tcq_st_count(f) == 3, "count %lld", (long long)tcq_st_count(f));
        CHECK(tcq_st_hole_bytes(f) == 8, "holes %llu", (unsigned long long)tcq_st_hole_bytes(f));
        CHECK(strcmp(tcq_st_tensor(f, 0)->name, "a") == 0, "data order");
        const tcq_tensor_info *b = tcq_st_find(f, "b");
        CHECK(b && b->ndim == 0 && b->numel == 1 && b->nbytes == 4, "scalar");
        const tcq_tensor_info *e = tcq_st_find(f, "e");
        CHECK(e && e->numel == 0 && e->nbytes == 0 && e->ndim == 2, "empty tensor");
        CHECK(tcq_st_find(f, "zz") == NULL && tcq_st_find(f, "") == NULL, "absent names");
        const int64_t want03[2] = {0, 3}, want0x[2] = {-1, 3}, want04[2] = {0, 4};
        CHECK_OK(tcq_tensor_check(e, "e", TCQ_DTYPE_F32, 2, want03));
        CHECK_OK(tcq_tensor_check(e, "e", TCQ_TENSOR_ANY_FLOAT, 2, want0x));
        CHECK_OK(tcq_tensor_check(e, "e", TCQ_TENSOR_ANY_DTYPE, -1, NULL));
        CHECK(tcq_tensor_check(e, "e", TCQ_DTYPE_F32, 2, want04) == TCQ_ERR_FORMAT &&
                  strstr(tcq_last_error(), "holes: tensor 'e': shape [0, 3], want [0, 4]"),
              "shape check message: %s", tcq_last_error());
        CHECK(tcq_tensor_check(e, "e", TCQ_DTYPE_BF16, -1, NULL) == TCQ_ERR_FORMAT &&
                  strstr(tcq_last_error(), "dtype F32, want BF16"),
              "dtype check message: %s", tcq_last_error());
        CHECK(tcq_tensor_check(tcq_st_find(f, "a"), "a", TCQ_TENSOR_ANY_FLOAT, -1, NULL) == TCQ_ERR_FORMAT,
              "U8 is not a float");
        CHECK(tcq_tensor_check(NULL, "gone", TCQ_TENSOR_ANY_DTYPE, -1, NULL) == TCQ_ERR_NOT_FOUND &&
                  strstr(tcq_last_error(), "'gone'"),
              "missing tensor message");
        CHECK(tcq_st_metadata(f, "k") && strcmp(tcq_st_metadata(f, "k"), "v") == 0, "metadata");
        CHECK(tcq_st_metadata(f, "nope") == NULL, "absent metadata");
    }
    tcq_st_close(f);
    free(buf);
}

typedef struct rt_tensor {
    const char *name;
    tcq_dtype dt;
    int ndim;
    int64_t shape[3];
} rt_tensor;

static void test_round_trip(uint64_t *rng)
{
    const rt_tensor spec[] = {
        {"model.layers.0.w", TCQ_DTYPE_F32, 2, {3, 5}}, {"b16", TCQ_DTYPE_BF16, 1, {7}},
        {"bytes", TCQ_DTYPE_U8, 1, {3}},                {"i64", TCQ_DTYPE_I64, 2, {2, 2}},
        {"empty", TCQ_DTYPE_U32, 2, {0, 4}},            {"scalar", TCQ_DTYPE_F64, 0, {0}},
        {"flags", TCQ_DTYPE_BOOL, 1, {5}},              {"h", TCQ_DTYPE_F16, 3, {2, 1, 3}},
        {"i8", TCQ_DTYPE_I8, 1, {9}},                   {"u16", TCQ_DTYPE_U16, 1, {1}},
    };
    enum { N = sizeof spec / sizeof spec[0] };
    void *data[N];
    size_t nb[N];
    tcq_st_writer *w = NULL;
    CHECK_OK(tcq_st_writer_create(&w));
    for (int i = 0; i < N; i++) {
        int64_t numel = 1;
        for (int d = 0; d < spec[i].ndim; d++) numel *= spec[i].shape[d];
        nb[i] = (size_t)numel * tcq_dtype_size(spec[i].dt);
        data[i] = malloc(nb[i] + 1);
        for (size_t j = 0; j < nb[i]; j++) ((uint8_t *)data[i])[j] = (uint8_t)test_rand(rng);
        if (i % 2)
            CHECK_OK(tcq_st_writer_add_copy(w, spec[i].name, spec[i].dt, spec[i].ndim, spec[i].shape, data[i], nb[i]));
        else
            CHECK_OK(tcq_st_writer_add(w, spec[i].name, spec[i].dt, spec[i].ndim, spec[i].shape, data[i], nb[i]));
    }
    CHECK_OK(tcq_st_writer_metadata(w, "note", "round trip"));
    /* Writer-side rejections. */
    const int64_t sh[1] = {4};
    CHECK(tcq_st_writer_add(w, "bad", TCQ_DTYPE_F32, 1, sh, data[0], 15) == TCQ_ERR_INVALID_ARG, "size mismatch");
    CHECK(tcq_st_writer_add(w, "__metadata__", TCQ_DTYPE_U8, 1, sh, data[0], 4) == TCQ_ERR_INVALID_ARG, "reserved name");
    const int64_t neg[1] = {-4};
    CHECK(tcq_st_writer_add(w, "neg", TCQ_DTYPE_U8, 1, neg, data[0], 4) == TCQ_ERR_INVALID_ARG, "negative dim");
    CHECK(tcq_st_writer_count(w) == N, "writer count");
    mkdir(tpath("single"), 0755);
    CHECK_OK(tcq_st_writer_write(w, tpath("single/model.safetensors")));
    tcq_st_writer_free(w);

    tcq_st_file *f = NULL;
    CHECK_OK(tcq_st_open(tpath("single/model.safetensors"), &f));
    if (f) {
        CHECK(tcq_st_count(f) == N, "count %lld", (long long)tcq_st_count(f));
        /* Hugging Face's reader needs spans that tile the data section exactly. */
        CHECK(tcq_st_hole_bytes(f) == 0, "written file has %llu hole bytes", (unsigned long long)tcq_st_hole_bytes(f));
        CHECK(tcq_st_metadata(f, "format") && !strcmp(tcq_st_metadata(f, "format"), "pt"), "default format");
        CHECK(tcq_st_metadata(f, "note") && !strcmp(tcq_st_metadata(f, "note"), "round trip"), "metadata");
        /* Conversion to f32 of the float tensors. */
        const tcq_tensor_info *t32 = tcq_st_find(f, "model.layers.0.w"), *t16 = tcq_st_find(f, "h"),
                              *tb = tcq_st_find(f, "b16"), *t64 = tcq_st_find(f, "scalar");
        float buf[16];
        CHECK_OK(tcq_tensor_to_f32(t32, buf, 15));
        CHECK(memcmp(buf, data[0], 60) == 0, "F32 copy");
        CHECK_OK(tcq_tensor_to_f32(t16, buf, 6));
        int same = 1;
        for (int i = 0; i < 6; i++) {
            float want = tcq_f16_to_f32(((const uint16_t *)data[7])[i]);
            same &= memcmp(&buf[i], &want, 4) == 0 || (buf[i] != buf[i] && want != want);
        }
        CHECK(same, "F16 conversion");
        CHECK_OK(tcq_tensor_to_f32(tb, buf, 7));
        same = 1;
        for (int i = 0; i < 7; i++) {
            float want = tcq_bf16_to_f32(((const uint16_t *)data[1])[i]);
            same &= memcmp(&buf[i], &want, 4) == 0 || (buf[i] != buf[i] && want != want);
        }
        CHECK(same, "BF16 conversion");
        CHECK_OK(tcq_tensor_to_f32(t64, buf, 1));
        double dv;
        memcpy(&dv, data[5], 8);
        CHECK(buf[0] == (float)dv || (buf[0] != buf[0] && dv != dv), "F64 conversion");
        CHECK(tcq_tensor_to_f32(t32, buf, 14) == TCQ_ERR_INVALID_ARG, "wrong count");
        CHECK(tcq_tensor_to_f32(tcq_st_find(f, "bytes"), buf, 3) == TCQ_ERR_UNSUPPORTED, "U8 to f32");
        for (int i = 0; i < N; i++) {
            const tcq_tensor_info *t = tcq_st_find(f, spec[i].name);
            CHECK(t != NULL, "%s missing", spec[i].name);
            if (!t) continue;
            CHECK(t->dtype == spec[i].dt && t->ndim == spec[i].ndim, "%s dtype/ndim", spec[i].name);
            for (int d = 0; d < spec[i].ndim; d++) CHECK(t->shape[d] == spec[i].shape[d], "%s shape", spec[i].name);
            CHECK(t->nbytes == nb[i] && memcmp(t->data, data[i], nb[i]) == 0, "%s bytes", spec[i].name);
            CHECK((uintptr_t)t->data % tcq_dtype_size(t->dtype) == 0, "%s data aligned", spec[i].name);
            CHECK(!strcmp(t->file, tpath("single/model.safetensors")), "%s file", spec[i].name);
        }
        /* Data order: element size descending, then the order added. */
        for (int64_t i = 1; i < tcq_st_count(f); i++) {
            const tcq_tensor_info *a = tcq_st_tensor(f, i - 1), *b = tcq_st_tensor(f, i);
            CHECK(tcq_dtype_size(a->dtype) >= tcq_dtype_size(b->dtype), "order at %lld: %s before %s", (long long)i,
                  a->name, b->name);
            CHECK((const uint8_t *)a->data + a->nbytes == (const uint8_t *)b->data, "contiguous at %lld", (long long)i);
        }
        CHECK(!strcmp(tcq_st_tensor(f, 0)->name, "i64") && !strcmp(tcq_st_tensor(f, 1)->name, "scalar"),
              "8-byte tensors first, in the order added");
        CHECK((uintptr_t)tcq_st_tensor(f, 0)->data % 8 == 0, "data section 8-byte aligned");
    }
    tcq_st_close(f);

    /* The same file as a set: by path, and by its directory. */
    tcq_st_set *s = NULL;
    CHECK_OK(tcq_st_set_open(tpath("single"), &s));
    CHECK(s && tcq_st_set_count(s) == N && tcq_st_set_find(s, "h") && !tcq_st_set_find(s, "nope"), "set from dir");
    CHECK(s && !strcmp(tcq_st_set_dir(s), tpath("single")), "set dir");
    tcq_st_set_close(s);
    s = NULL;
    CHECK_OK(tcq_st_set_open(tpath("single/model.safetensors"), &s));
    CHECK(s && tcq_st_set_count(s) == N && tcq_st_set_file_count(s) == 1, "set from file");
    CHECK(s && !strcmp(tcq_st_set_dir(s), tpath("single")), "set dir of a file");
    tcq_st_set_close(s);

    /* Truncations of the written file. */
    FILE *fp = fopen(tpath("single/model.safetensors"), "rb");
    static uint8_t img[1 << 16];
    size_t len = fp ? fread(img, 1, sizeof img, fp) : 0;
    if (fp) fclose(fp);
    CHECK(len > 100, "read back %zu bytes", len);
    const size_t cuts[] = {0, 5, 8, 20, len - 1};
    const char *subs[] = {"too short", "too short", "runs past the end", "runs past the end", "run past the data section"};
    for (int c = 0; c < 5; c++) {
        write_bytes(tpath("cut.safetensors"), img, cuts[c]);
        f = NULL;
        tcq_status st = tcq_st_open(tpath("cut.safetensors"), &f);
        CHECK(st == TCQ_ERR_FORMAT && strstr(tcq_last_error(), subs[c]) && strstr(tcq_last_error(), "cut.safetensors"),
              "cut at %zu: %s", cuts[c], tcq_last_error());
        tcq_st_close(f);
    }
    CHECK(tcq_st_open(tpath("absent.safetensors"), &f) == TCQ_ERR_NOT_FOUND, "absent file");
    CHECK(tcq_st_set_open(tmpdir, &s) == TCQ_ERR_NOT_FOUND && strstr(tcq_last_error(), "model.safetensors"),
          "directory without a model: %s", tcq_last_error());

    /* Duplicate names are caught at write. */
    CHECK_OK(tcq_st_writer_create(&w));
    CHECK_OK(tcq_st_writer_add(w, "x", TCQ_DTYPE_U8, 1, sh, data[0], 4));
    CHECK_OK(tcq_st_writer_add(w, "x", TCQ_DTYPE_U8, 1, sh, data[0], 4));
    CHECK(tcq_st_writer_write(w, tpath("dup.safetensors")) == TCQ_ERR_INVALID_ARG && strstr(tcq_last_error(), "twice"),
          "duplicate write: %s", tcq_last_error());
    CHECK(access(tpath("dup.safetensors"), F_OK) != 0, "nothing written on failure");
    tcq_st_writer_free(w);
    for (int i = 0; i < N; i++) free(data[i]);
}

static void write_shard(const char *name, int n, const char *const *names)
{
    tcq_st_writer *w = NULL;
    CHECK_OK(tcq_st_writer_create(&w));
    static const float v[6] = {1, 2, 3, 4, 5, 6};
    const int64_t sh[2] = {2, 3};
    for (int i = 0; i < n; i++) CHECK_OK(tcq_st_writer_add(w, names[i], TCQ_DTYPE_F32, 2, sh, v, sizeof v));
    CHECK_OK(tcq_st_writer_write(w, tpath(name)));
    tcq_st_writer_free(w);
}

static void write_text(const char *name, const char *text) { write_bytes(tpath(name), text, strlen(text)); }

static void expect_set_fail(const char *what, tcq_status want, const char *sub)
{
    tcq_st_set *s = NULL;
    tcq_status st = tcq_st_set_open(tpath("sharded"), &s);
    CHECK(st == want && s == NULL && strstr(tcq_last_error(), sub), "%s: %s: %s (want '%s')", what,
          tcq_status_str(st), tcq_last_error(), sub);
    tcq_st_set_close(s);
}

static void test_sharded(void)
{
    mkdir(tpath("sharded"), 0755);
    const char *a[] = {"t.a1", "t.a2"}, *b[] = {"t.b1"};
    write_shard("sharded/a.safetensors", 2, a);
    write_shard("sharded/b.safetensors", 1, b);
    const char *good = "{\"metadata\":{\"total_size\":72},\"weight_map\":{\"t.a1\":\"a.safetensors\","
                       "\"t.b1\":\"b.safetensors\",\"t.a2\":\"a.safetensors\"}}";
    write_text("sharded/model.safetensors.index.json", good);
    tcq_st_set *s = NULL;
    CHECK_OK(tcq_st_set_open(tpath("sharded"), &s));
    if (s) {
        CHECK(tcq_st_set_count(s) == 3 && tcq_st_set_file_count(s) == 2, "sharded count");
        const tcq_tensor_info *t = tcq_st_set_find(s, "t.b1");
        CHECK(t && strstr(t->file, "b.safetensors") && t->numel == 6 && ((const float *)t->data)[5] == 6.0f, "t.b1");
        CHECK(tcq_st_set_find(s, "t.a2") && !tcq_st_set_find(s, "t.c"), "find");
        CHECK(tcq_st_set_tensor(s, 3) == NULL && tcq_st_set_tensor(s, 0) != NULL, "index bounds");
    }
    tcq_st_set_close(s);
    s = NULL;
    CHECK_OK(tcq_st_set_open(tpath("sharded/model.safetensors.index.json"), &s));
    CHECK(s && tcq_st_set_count(s) == 3, "index file given directly");
    tcq_st_set_close(s);

    write_text("sharded/model.safetensors.index.json",
               "{\"weight_map\":{\"t.a1\":\"a.safetensors\",\"t.a2\":\"a.safetensors\",\"t.b1\":\"c.safetensors\"}}");
    expect_set_fail("missing shard", TCQ_ERR_NOT_FOUND, "c.safetensors");
    write_text("sharded/model.safetensors.index.json",
               "{\"weight_map\":{\"t.a1\":\"a.safetensors\",\"t.a2\":\"a.safetensors\",\"t.b1\":\"b.safetensors\","
               "\"t.b2\":\"b.safetensors\"}}");
    expect_set_fail("tensor not in its shard", TCQ_ERR_NOT_FOUND, "index names tensor 't.b2' in shard 'b.safetensors'");
    write_text("sharded/model.safetensors.index.json",
               "{\"weight_map\":{\"t.a1\":\"a.safetensors\",\"t.b1\":\"b.safetensors\"}}");
    expect_set_fail("unlisted tensor", TCQ_ERR_FORMAT, "holds tensor 't.a2', which the index does not list");
    write_text("sharded/model.safetensors.index.json",
               "{\"weight_map\":{\"t.a1\":\"a.safetensors\",\"t.a1\":\"b.safetensors\"}}");
    expect_set_fail("duplicate index key", TCQ_ERR_FORMAT, "duplicate");
    write_text("sharded/model.safetensors.index.json", "{\"weight_map\":{\"t.a1\":\"../a.safetensors\"}}");
    expect_set_fail("path escape", TCQ_ERR_FORMAT, "not a file name");
    write_text("sharded/model.safetensors.index.json", "{\"weight_map\":[]}");
    expect_set_fail("no weight_map", TCQ_ERR_FORMAT, "weight_map");
    write_text("sharded/model.safetensors.index.json", "{\"weight_map\":");
    expect_set_fail("bad index JSON", TCQ_ERR_FORMAT, "not valid JSON");

    /* The same name in two shards. */
    const char *b2[] = {"t.b1", "t.a1"};
    write_shard("sharded/b.safetensors", 2, b2);
    write_text("sharded/model.safetensors.index.json", good);
    expect_set_fail("name in two shards", TCQ_ERR_FORMAT, "also stored in shard 'b.safetensors'");
    /* A bad shard names the shard and the index. */
    write_text("sharded/b.safetensors", "garbage!garbage!");
    expect_set_fail("corrupt shard", TCQ_ERR_FORMAT, "shard 'b.safetensors'");
}

/* Shards and index written by the library itself. */
static void test_index_writer(void)
{
    mkdir(tpath("written"), 0755);
    static const uint16_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const int64_t sh[1] = {8};
    tcq_st_writer *w[2] = {NULL, NULL};
    const char *names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(tcq_st_writer_create(&w[i]));
        for (int j = 0; j < 3; j++) {
            char name[32];
            snprintf(name, sizeof name, "layer.%d.w%d", i, j);
            CHECK_OK(tcq_st_writer_add(w[i], name, TCQ_DTYPE_BF16, 1, sh, v, sizeof v));
        }
        char p[128];
        snprintf(p, sizeof p, "written/%s", names[i]);
        CHECK_OK(tcq_st_writer_write(w[i], tpath(p)));
    }
    CHECK_OK(tcq_st_index_write(tpath("written/model.safetensors.index.json"), 2, names,
                                (const tcq_st_writer *const *)w));
    tcq_st_set *s = NULL;
    CHECK_OK(tcq_st_set_open(tpath("written"), &s));
    CHECK(s && tcq_st_set_count(s) == 6 && tcq_st_set_file_count(s) == 2, "written shards");
    const tcq_tensor_info *t = s ? tcq_st_set_find(s, "layer.1.w2") : NULL;
    CHECK(t && strstr(t->file, names[1]) && ((const uint16_t *)t->data)[7] == 8, "written shard tensor");
    tcq_st_set_close(s);
    /* A name in two writers is refused. */
    const tcq_st_writer *twice[2] = {w[0], w[0]};
    CHECK(tcq_st_index_write(tpath("written/x.index.json"), 2, names, twice) == TCQ_ERR_INVALID_ARG &&
              strstr(tcq_last_error(), "two shards"),
          "duplicate across writers: %s", tcq_last_error());
    for (int i = 0; i < 2; i++) tcq_st_writer_free(w[i]);
}

static void test_tinyqwen(void)
{
    if (!test_have_data("tinyqwen/model.safetensors.index.json")) return;
    const char *dir = test_data_path("tinyqwen");
    tcq_st_set *s = NULL;
    CHECK_OK(tcq_st_set_open(dir, &s));
    if (!s) return;
    /* 8 layers x 11 tensors (q,k,v,o,q_norm,k_norm,gate,up,down, 2 norms) + embed + final norm. */
    CHECK(tcq_st_set_count(s) == 90, "tinyqwen has %lld tensors", (long long)tcq_st_set_count(s));
    CHECK(tcq_st_set_file_count(s) == 5, "tinyqwen shards %d", tcq_st_set_file_count(s));
    const tcq_tensor_info *t = tcq_st_set_find(s, "model.embed_tokens.weight");
    CHECK(t && t->dtype == TCQ_DTYPE_BF16 && t->ndim == 2 && t->shape[0] == 8192 && t->shape[1] == 512,
          "embed_tokens");
    t = tcq_st_set_find(s, "model.layers.7.mlp.down_proj.weight");
    CHECK(t && t->shape[0] == 512 && t->shape[1] == 1536, "down_proj");
    int64_t params = 0;
    for (int64_t i = 0; i < tcq_st_set_count(s); i++) params += tcq_st_set_tensor(s, i)->numel;
    CHECK(params > 29000000 && params < 30000000, "params %lld", (long long)params);
    tcq_st_set_close(s);
}

static void test_dtypes(void)
{
    for (int i = 0; i < TCQ_DTYPE_COUNT; i++) {
        tcq_dtype d;
        CHECK(tcq_dtype_parse(tcq_dtype_name((tcq_dtype)i), &d) == TCQ_OK && d == (tcq_dtype)i, "dtype %d", i);
        CHECK(tcq_dtype_size((tcq_dtype)i) >= 1, "size %d", i);
    }
    CHECK(tcq_dtype_size(TCQ_DTYPE_BF16) == 2 && tcq_dtype_size(TCQ_DTYPE_I64) == 8, "sizes");
}

int main(void)
{
    uint64_t rng = test_seed();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tcq-io-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_dtypes();
    test_rejects();
    test_holes_and_empty();
    test_round_trip(&rng);
    test_sharded();
    test_index_writer();
    test_tinyqwen();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (!test_failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_done("test_io_safetensors");
}
