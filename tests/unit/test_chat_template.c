/* Chat templates: renderings equal to Python jinja2's in transformers' environment
 * (tests/ref/gen_chat_expected.py made tests/data/chat/), and template errors. */
#include "test.h"

#include <jansson.h>

static void first_diff(const char *a, const char *b)
{
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    size_t s = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  first difference at byte %zu:\n  got : \"%.80s\"\n  want: \"%.80s\"\n", i, a + s, b + s);
}

static void test_cases(void)
{
    json_error_t err;
    json_t *m = json_load_file(TCQ_SOURCE_DIR "/tests/data/chat/cases.json", 0, &err);
    CHECK(m != NULL, "cases.json: %s", err.text);
    if (!m) return;
    tcq_tokenizer *qwen = NULL, *tiny = NULL;
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/tokenizers/qwen3", &qwen));
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/tinyqwen", &tiny));
    char *features = test_slurp(TCQ_SOURCE_DIR "/tests/data/chat/features.jinja", NULL);
    CHECK(features != NULL, "features.jinja");
    size_t i;
    json_t *c;
    int n_cases = 0;
    json_array_foreach(json_object_get(m, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *tn = json_string_value(json_object_get(c, "template"));
        const char *tmpl = json_string_value(json_object_get(c, "template_text"));
        if (!tmpl)
            tmpl = !strcmp(tn, "qwen3") ? tcq_tokenizer_chat_template(qwen)
                 : !strcmp(tn, "tinyqwen") ? tcq_tokenizer_chat_template(tiny) : features;
        CHECK(tmpl != NULL, "%s: no template %s", name, tn ? tn : "");
        if (!tmpl) continue;
        json_t *msgs = json_object_get(c, "messages");
        size_t nm = json_array_size(msgs);
        tcq_chat_message *mm = calloc(nm + 1, sizeof *mm);
        char **extra = calloc(nm + 1, sizeof *extra);
        for (size_t k = 0; k < nm; k++) {
            json_t *jm = json_deep_copy(json_array_get(msgs, k));
            mm[k].role = json_string_value(json_object_get(json_array_get(msgs, k), "role"));
            mm[k].content = json_string_value(json_object_get(json_array_get(msgs, k), "content"));
            json_object_del(jm, "role");
            json_object_del(jm, "content");
            if (json_object_size(jm)) mm[k].extra_json = extra[k] = json_dumps(jm, 0);   /* tool_calls, ... */
            json_decref(jm);
        }
        json_t *tools = json_object_get(c, "tools");
        char *tools_json = tools ? json_dumps(tools, 0) : NULL;
        tcq_chat_opts o = {.add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt")),
                           .enable_thinking = (int)json_integer_value(json_object_get(c, "enable_thinking")),
                           .bos_token = "<s>", .eos_token = "<|im_end|>", .tools_json = tools_json};
        char *out = NULL;
        tcq_status s = tcq_chat_render(tmpl, mm, nm, &o, &out);
        const char *want_err = json_string_value(json_object_get(c, "error"));
        if (want_err) {
            CHECK(s == TCQ_ERR_INVALID_ARG && strstr(tcq_last_error(), want_err), "%s: want error '%s', got %s: %s", name,
                  want_err, tcq_status_str(s), tcq_last_error());
        } else {
            char path[1024];
            snprintf(path, sizeof path, "%s/tests/data/chat/%s.txt", TCQ_SOURCE_DIR, name);
            char *want = test_slurp(path, NULL);
            CHECK(s == TCQ_OK, "%s: %s", name, tcq_last_error());
            int same = out && want && strcmp(out, want) == 0;
            CHECK(same, "%s: rendering differs from jinja2's", name);
            if (!same && out && want) first_diff(out, want);
            free(want);
        }
        free(out);
        for (size_t k = 0; k < nm; k++) free(extra[k]);
        free(extra);
        free(tools_json);
        free(mm);
        n_cases++;
    }
    CHECK(n_cases >= 25, "only %d cases", n_cases);
    free(features);
    tcq_tokenizer_free(qwen);
    tcq_tokenizer_free(tiny);
    json_decref(m);
}

static void expect_error(const char *tmpl, const char *needle)
{
    tcq_chat_message msg = {.role = "user", .content = "hi"};
    char *out = NULL;
    tcq_status s = tcq_chat_render(tmpl, &msg, 1, NULL, &out);
    CHECK(s == TCQ_ERR_FORMAT && !out && strstr(tcq_last_error(), needle), "template \"%.60s\": %s: %s (want '%s')", tmpl,
          tcq_status_str(s), tcq_last_error(), needle);
    free(out);
}

int main(void)
{
    test_cases();
    expect_error("a\n{% if x %}b", "missing {% endif %}");
    expect_error("{{ messages | nosuchfilter }}", "unknown filter 'nosuchfilter'");
    expect_error("x\ny\n{{ 1 + }}", "line 3");
    expect_error("{{ 'abc }}", "unclosed");
    expect_error("{% include 'x' %}", "unsupported tag 'include'");
    expect_error("{{ nofunc(1) }}", "'nofunc' is undefined");
    expect_error("{{ 1 / 0 }}", "division by zero");
    expect_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursion");
    /* no input overflows the stack */
    char deep[3 * 5000 + 16];
    strcpy(deep, "{{ ");
    for (int i = 0; i < 5000; i++) strcat(deep, "(");
    strcat(deep, "1");
    for (int i = 0; i < 5000; i++) strcat(deep, ")");
    strcat(deep, " }}");
    expect_error(deep, "nested deeper than");
    strcpy(deep, "{{ ");
    for (int i = 0; i < 5000; i++) strcat(deep, "-");
    strcat(deep, "1 }}");
    expect_error(deep, "nested deeper than");
    strcpy(deep, "{{ ");
    for (int i = 0; i < 3000; i++) strcat(deep, "not ");
    strcat(deep, "1 }}");
    expect_error(deep, "nested deeper than");
    expect_error("{% set ns = namespace(x=1) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
                 "nested deeper than");
    /* size bounds: an error, not gigabytes (fuzz: `[3]*33333333` rendered ran out of memory) */
    expect_error("{{ [3] * 33333333 }}", "too large");
    expect_error("{{ 'ab' * 600000 }}", "too large");
    expect_error("{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}", "rendered text exceeds");
    expect_error("{% set ns = namespace(l=[]) %}{% for i in range(400) %}{% set ns.l = ns.l + [1] * 1000000 %}{% endfor %}",
                 "MiB");
    /* every loop iteration takes arena memory, so the arena bound also bounds the running time */
    expect_error("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", "MiB");
    /* bad JSON arguments are the caller's error */
    tcq_chat_message bad = {.role = "user", .content = "x", .extra_json = "[1]"};
    char *out = NULL;
    CHECK(tcq_chat_render("{{ messages }}", &bad, 1, NULL, &out) == TCQ_ERR_INVALID_ARG && !out, "extra_json array");
    tcq_chat_opts topt = {.tools_json = "{not json"};
    CHECK(tcq_chat_render("{{ tools }}", &bad, 0, &topt, &out) == TCQ_ERR_INVALID_ARG && !out, "bad tools_json");
    /* the tokenizer's own template and special tokens */
    tcq_tokenizer *tok = NULL;
    CHECK_OK(tcq_tokenizer_load(TEST_REPO_DATA "/tinyqwen", &tok));
    tcq_chat_message hi = {.role = "user", .content = "hi"};
    tcq_chat_opts gen = {.add_generation_prompt = 1, .enable_thinking = -1};
    CHECK_OK(tcq_tokenizer_apply_chat(tok, &hi, 1, &gen, &out));
    CHECK(out && !strcmp(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), "apply_chat: %s", out ? out : "");
    free(out);
    tcq_tokenizer_free(tok);
    return test_done("test_chat_template");
}
