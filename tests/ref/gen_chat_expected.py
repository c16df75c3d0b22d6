#!/usr/bin/env python3
"""Expected chat-template renderings for tests/unit/test_chat_template.c, made with Python jinja2
in the environment transformers' apply_chat_template uses: ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, transformers' tojson filter
(json.dumps, ensure_ascii=False) and raise_exception; variables messages, tools=None,
documents=None, add_generation_prompt, the special tokens, and enable_thinking when given.

Writes tests/data/chat/cases.json (the cases) and tests/data/chat/<name>.txt (the renderings).
usage: gen_chat_expected.py SHARED_DATA_DIR OUT_DIR
"""
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


SYS_USER = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is 2+2?"}]
MULTI = [{"role": "system", "content": "Be brief."},
         {"role": "user", "content": "Hi!"},
         {"role": "assistant", "content": "Hello! How can I help?"},
         {"role": "user", "content": "Tell me a joke about caf\u00e9s \U0001F600."}]
THINK_HISTORY = [{"role": "user", "content": "Solve x+1=3."},
                 {"role": "assistant", "content": "<think>\nSubtract 1.\n</think>\n\nx = 2."},
                 {"role": "user", "content": "And x+2=3?"},
                 {"role": "assistant", "content": "<think>\nSubtract 2.\n</think>\n\nx = 1."}]
TOOLS = [{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": "Let me check."},
         {"role": "tool", "content": "{\"temp\": 21}"},
         {"role": "tool", "content": "{\"sky\": \"clear\"}"},
         {"role": "assistant", "content": "It is 21 degrees and clear."}]
TOOL_SCHEMAS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city \u00e9",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOOL_CALLS = [{"role": "system", "content": "Use tools."},
              {"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": "", "tool_calls": [
                  {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                  {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Nice\"}"}}]},
              {"role": "tool", "content": "21C"},
              {"role": "assistant", "content": "It is 21C.", "reasoning_content": "The tool said 21C."}]
NO_SYSTEM = [{"role": "user", "content": "  spaced  "}, {"role": "assistant", "content": "ok"}]

CASES = [
    # name, template, messages, add_generation_prompt, enable_thinking (None: not passed)
    ("qwen3_sys_user_gen", "qwen3", SYS_USER, True, None),
    ("qwen3_multi_gen", "qwen3", MULTI, True, None),
    ("qwen3_nothink_gen", "qwen3", SYS_USER, True, False),
    ("qwen3_think_true_gen", "qwen3", MULTI, True, True),
    ("qwen3_think_history", "qwen3", THINK_HISTORY, False, None),
    ("qwen3_think_history_nothink", "qwen3", THINK_HISTORY[:3], True, False),
    ("qwen3_tools_roles", "qwen3", TOOLS, False, None),
    ("tinyqwen_sys_user_gen", "tinyqwen", SYS_USER, True, None),
    ("tinyqwen_multi", "tinyqwen", MULTI, False, None),
    ("qwen3_tools_calls", "qwen3", TOOL_CALLS, True, False),
    ("features", "features", MULTI, True, None),
    ("features_raise", "features", NO_SYSTEM, False, None),
]


