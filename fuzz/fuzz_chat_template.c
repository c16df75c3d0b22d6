/* libFuzzer: any template text renders or fails cleanly (no crash, no leak). */
#include "tcq.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1);
    if (!t) return 0;
    memcpy(t, data, size);
    t[size] = 0;
    tcq_chat_message m[2] = {{.role = "system", .content = "sys"}, {.role = "user", .content = "hi <think>x</think>"}};
    tcq_chat_opts o = {.add_generation_prompt = 1, .enable_thinking = 0, .bos_token = "<s>", .eos_token = "</s>"};
    char *out = NULL;
    if (tcq_chat_render(t, m, 2, &o, &out) == TCQ_OK) free(out);
    free(t);
    return 0;
}
