#!/usr/bin/env python3
"""Goldens for the templates the JS reference cannot render (see README.md): Python
jinja2, as transformers configures it (trim_blocks, lstrip_blocks, loop controls, its
tojson and raise_exception, a pinned strftime_now), but without the immutable sandbox,
so lists have append()/pop() as in llama.cpp's renderer.

  render_jinja2.py <template.jinja> <conversations.json> <case> <gen|nogen>   # to stdout
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext


def main():
    tmpl_path, conv_path, case, gen = sys.argv[1:5]
    conv = json.load(open(conv_path, encoding="utf-8"))
    c = conv["cases"][case]
    ctx = {"messages": c["messages"], "add_generation_prompt": gen == "gen"}
    if c.get("tools") is not None:
        ctx["tools"] = c["tools"]
    ctx.update(conv.get("context", {}))
    ctx.update(c.get("extra", {}))

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    now = datetime.datetime.fromisoformat(conv["now"].replace("Z", "+00:00"))
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    source = open(tmpl_path, encoding="utf-8").read()
    sys.stdout.write(env.from_string(source).render(**ctx))


if __name__ == "__main__":
    main()
