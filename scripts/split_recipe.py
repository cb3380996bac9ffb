"""Write the default recipe with or without the local build-only patch 0009 (each FA MMA instance unit in two:
head size 256 and the rest; docs/fattn-split-sm90-2way), for the device scripts that measure it
(scripts/device-split-rebuild.sh compares the two; the default recipe lists it since 2026-12-06). Where it is
listed already, `with` copies the recipe as it is. SRC and DST may be the same.

    python3 scripts/split_recipe.py recipes/default.toml DST [with|without] [PATCH ID]

PATCH ID: another local patch instead of 0009 (e.g. `without patches/local/0011-... fattn-config-trace`).
"""

import re
import sys
from pathlib import Path

FILE = "patches/local/0009-cuda-fattn-mma-instances-hs256-and-rest.patch"
ID = "fattn-split-hs256"


def main(src: str, dst: str, how: str = "with", file: str = FILE, pid: str = ID) -> None:
    block = f'\n[[series]]\nfile = "{file}"\nid = "{pid}"\nlocal = true\n'
    # its entry with the comment lines above it, as the default recipe writes it
    entry = re.compile(
        r"(?:^#[^\n]*\n)*\[\[series\]\]\nfile = \"" + re.escape(file) + r"\"\n(?:[a-z]+ = [^\n]*\n)*\n?", re.M
    )
    text = Path(src).read_text()
    listed = file in text
    if how == "without" and listed:
        text, n = entry.subn("", text)
        if n != 1 or file in text:
            raise SystemExit(f"{src}: {file}'s [[series]] entry not found as one block")
    elif how == "with" and not listed:
        at = text.index("\n[build]")  # after the last [[series]] entry
        text = text[:at] + block + text[at:]
    elif how not in ("with", "without"):
        raise SystemExit(f"{how!r}: with or without")
    Path(dst).write_text(text)


if __name__ == "__main__":
    main(*sys.argv[1:6])
