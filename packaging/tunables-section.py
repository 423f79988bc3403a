#!/usr/bin/env python3
"""Regenerates the [tunables] part of packaging/numapilot.toml from crates/model/src/tunables.rs:
every field of `Tunables`, commented out at its default, with its doc comment less the
"Source:" part (what the field prevents is kept). Run from the repository root after adding or changing a tunable:

    python3 packaging/tunables-section.py

crates/daemon/tests/config.rs checks that the example names every key."""
import re
import textwrap

SRC = "crates/model/src/tunables.rs"
EXAMPLE = "packaging/numapilot.toml"
MARK = "# it prevents). All commented out: the shipped defaults apply. Fractions are 0..1.\n"

src = open(SRC).read()
body = src[src.index("pub struct Tunables {"):]
body = body[: body.index("\n}\n")]
defaults = dict(re.findall(r"^\s+(\w+): ([^,]+),$", src[src.index("impl Default for Tunables"):], re.M))
out, doc = [], []
for line in body.split("\n")[1:]:
    s = line.strip()
    if s.startswith("// ----"):
        out.append(f"\n# --- {s.strip('- /').strip()}")
    elif s.startswith("///"):
        doc.append(s[3:].strip())
    elif s.startswith("pub "):
        name = re.match(r"pub (\w+):", s).group(1)
        # The source stays in the code; what the field prevents comes along whichever came first.
        parts = re.split(r"(?<=\.)\s+Source:", " ".join(doc), maxsplit=1)
        text = parts[0]
        if len(parts) > 1 and "Prevents:" in parts[1] and "Prevents:" not in text:
            text += " Prevents:" + parts[1].split("Prevents:", 1)[1]
        text = text.replace("`", "")
        out.append("")
        out += ["# " + l for l in textwrap.wrap(text, 98)]
        out.append(f"# {name} = {defaults[name].replace('_', '')}")
        doc = []
example = open(EXAMPLE).read()
head = example[: example.index(MARK) + len(MARK)]
open(EXAMPLE, "w").write(head + "\n".join(out) + "\n")
