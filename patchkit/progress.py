"""Progress of long steps: a tqdm bar (done of total, elapsed, remaining) on a terminal; when the
output is not a terminal, one line when the step starts and the step's own result line at its end."""

from __future__ import annotations

import sys

from tqdm import tqdm


class Progress:
    """`with Progress("test:flash_attn", total=5308 * 3, unit="case") as p: p.update(1, "base")`."""

    def __init__(self, step: str, *, total: int | None, unit: str, what: str = "", count: str = ""):
        self.step = step
        self.interactive = sys.stderr.isatty()
        self.bar: tqdm | None = None
        if self.interactive:
            self.bar = tqdm(total=total, unit=unit, desc=f"[{step}]", file=sys.stderr, leave=False, dynamic_ncols=True)
        else:
            count = count or (f"{total} {unit}s" if total is not None else f"{unit}s")
            print(f"[{step}] {count}{': ' + what if what else ''}", file=sys.stderr, flush=True)

    def update(self, n: int = 1, note: str = "") -> None:
        if self.bar is not None:
            if note:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(n)

    def set_total(self, total: int) -> None:
        if self.bar is not None and self.bar.total != total:
            self.bar.total = total
            self.bar.refresh()

    def said(self, line: str) -> None:
        """A closing line of what the step did (e.g. the cases it ran), on a terminal too."""
        self.close()
        print(f"[{self.step}] {line}", file=sys.stderr, flush=True)

    def note(self, note: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(note)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
