"""The sweep's error and its hint wording, apart from spec.py so that every sweep module (spec.py and
occupancy.py, which spec.py reads `predict` with) can raise it without an import circle."""

from __future__ import annotations

import difflib

from patchkit.errors import PatchkitError


class SweepError(PatchkitError):
    """A sweep spec or override that cannot be used: one line naming the file and key."""


def hint(key: str, allowed) -> str:
    """' (did you mean X?)' or ' (allowed: ...)' (recipe.py's wording; not imported: recipe.py reads [sweep] with
    this module)."""
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(sorted(allowed))})"
