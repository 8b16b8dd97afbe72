#!/usr/bin/env python3
"""Maintainer tool: renders testdata/golden/*.txt with Python's Jinja2.

It sets up Jinja2 as Hugging Face transformers' apply_chat_template does
(src/transformers/utils/chat_template_utils.py, _compile_jinja_template):
an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension and a no-op {% generation %} tag, the tojson filter
as json.dumps(ensure_ascii=False), and the raise_exception and strftime_now
globals. Each template in testdata/templates is rendered for each
conversation in testdata/cases.json; a render that raises is recorded as
"ERROR: <message>" when the template called raise_exception, and as
"ERROR (<exception class>): <message>" otherwise. TestGolden in pkg/chat renders the same pairs with kvq's
engine and compares byte for byte.

Run from pkg/chat:  python3 testdata/gen/render_golden.py
Needs only jinja2 (pip install jinja2, or Debian's python3-jinja2).
"""

import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)


class GenerationTag(Extension):
    """transformers' AssistantTracker without the mask bookkeeping: the
    {% generation %} block renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation", []), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(os.path.join(TESTDATA, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    now = datetime.fromisoformat(cases["now"].replace("Z", "+00:00"))
    env = environment(now)
    out_dir = os.path.join(TESTDATA, "golden")
    os.makedirs(out_dir, exist_ok=True)
    for name, tokens in sorted(cases["templates"].items()):
        with open(os.path.join(TESTDATA, "templates", name + ".jinja"), encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        for conv in cases["conversations"]:
            kwargs = dict(tokens)
            kwargs.update(conv.get("vars", {}))
            try:
                text = tmpl.render(
                    messages=conv["messages"],
                    tools=cases["tools"] if conv.get("tools") else None,
                    documents=None,
                    add_generation_prompt=conv["add_generation_prompt"],
                    **kwargs,
                )
            except Exception as e:  # the golden records what the engine raised
                if type(e) is jinja2.exceptions.TemplateError:  # raise_exception
                    text = "ERROR: " + str(e)
                else:
                    text = "ERROR (%s): %s" % (type(e).__name__, e)
            path = os.path.join(out_dir, "%s__%s.txt" % (name, conv["name"]))
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
    print("jinja2", jinja2.__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
