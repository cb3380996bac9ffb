"""Every key a recipe may hold is documented in docs/recipe.md (issue 34: `[bench.decode]`'s pp keys were
in no doc). The keys are not listed here: they are asked of the recipe parser itself (patchkit.recipe),
which names the allowed keys of a table when it meets an unknown one, and of the [model] reader
(patchkit.measure.model). So a key added to recipe.py, however it is declared, fails this test until
docs/recipe.md names it under its table's heading."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import tomlkit

from patchkit.errors import RecipeError
from patchkit.measure.model import spec_from_mapping
from patchkit.recipe import parse_recipe

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "recipe.md"
SHA = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
UNKNOWN = "zzqqxx"  # no key is close to it: the parser lists every allowed key
MINIMAL = {"base": {"source": "git", "upstream": f"o/r@{SHA}", "git": {"url": "u", "commit": SHA}}}
# (the table as the doc heads it, where the unknown key goes: a path of tables; an int: an array's first table)
TABLES: list[tuple[str, tuple]] = [
    ("top level", ()),
    ("[recipe]", ("recipe",)),
    ("[base]", ("base",)),
    ("[base.git]", ("base", "git")),
    ("[base.sdist]", ("base", "sdist")),
    ("[[series]]", ("series", 0)),
    ("[build]", ("build",)),
    ("[bench]", ("bench",)),
    ("[bench.kernel]", ("bench", "kernel")),
    ("[bench.decode]", ("bench", "decode")),
    ("[numerics]", ("numerics",)),
    ("[prose]", ("prose",)),
    ("[profile]", ("profile",)),
    ("[profile.cpu]", ("profile", "cpu")),
    ("[[affects]]", ("affects", 0)),
]


def _with_unknown(path: tuple) -> dict:
    data = copy.deepcopy(MINIMAL)
    node: object = data
    for i, key in enumerate(path):
        nxt = path[i + 1] if i + 1 < len(path) else None
        if isinstance(key, int):
            node = node[key]  # type: ignore[index]
            continue
        fresh = [{"file": "patches/0001-x.patch"} if key == "series" else {}] if isinstance(nxt, int) else {}
        node = node.setdefault(key, fresh)  # type: ignore[union-attr]
    node[UNKNOWN] = 1  # type: ignore[index]
    return data


def accepted_keys(path: tuple) -> list[str]:
    """The keys the recipe parser accepts in the table at `path`, as its error for an unknown key lists them."""
    text = tomlkit.dumps(_with_unknown(path))
    with pytest.raises(RecipeError) as e:
        parse_recipe(text, Path("recipes/probe.toml"), root=ROOT)
    m = re.search(rf"unknown key '(?:[\w.\[\]]+\.)?{UNKNOWN}' \(allowed: (.*)\)$", str(e.value))
    assert m, str(e.value)
    return [k.strip() for k in m.group(1).split(",")]


def model_keys() -> list[str]:
    with pytest.raises(RecipeError) as e:
        spec_from_mapping({UNKNOWN: 1})
    m = re.search(r"\(known: (.*)\)$", str(e.value))
    assert m, str(e.value)
    return [k.strip() for k in m.group(1).split(",")]


def doc_sections() -> dict[str, str]:
    """docs/recipe.md's `## ` sections by their heading's first word (a table such as `[bench.decode]`)."""
    out: dict[str, str] = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)[1:]:
        head, _, body = part.partition("\n")
        out[head.split("`")[1] if "`" in head else head.strip()] = body
    return out


def _named(body: str) -> set[str]:
    """The keys a section's table names: the first cell of each row, `key` (dashes or underscores)."""
    return {m.group(1).replace("_", "-") for m in re.finditer(r"^\| `([\w.-]+)` \|", body, re.M)}


@pytest.mark.parametrize(("table", "path"), TABLES, ids=[t for t, _ in TABLES])
def test_every_key_the_recipe_parser_accepts_is_documented(table, path):
    keys = accepted_keys(path)
    assert keys and UNKNOWN not in keys
    sections = doc_sections()
    assert table in sections, f"docs/recipe.md has no section '## `{table}`'"
    missing = sorted({k.replace("_", "-") for k in keys} - _named(sections[table]))
    assert not missing, f"docs/recipe.md, section {table}: keys recipe.py accepts but the doc does not name: {missing}"


def test_every_model_key_is_documented():
    missing = sorted({k.replace("_", "-") for k in model_keys()} - _named(doc_sections()["[model]"]))
    assert not missing, f"docs/recipe.md, section [model]: undocumented keys {missing}"


def test_the_doc_names_no_key_the_parser_refuses():
    """The other way round: a documented key that the parser does not accept is a stale doc."""
    sections = doc_sections()
    for table, path in TABLES:
        extra = _named(sections[table]) - {k.replace("_", "-") for k in accepted_keys(path)}
        assert not extra, f"docs/recipe.md, section {table}: keys the parser refuses: {sorted(extra)}"


def test_the_probe_sees_a_new_key():
    """The probe is the parser's own answer: the pp keys of [bench.decode] (in no doc before) are there."""
    assert {"n-prompt", "n-gen", "ubatch"} <= set(accepted_keys(("bench", "decode")))
