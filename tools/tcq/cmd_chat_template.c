/* tcq chat-template: render a model's chat template for a conversation (and tokenize it). */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: tcq chat-template MODEL_DIR|tokenizer.json|TEMPLATE.jinja (--messages FILE.json | --user TEXT)\n"
               "                         [--system TEXT] [--add-generation-prompt] [--thinking on|off]\n"
               "                         [--tools FILE.json] [--bos STR] [--eos STR] [--ids]\n"
               "  FILE.json: [{\"role\": \"user\", \"content\": \"...\", ...}, ...] (other fields such as\n"
               "  tool_calls reach the template too).  --ids prints the token ids of the rendering\n"
               "  (special tokens parsed, no BOS added) instead of the text.\n");
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p) p[n] = 0;
    fclose(f);
    return p;
}

int cmd_chat_template(int argc, char **argv)
{
    const char *path = NULL, *msgs_path = NULL, *user = NULL, *system = NULL, *tools_path = NULL;
    tcq_chat_opts o = {.enable_thinking = -1};
    int ids = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--messages") && i + 1 < argc) msgs_path = argv[++i];
        else if (!strcmp(argv[i], "--user") && i + 1 < argc) user = argv[++i];
        else if (!strcmp(argv[i], "--system") && i + 1 < argc) system = argv[++i];
        else if (!strcmp(argv[i], "--tools") && i + 1 < argc) tools_path = argv[++i];
        else if (!strcmp(argv[i], "--add-generation-prompt")) o.add_generation_prompt = 1;
        else if (!strcmp(argv[i], "--bos") && i + 1 < argc) o.bos_token = argv[++i];
        else if (!strcmp(argv[i], "--eos") && i + 1 < argc) o.eos_token = argv[++i];
        else if (!strcmp(argv[i], "--ids")) ids = 1;
        else if (!strcmp(argv[i], "--thinking") && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "on") && strcmp(v, "off")) { fprintf(stderr, "tcq chat-template: --thinking on|off\n"); return 2; }
            o.enable_thinking = !strcmp(v, "on");
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "tcq chat-template: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else path = argv[i];
    }
    if (!path || !msgs_path == !user) { usage(stderr); return 2; }
    size_t pl = strlen(path);
    int is_jinja = pl > 6 && !strcmp(path + pl - 6, ".jinja");
    tcq_tokenizer *tok = NULL;
    char *tmpl = NULL, *tools = NULL, *out = NULL;
    tcq_chat_message *m = NULL;
    size_t n = 0;
    json_t *jm = NULL;
    int rc = 1;
    tcq_status s;
    if (is_jinja) {
        if (!(tmpl = read_text(path))) { fprintf(stderr, "tcq chat-template: cannot read %s\n", path); goto done; }
    } else if ((s = tcq_tokenizer_load(path, &tok)) != TCQ_OK) {
        rc = cli_fail(s, "chat-template");
        goto done;
    }
    if (tools_path && !(tools = read_text(tools_path))) { fprintf(stderr, "tcq chat-template: cannot read %s\n", tools_path); goto done; }
    o.tools_json = tools;
    if (msgs_path) {
        json_error_t err;
        jm = json_load_file(msgs_path, 0, &err);
        if (!json_is_array(jm)) {
            fprintf(stderr, "tcq chat-template: %s: line %d: %s\n", msgs_path, err.line, jm ? "not a JSON array" : err.text);
            goto done;
        }
        n = json_array_size(jm);
        m = calloc(n + 1, sizeof *m);
        for (size_t i = 0; m && i < n; i++) {
            json_t *e = json_array_get(jm, i), *rest = json_deep_copy(e);
            m[i].role = json_string_value(json_object_get(e, "role"));
            m[i].content = json_string_value(json_object_get(e, "content"));
            json_object_del(rest, "role");
            json_object_del(rest, "content");
            if (json_object_size(rest)) m[i].extra_json = json_dumps(rest, 0);
            json_decref(rest);
        }
    } else {
        m = calloc(2, sizeof *m);
        if (m && system) m[n++] = (tcq_chat_message){.role = "system", .content = system};
        if (m) m[n++] = (tcq_chat_message){.role = "user", .content = user};
    }
    if (!m) { fprintf(stderr, "tcq chat-template: out of memory\n"); goto done; }
    s = tok ? tcq_tokenizer_apply_chat(tok, m, n, &o, &out) : tcq_chat_render(tmpl, m, n, &o, &out);
    if (s != TCQ_OK) { rc = cli_fail(s, "chat-template"); goto done; }
    if (ids && tok) {
        int32_t *t = NULL;
        size_t nt = 0;
        if ((s = tcq_tokenizer_encode_alloc(tok, out, strlen(out), 0, &t, &nt)) != TCQ_OK) { rc = cli_fail(s, "chat-template"); goto done; }
        for (size_t i = 0; i < nt; i++) printf(i ? " %d" : "%d", t[i]);
        printf("\n");
        free(t);
    } else {
        fputs(out, stdout);
    }
    rc = 0;
done:
    if (m && msgs_path)
        for (size_t i = 0; i < n; i++) free((char *)m[i].extra_json);
    free(m);
    json_decref(jm);
    free(out);
    free(tools);
    free(tmpl);
    tcq_tokenizer_free(tok);
    return rc;
}
