/* tcq: entry point and command table. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const cli_command commands[] = {
    {"demo", "run the 2-bit tinyqwen in models/: text, bits/weight, tok/s (--codec: the codec alone)", cmd_demo},
    {"logits", "write the f32 logits of a token sequence to a safetensors file", cmd_logits},
    {"run", "generate text from a prompt, streamed (sampling options, --chat)", cmd_run},
    {"chat", "interactive chat through the model's chat template", cmd_chat},
    {"perplexity", "perplexity of a model over a text file, in windows", cmd_perplexity},
    {"kl", "KL(ref || model), its 95th percentile and top-1 agreement over a text file", cmd_kl},
    {"inspect", "list the tensors of a safetensors file or model directory, with quantization", cmd_inspect},
    {"tokenize", "print the token ids of a text (--json, --pieces)", cmd_tokenize},
    {"quantize", "rotate and trellis-code a llama/qwen3 model directory", cmd_quantize},
    {"codec", "codec MSE on N(0,1) samples vs the rate-distortion bound, encoder speed", cmd_codec},
    {"bench", "benchmarks: tcq bench encode|kernels|model", cmd_bench},
    {"chat-template", "render the chat template for a conversation (or its token ids)", cmd_chat_template},
    {"serve", "an OpenAI-compatible HTTP server with continuous batching", cmd_serve},
    {"cuda-bench", "CUDA kernels and GPU encoder vs copy bandwidth and cuBLAS (needs -DTCQ_CUDA=ON)", bench_kernels_cuda},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *f)
{
    fprintf(f, "tcq %s: trellis-coded quantization for language models\n\n"
               "usage: tcq COMMAND [options]   (tcq COMMAND --help for its options)\n\ncommands:\n",
            tcq_version());
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nenvironment: TCQ_ISA=scalar|avx2|avx512 pins the CPU code path.\n");
}

int cli_fail(tcq_status s, const char *what)
{
    const char *msg = tcq_last_error();
    fprintf(stderr, "tcq: %s: %s%s%s\n", what, tcq_status_str(s), *msg ? ": " : "", msg);
    return 1;
}

int cli_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

int cli_parse_long(const char *flag, const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno) {
        fprintf(stderr, "tcq: %s needs an integer, got '%s'\n", flag, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_double(const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno) {
        fprintf(stderr, "tcq: %s needs a number, got '%s'\n", flag, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_shape(const char *flag, const char *s, long long *out, long long *in)
{
    long long o = 0, n = 0;
    char x = 0, tail = 0;
    if (!s || sscanf(s, "%lld%c%lld%c", &o, &x, &n, &tail) != 3 || x != 'x' || o <= 0 || n <= 0 || o % 256 || n % 256) {
        fprintf(stderr, "tcq: %s needs OUTxIN, both positive multiples of 256, got '%s'\n", flag, s ? s : "");
        return -1;
    }
    *out = o, *in = n;
    return 0;
}

int cli_parse_int_list(const char *s, int *out, int max)
{
    int n = 0;
    const char *p = s;
    while (p && *p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || (*end && *end != ',') || n >= max) return -1;
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n ? n : -1;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("tcq %s\n", tcq_version());
        return 0;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tcq: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