# Small templates for edge semantics (rendered with messages=MULTI): name, template text.
MICRO = [
    ("crlf", "a\r\nb{% if true %}\r\nc{% endif %}\r\n"),
    ("trailing_newline", "x\n"),
    ("lstrip_tabs", "line\n\t  {% if true %}\n\tin\n\t{% endif %}\nend"),
    ("comment_ws", "a\n  {# c #}\nb\n{#- d #}  e"),
    ("dash_output", "a  {{- 'b' -}}  c {{ 'd' }}\n{{ 'e' }}"),
    ("nested_loops", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }}{% endfor %}{{ loop.last }}{% endfor %}"),
    ("loop_scope", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"),
    ("if_scope", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}"),
    ("namespace_loop", "{% set ns = namespace(a=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + [i] %}{% endfor %}{{ ns.a }}"),
    ("str_methods", "{{ 'Hello World'.lower().split(' ') }}|{{ '  a\tb  '.rstrip() }}|{{ 'x'.join(['a','b']) }}|"
                    "{{ 'abcabc'.replace('b','B',1) }}|{{ 'abc'.find('c') }}|{{ 'aXbXc'.rsplit('X') }}|{{ 'ab'.upper() }}"),
    ("numbers", "{{ 10 / 4 }} {{ 10 // 4 }} {{ 2.5 * 2 }} {{ -3 % 5 }} {{ 1 + 2 * 3 ** 2 }} {{ (1 + 2) * 3 }} {{ 1e-5 }} "
                "{{ 123456789.123 }} {{ 1/3 }} {{ 2**62 }} {{ 0.5|round }} {{ 3.7|int }} {{ '42'|int + 1 }}"),
    ("compare", "{{ 3 > 2 > 1 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1,2] == [1,2] }} {{ none == none }} {{ 1 == 1.0 }} "
                "{{ true == 1 }} {{ 'a' ~ 'b' == 'ab' }} {{ not 1 == 2 }}"),
    ("messages_access", "{{ messages[-1].content }}|{{ messages[1:3]|map(attribute='role')|join('+') }}|"
                        "{{ (messages|selectattr('role', 'equalto', 'assistant')|first).content }}|{{ messages|length }}"),
    ("loop_vars", "{% for m in messages %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.previtem.role if loop.previtem else '-' }}"
                  "{{ loop.nextitem.role if loop.nextitem is defined else '-' }};{% endfor %}"),
    ("ternary_filters", "{{ 'x' if false }}|{{ (none or 'dflt') }}|{{ [] or 'empty' }}|{{ 'abc'|length }}|{{ 'ab'|list }}|"
                        "{{ {'b': 2, 'a': 1}|tojson(sort_keys=true) }}|{{ ['x', 1, none, 2.0]|tojson }}|{{ 'a\u00e9'|tojson }}"),
    ("tojson_options", "{{ {'a': '\u00e9', 'b': [1, 2]}|tojson(separators=(',', ':')) }}|"
                       "{{ '\u00e9\U0001F600\\n'|tojson(ensure_ascii=true) }}|{{ {'y': [1], 'x': {}}|tojson(indent=2, sort_keys=true) }}|"
                       "{{ {1: 2, true: 3, none: 4}|tojson }}|{{ [1.5, -0.0, 1e100]|tojson }}"),
]


def main():
    shared, out = sys.argv[1], sys.argv[2]
    templates = {
        "qwen3": json.load(open(os.path.join(shared, "tokenizers/qwen3/tokenizer_config.json")))["chat_template"],
        "tinyqwen": open(os.path.join(shared, "tinyqwen/chat_template.jinja")).read(),
        "features": open(os.path.join(out, "features.jinja")).read(),
    }
    env = environment()
    manifest = []
    for name, tname, messages, gen, think in CASES:
        tools = TOOL_SCHEMAS if name.endswith("_calls") else None
        kw = dict(messages=messages, tools=tools, documents=None, add_generation_prompt=gen,
                  bos_token="<s>", eos_token="<|im_end|>")
        if think is not None:
            kw["enable_thinking"] = think
        case = {"name": name, "template": tname, "messages": messages, "add_generation_prompt": gen,
                "enable_thinking": -1 if think is None else int(think)}
        if tools:
            case["tools"] = tools
        try:
            text = env.from_string(templates[tname]).render(**kw)
            with open(os.path.join(out, name + ".txt"), "w", encoding="utf-8", newline="") as f:
                f.write(text)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = str(e)
        manifest.append(case)
    for name, text in MICRO:
        case = {"name": "micro_" + name, "template_text": text, "messages": MULTI, "add_generation_prompt": False,
                "enable_thinking": -1}
        try:
            rendered = env.from_string(text).render(messages=MULTI, tools=None, documents=None,
                                                    add_generation_prompt=False, bos_token="<s>",
                                                    eos_token="<|im_end|>")
            with open(os.path.join(out, case["name"] + ".txt"), "w", encoding="utf-8", newline="") as f:
                f.write(rendered)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = str(e)
        manifest.append(case)
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "cases": manifest}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
