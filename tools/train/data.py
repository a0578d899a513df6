"""KJV text from Debian's bible-kjv package -> train/val/test text files.

The King James Version is public domain. Debian's `bible-kjv` program (package
bible-kjv, data in bible-kjv-text) prints it one verse per line as
"Ge1:1 In the beginning ...". We drop the reference, keep one verse per line,
and end every chapter with the end-of-text marker so the model learns to stop.

Split by chapter, deterministically: chapter index % 50 == 17 -> val,
== 42 -> test (held out for `deltafin perplexity`), the rest -> train.
"""
import argparse
import re
import subprocess
from pathlib import Path

EOT = "<|endoftext|>"
_REF = re.compile(r"^(\S+?)(\d+):(\d+) (.*)$")


def read_kjv():
    """Returns a list of chapters; each is a list of verse strings."""
    try:
        out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                             text=True, env={"COLUMNS": "100000", "PATH": "/usr/bin:/bin"}).stdout
    except FileNotFoundError:
        raise SystemExit("data.py: the `bible` program is missing; run scripts/setup --train "
                         "(installs bible-kjv and bible-kjv-text)")
    chapters, key = [], None
    for n, line in enumerate(out.splitlines(), 1):
        m = _REF.match(line)
        if not m:
            raise SystemExit(f"data.py: line {n} of the bible output is not 'BookC:V text': {line[:60]!r}")
        book, ch, _, text = m.groups()
        text = " ".join(text.split())
        if (book, ch) != key:
            chapters.append([])
            key = (book, ch)
        chapters[-1].append(text)
    if len(chapters) != 1189:
        raise SystemExit(f"data.py: expected 1189 chapters in the KJV, got {len(chapters)}")
    return chapters


def split(chapters):
    parts = {"train": [], "val": [], "test": []}
    for i, ch in enumerate(chapters):
        part = "val" if i % 50 == 17 else "test" if i % 50 == 42 else "train"
        parts[part].append("\n".join(ch) + "\n")
    return parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = split(read_kjv())
    for name, chs in parts.items():
        # Train/val keep chapter boundaries as EOT; test is plain text for perplexity tools.
        sep = "\n" if name == "test" else EOT
        (out / f"{name}.txt").write_text(sep.join(chs) if name == "test" else EOT.join(chs) + EOT)
        print(f"{name}: {len(chs)} chapters, {sum(len(c) for c in chs)} chars")


if __name__ == "__main__":
    main()
