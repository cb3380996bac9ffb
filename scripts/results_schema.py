"""Write docs/results-schema.md's generated part (each converted step kind's data) from its classes.

python3 scripts/results_schema.py          # rewrite the doc in place
python3 scripts/results_schema.py --check  # exit 1 when the committed doc differs
"""

from __future__ import annotations

import sys
from pathlib import Path

from patchkit.results.data import schema

DOC = Path(__file__).resolve().parents[1] / "docs" / "results-schema.md"


def main(argv: list[str]) -> int:
    old = DOC.read_text()
    new = schema.spliced(old)
    if "--check" in argv:
        if new != old:
            print(f"{DOC}: differs from the classes; run python3 scripts/results_schema.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
