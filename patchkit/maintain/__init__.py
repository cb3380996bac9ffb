"""Carrying the series over a moving upstream: rebase onto another base, refresh patch files from
edited variant trees, and find the newest base the series still applies to.

- `trial`: every patch of the series tried on a base (clean / 3way / upstream / conflict, the hunks
  that do not apply), patch export with fixed `git format-patch` options, range-diff;
- `bases`: `--onto` / `--candidates` arguments, the recipe Base they name, sdist sha256 from the index;
- `rebase`: the rebase trial, the trial recipe and its builds, writing the rebased series;
- `recipe_edit`: the recipe rewrite (tomlkit: comments, order and formatting of untouched lines kept);
- `refresh`: variant tree commits -> patch files;
- `newest`: the newest candidate base the whole series applies to.

Everything runs with real git (patchkit.vcs) in the cache repo; the trial uses its own worktree under
<work>/rebase/trees/, never the user's variant trees. The command line is patchkit.cli.maintain.
"""
