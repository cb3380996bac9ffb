"""A long series (issue 34: from 51 patches on the names passed 255 bytes; 1,000 patches could not apply), on the
real llama.cpp 0c1e57098 base with real git: every prefix variant is made with one `git am` per patch of the
series (the prefixes share one chain of commits: was N*(N+1)/2 `git am`s), and its commits are the ones a
variant applied alone gets."""

from __future__ import annotations

import hashlib
import time

from patchkit import series, source
from patchkit.options import Context
from patchkit.recipe import load_recipe
from patchkit.run import pipeline
from patchkit.workspace import Workspace

from .conftest import copy_base
from .test_source_series import TOY_BASE

N = 60  # past 51 (where names passed 255 bytes); 1,000 measured by hand: docs/faults.md
# the trees are small (every big folder pruned): the test is about the series, not the checkout
PRUNE = '["models", "docs", "media", "tools", ".github", "ggml", "src", "common", "tests", "examples", "vendor"]'


def _patch(i: int) -> str:
    """A git format-patch that adds many/NNNN.txt (what `git format-patch` writes, with the real blob id)."""
    body = f"note {i}\n".encode()
    blob = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
    path = f"many/{i:04d}.txt"
    return (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: t <t@t>\n"
        f"Date: Sat, 5 Dec 2026 00:00:00 +0000\nSubject: [PATCH] many: add {i:04d}\n\n---\n"
        f" {path} | 1 +\n 1 file changed, 1 insertion(+)\n create mode 100644 {path}\n\n"
        f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..{blob[:7]}\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1 @@\n+note {i}\n-- \n2.39.5\n\n"
    )


def test_a_long_series_applies_with_one_am_per_patch(work, base, tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    (proj / "patches").mkdir(parents=True)
    (proj / "recipes").mkdir()
    text = TOY_BASE.replace('prune = ["models", "docs", "media", "tools/ui", ".github"]', f"prune = {PRUNE}")
    for i in range(1, N + 1):
        (proj / "patches" / f"{i:04d}.patch").write_text(_patch(i))
        text += f'\n[[series]]\nfile = "patches/{i:04d}.patch"\nid = "{i:04d}"\n'
    (proj / "recipes" / "many.toml").write_text(text)
    recipe = load_recipe(str(proj / "recipes" / "many.toml"))
    ws = copy_base(work, base, tmp_path / "w")
    ctx = Context(recipe=recipe, ws=Workspace.at(ws.root), offline=True)
    base_info = source.fetch(recipe.base, ctx.ws, offline=True)
    ams = []
    real_am = series.am
    monkeypatch.setattr(series, "am", lambda *a, **k: ams.append(a[2].key) or real_am(*a, **k))
    t0 = time.monotonic()
    states = pipeline.apply(ctx, base_info)
    seconds = time.monotonic() - t0
    assert len(states) == N + 1 and len(ams) == N, (len(states), len(ams))  # was N*(N+1)/2
    last = ctx.ws.variants(recipe.name) / series.folder_name(states[-1].name)
    assert sorted(p.name for p in (last / "many").iterdir()) == [f"{i:04d}.txt" for i in range(1, N + 1)]
    fifty = series.plan_variants(recipe)[50]
    alone, _ = series.series_commits(source.open_cache_repo(ctx.ws), ctx.ws, recipe, base_info, fifty)
    assert alone == states[50].head  # the chain's commits are the ones the variant applied alone gets
    print(f"apply of {N} patches: {seconds:.0f} s")
