"""Write the default recipe with the local build-only patch 0009 listed after its last [[series]] entry (each FA
MMA instance unit in two: head size 256 and the rest; docs/fattn-split-sm90-2way), for the device scripts that
measure 0009 (scripts/device-all.sh with SPLIT=1, scripts/device-split-rebuild.sh). SRC and DST may be the same.

    python3 scripts/split_recipe.py recipes/default.toml DST
"""

import sys
from pathlib import Path

BLOCK = (
    '\n[[series]]\nfile = "patches/local/0009-cuda-fattn-mma-instances-hs256-and-rest.patch"\n'
    'id = "fattn-split-hs256"\nlocal = true\n'
)


def main(src: str, dst: str) -> None:
    text = Path(src).read_text()
    at = text.index("\n[build]")  # after the last [[series]] entry
    Path(dst).write_text(text[:at] + BLOCK + text[at:])


if __name__ == "__main__":
    main(*sys.argv[1:3])
