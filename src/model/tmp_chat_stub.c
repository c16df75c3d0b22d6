/* TEMPORARY: tcq_chat_render is declared by the tokenizer module but not implemented on main
 * yet.  Delete this file when it lands. */
#include "core/internal.h"

tcq_status tcq_chat_render(const char *template_text, const tcq_chat_message *messages, size_t n,
                           const tcq_chat_opts *opts, char **out)
{
    (void)template_text, (void)messages, (void)n, (void)opts;
    *out = NULL;
    return tcq_fail(TCQ_ERR_UNSUPPORTED, "chat templates are not implemented yet");
}
