#!/usr/bin/env python3
"""Render every *.jinja of a folder for several conversations with `tcq chat-template` and with
Python jinja2 in transformers' environment (gen_chat_expected.environment), and report where they
differ.  A development check for templates that are not committed here (e.g. llama.cpp's
models/templates or github.com/chujiezheng/chat_templates).
usage: crosscheck_templates.py path/to/tcq TEMPLATE_DIR
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_chat_expected import (MULTI, NO_SYSTEM, SYS_USER, THINK_HISTORY, TOOL_CALLS, TOOL_SCHEMAS,  # noqa: E402
                               TOOLS, environment)

CONVERSATIONS = {"sys_user": (SYS_USER, None), "multi": (MULTI, None), "think": (THINK_HISTORY, None),
                 "no_system": (NO_SYSTEM, None), "user_only": ([{"role": "user", "content": "Hello"}], None),
                 "tool_calls": (TOOL_CALLS, TOOL_SCHEMAS), "tool_roles": (TOOLS, TOOL_SCHEMAS),
                 "sys_user_tools": (SYS_USER, TOOL_SCHEMAS)}


def main():
    tcq, folder = sys.argv[1], sys.argv[2]
    env = environment()
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    same = differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        msgs, tools_file = os.path.join(tmp, "m.json"), os.path.join(tmp, "t.json")
        for name in sorted(f for f in os.listdir(folder) if f.endswith(".jinja")):
            path = os.path.join(folder, name)
            src = open(path, encoding="utf-8").read()
            for conv, (messages, tools) in CONVERSATIONS.items():
                json.dump(messages, open(msgs, "w"))
                json.dump(tools, open(tools_file, "w"))
                for gen in (False, True):
                    for think in (None, False):
                        kw = dict(messages=messages, tools=tools, documents=None, add_generation_prompt=gen,
                                  bos_token="<s>", eos_token="</s>")
                        cmd = [tcq, "chat-template", path, "--messages", msgs, "--bos", "<s>", "--eos", "</s>"]
                        if tools:
                            cmd += ["--tools", tools_file]
                        if gen:
                            cmd.append("--add-generation-prompt")
                        if think is not None:
                            kw["enable_thinking"] = think
                            cmd += ["--thinking", "on" if think else "off"]
                        try:
                            want, want_ok = env.from_string(src).render(**kw), True
                        except Exception as e:  # the template rejects the conversation
                            want, want_ok = str(e), False
                        r = subprocess.run(cmd, capture_output=True)
                        got = r.stdout.decode("utf-8", "replace")
                        if (r.returncode == 0) == want_ok and (not want_ok or got == want):
                            same += 1
                            continue
                        differ += 1
                        i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
                        print("DIFF %s %s gen=%s thinking=%s at %d\n  tcq   : %r\n  jinja2: %r" % (
                            name, conv, gen, think, i, (got or r.stderr.decode())[max(0, i - 50):i + 50],
                            want[max(0, i - 50):i + 50]))
    print("same %d, differ %d" % (same, differ))


if __name__ == "__main__":
    main()
