"""patchkit.build.units ([[affects]] units/uses): which units a row edit does not reach, on the real FA MMA
header and instance names (tests/fixtures/sweep, llama.cpp 0c1e57098)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

import pytest

from patchkit.build import compiled, units
from patchkit.errors import RecipeError
from patchkit.recipe import Affects, load_recipe, parse_recipe

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"
TEXT = (FIX / "fattn-mma-f16.cuh").read_bytes().decode("utf-8", "surrogateescape")
HEADER = "ggml/src/ggml-cuda/fattn-mma-f16.cuh"
ROW8 = "GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8, 128, 2,  64, 128, 128, 128, 2, true);"
ROW16 = "GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256, 16, 256, 1,  64, 128, 128, 128, 2, true);"
INST = "ggml/src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_{}-ncols2_{}.cu"
# the 21 MMA instances of the tree at 0c1e57098 (ninja -t deps of a CUDA build: the includers of the header)
PAIRS = [(1, 8), (1, 16), (1, 32), (2, 4), (2, 8), (2, 16), (2, 32), (4, 2), (4, 4), (4, 8), (4, 16)]
PAIRS += [(8, 1), (8, 2), (8, 4), (8, 8), (16, 1), (16, 2), (16, 4), (32, 1), (32, 2), (64, 1)]
INCLUDERS = {HEADER: {"ggml/src/ggml-cuda/fattn.cu", *(INST.format(a, b) for a, b in PAIRS)}}
RULE = dataclasses.replace(load_recipe(None).affects[0])  # the default recipe's rule, units and uses included


def _recipe(*rules: Affects):
    return dataclasses.replace(load_recipe(None), affects=rules or (RULE,))


def _texts(old: str, new: str):
    return lambda which, f: old if which == "old" else new


def test_the_default_rule_names_the_real_instances_and_their_ncols():
    pattern = re.compile(RULE.units)
    for f in sorted((FIX / "template-instances").iterdir()):
        m = pattern.fullmatch("ggml/src/ggml-cuda/template-instances/" + f.name)
        assert m, f.name
        decl = re.findall(r"DECL_FATTN_MMA_F16_CASE\(\d+, \d+, (\d+), (\d+)\)", f.read_text())
        assert decl and {(int(a), int(b)) for a, b in decl} == {(int(m["ncols1"]), int(m["ncols2"]))}


def test_an_8_column_row_edit_clears_the_17_instances_of_other_ncols(tmp_path):
    new = TEXT.replace(ROW8, ROW8.replace("128, 2, true", "128, 1, true"), 1)
    c = units.clear(_recipe(), [HEADER], _texts(TEXT, new), INCLUDERS, tmp_path)
    kept = {INST.format(a, b) for a, b in PAIRS if a * b == 8} | {"ggml/src/ggml-cuda/fattn.cu"}
    assert set(c.covered[HEADER]) == kept and len(kept) == 5
    assert set(c.units) == INCLUDERS[HEADER] - kept and len(c.units) == 17
    assert f"{RULE.uses} is false for the 2 changed rows" in next(iter(c.units.values()))
    assert "dkq" in RULE.uses  # unsplit units (no dkq in the name: 0) are cleared by ncols alone


def test_a_row_comment_ending_in_a_backslash_clears_nothing(tmp_path, capsys):
    # issue 29: the comment splices the next row (the 16-column one) into it; the text shows one changed
    # 8-column row, the compiler reads that row changed and the 16-column row gone (was: 17 units cleared,
    # the 16-column instances among them)
    new = TEXT.replace(ROW8, ROW8.replace("128, 2, true", "128, 1, true") + " // tuned \\", 1)
    c = units.clear(_recipe(), [HEADER], _texts(TEXT, new), INCLUDERS, tmp_path)
    assert c.units == {} and c.covered == {}
    assert "other changed rows" in c.notes[HEADER] and "(256, 256, 16, 256, 1," in c.notes[HEADER]
    c.say("check at abc")
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith(f"check at abc: every unit including {HEADER} is compiled")
    assert list(tmp_path.iterdir()) == []  # the preprocessor's input is gone


def test_a_row_whose_cells_are_names_clears_nothing(tmp_path):
    # issue 29: `ncols` (the lookup's parameter) as a cell matches every ncols at compile time, but `uses`
    # was false for it (was: 17 cleared)
    new = TEXT.replace(ROW8, ROW8.replace("256, 256,  8,", "256, 256, ncols,"), 1)
    c = units.clear(_recipe(), [HEADER], _texts(TEXT, new), INCLUDERS, tmp_path)
    assert c.units == {} and "ncols = 'ncols', not an integer" in c.notes[HEADER]


def test_a_splice_outside_a_comment_that_keeps_the_rows_is_understood(tmp_path):
    # a row written over two lines with a backslash is still one row to the compiler, but not to the
    # text's reading: not understood, nothing cleared; a trailing comment without a backslash is fine
    split = TEXT.replace(ROW8, ROW8.replace("128, 2, true", "128, 1, \\\n true"), 1)
    assert units.clear(_recipe(), [HEADER], _texts(TEXT, split), INCLUDERS, tmp_path).units == {}
    noted = TEXT.replace(ROW8, ROW8.replace("128, 2, true", "128, 1, true") + " // tuned", 1)
    assert len(units.clear(_recipe(), [HEADER], _texts(TEXT, noted), INCLUDERS, tmp_path).units) == 17


def test_a_16_column_row_edit_recompiles_the_16_column_instances(tmp_path):
    new = TEXT.replace(ROW16, ROW16.replace("256, 1,  64", "128, 2,  64"), 1)
    c = units.clear(_recipe(), [HEADER], _texts(TEXT, new), INCLUDERS, tmp_path)
    assert {u for u in c.covered[HEADER] if "instance" in u} == {INST.format(a, b) for a, b in PAIRS if a * b == 16}


def test_nothing_is_cleared_for_an_edit_outside_rows_or_without_units(tmp_path):
    code = TEXT.replace(ROW8, ROW8 + "\n    int x = 0;", 1)
    assert units.clear(_recipe(), [HEADER], _texts(TEXT, code), INCLUDERS, tmp_path).units == {}
    new = TEXT.replace(ROW8, ROW8.replace("128, 2, true", "128, 1, true"), 1)
    plain = dataclasses.replace(RULE, units="", uses="")
    assert units.clear(_recipe(plain), [HEADER], _texts(TEXT, new), INCLUDERS, tmp_path).units == {}


def test_a_unit_that_includes_another_changed_file_is_not_cleared(tmp_path):
    new = TEXT.replace(ROW8, ROW8.replace("128, 2, true", "128, 1, true"), 1)
    other = "ggml/src/ggml-cuda/fattn-common.cuh"
    one = INST.format(16, 1)
    inc = {**INCLUDERS, other: {one}}
    c = units.clear(_recipe(), [HEADER, other], _texts(TEXT, new), inc, tmp_path)
    assert one not in c.units and len(c.units) == 16


@pytest.mark.parametrize(
    ("expr", "names", "want"),
    [
        ("ncols1 * ncols2 == ncols", {"ncols1": 2, "ncols2": 4, "ncols": 8}, True),
        ("ncols1 * ncols2 == ncols", {"ncols1": 2, "ncols2": 8, "ncols": 8}, False),
        ("DKQ == 256 and not (ncols % 16 == 0) or ncols // 2 == 1", {"DKQ": 256, "ncols": 8}, True),
        ("1 <= ncols < 8", {"ncols": 8}, False),
        ("Q_in_reg", {"Q_in_reg": True}, True),
        ("-ncols + 8 == 0", {"ncols": 8}, True),
    ],
)
def test_uses_is_evaluated(expr, names, want):
    assert units.evaluate(expr, names, "r.toml: affects[0]") is want


def test_uses_names_and_nodes_are_checked():
    with pytest.raises(RecipeError, match=r"affects\[0\]\.uses: 'nope' is neither a group of units nor a column"):
        units.evaluate("nope == 1", {"ncols": 8}, "r.toml: affects[0]")
    for bad in ("__import__('os')", "x.y == 1", "'a' == 'a'", "[1][0] == 1", "ncols ** 2"):
        with pytest.raises(RecipeError, match=r"affects\[0\]\.uses: .* is not allowed"):
            units.parse_uses(bad, "r.toml: affects[0]")
    with pytest.raises(RecipeError, match=r"affects\[0\]\.uses: .* is not an expression"):
        units.parse_uses("ncols ==", "r.toml: affects[0]")
    with pytest.raises(RecipeError, match=r"affects\[0\]\.uses: 'nc' is neither a group of units nor a column"):
        units.check_columns(dataclasses.replace(RULE, uses="nc * ncols2 == 8"), TEXT, "r.toml: affects[0]")
    units.check_columns(RULE, TEXT, "r.toml: affects[0]")  # the default rule's names are all known


def test_recipe_units_and_uses_are_checked(tmp_path):
    base = '[recipe]\nname = "x"\n[base]\nsource = "git"\n[base.git]\nurl = "u"\ncommit = "' + "a" * 40 + '"\n'
    rule = '[[affects]]\nfile = "a.h"\nmacro = "M"\nparams = "p"\n'
    with pytest.raises(RecipeError, match=r"affects\[0\]: units and uses go together"):
        parse_recipe(base + rule + "units = 'u.*'\n", tmp_path)
    with pytest.raises(RecipeError, match=r"affects\[0\]\.units: not a regex"):
        parse_recipe(base + rule + "units = 'u(('\nuses = 'n == 1'\n", tmp_path)
    with pytest.raises(RecipeError, match=r"affects\[0\]\.uses: .*Call is not allowed"):
        parse_recipe(base + rule + "units = 'u'\nuses = 'f(1)'\n", tmp_path)
    ok = parse_recipe(base + rule + "units = 'u_(?P<k>\\d+)'\nuses = 'k == n'\n", tmp_path)
    assert ok.affects[0].uses == "k == n"


def test_object_source_and_deps_by_object(tmp_path):
    obj = "ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/template-instances/fattn-mma-f16-instance-ncols1_2-ncols2_4.cu.o"
    assert compiled.object_source(obj) == INST.format(2, 4)
    assert compiled.object_source("bin/test-backend-ops") is None
    tree, bdir = tmp_path / "tree", tmp_path / "build"
    text = (
        f"{obj}: #deps 3, deps mtime 1 (VALID)\n"
        f"    {tree}/{INST.format(2, 4)}\n    {tree}/{HEADER}\n    /usr/include/stdio.h\n\n"
        "other.o: #deps 1, deps mtime 1 (VALID)\n    ../tree/x.h\n\n"
    )
    deps = compiled.deps_by_object(text, bdir, tree)
    assert deps[obj] == {INST.format(2, 4), HEADER} and deps["other.o"] == {"x.h"}


def test_a_deps_log_resolves_each_path_once(tmp_path, monkeypatch):
    # a full CUDA build's deps log names ~70,000 paths, mostly the same headers: realpath (a stat per part) once
    # each, not once a line (4.5 s a parse for 200 CUDA objects on 2 cores), with the same sets
    tree, bdir = tmp_path / "tree", tmp_path / "build"
    (tree / "sub").mkdir(parents=True)
    (tmp_path / "real.h").write_text("")
    (tree / "sub" / "link.h").symlink_to(tmp_path / "real.h")  # resolved outside the tree: not a tree file
    lines = [f"    {tree}/{HEADER}", f"    {tree}/sub/link.h", "    ../tree/x.h", f"    {bdir}/gen.h", "    /usr/x.h"]
    text = "".join(f"o{i}.o: #deps 5, deps mtime 1 (VALID)\n" + "\n".join(lines) + "\n\n" for i in range(50))
    calls = []
    real = os.path.realpath
    monkeypatch.setattr(compiled.os.path, "realpath", lambda p: calls.append(p) or real(p))
    deps = compiled.deps_by_object(text, bdir, tree)
    assert len(deps) == 50 and all(d == {HEADER, "x.h"} for d in deps.values())
    assert len(calls) == 1 + 5  # the tree, then each path once
    calls.clear()
    assert compiled.generated_inputs(text, bdir, tree) == {"gen.h"} and len(calls) == 2 + 5


def test_generated_inputs_and_their_digest_set_the_commit_aside(tmp_path):
    # issue 29: files CMake writes into the build folder are compiled inputs; their commit strings are not
    tree, bdir = tmp_path / "tree", tmp_path / "build"
    (bdir / "ggml/src").mkdir(parents=True)
    tree.mkdir()
    text = (
        "o.o: #deps 3, deps mtime 1 (VALID)\n"
        f"    {tree}/a.c\n    {bdir}/ggml/src/ggml-version.h\n    common/build-info.cpp\n    /usr/include/x.h\n"
    )
    assert compiled.generated_inputs(text, bdir, tree) == {"ggml/src/ggml-version.h", "common/build-info.cpp"}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tree)]
    subprocess.run([*git, "init", "-q"], check=True)
    heads = []
    for n in (1, 2):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", str(n)], check=True)
        heads.append(subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout)
    gen = bdir / "ggml/src/ggml-version.h"
    gen.write_text(f'#define GGML_COMMIT "{heads[1][:7]}"\nint LLAMA_BUILD_NUMBER = 2;\n')
    now = compiled.generated_digest(gen, tree)
    subprocess.run([*git, "checkout", "-q", "--detach", heads[0].strip()], check=True)
    gen.write_text(f'#define GGML_COMMIT "{heads[0][:9]}"\nint LLAMA_BUILD_NUMBER = 1;\n')
    assert compiled.generated_digest(gen, tree) == now
    gen.write_text(f'#define GGML_COMMIT "{heads[0][:9]}"\nint LLAMA_BUILD_NUMBER = 1;\n#define X 1\n')
    assert compiled.generated_digest(gen, tree) != now
    assert compiled.generated_digest(bdir / "gone.h", tree) == ""
    # all of a build's generated files at once (HEAD read once): each file's own digest, a gone one ''
    many = compiled.generated_digests(["ggml/src/ggml-version.h", "gone.h"], bdir, tree)
    assert many == {"ggml/src/ggml-version.h": compiled.generated_digest(gen, tree, bdir), "gone.h": ""}
    assert many["ggml/src/ggml-version.h"] != now


CPU_FIX = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"
UNITY = "src/CMakeFiles/llama.dir/Unity/unity_0_cxx.cxx"


def test_a_variant_in_its_own_folders_has_bases_unity_sources_but_its_trees_path(tmp_path):
    """The A/B of 2026-12-06 09:48 (tests/fixtures/cpu/pool_unity_0_*.cxx): with `--build-pool 2` the CPU run measured
    +0001 and +0001+0002, which touch only CUDA sources, since their unity sources named their own trees and so
    digested other than base's (results.json's same_code: {}; with a pool of 1: "no compiled change on cpu")."""
    recorded = {
        "shared": ("/work/abtest/work-ab-split/builds/seed-fattn/cpu", CPU_FIX / "pool_unity_0_shared.cxx"),
        "own": (
            "/work/abtest/work-ab-split/builds/seed-fattn/cpu/each/+0001",
            CPU_FIX / "pool_unity_0_own.cxx",
        ),
    }
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    where = {}
    for name, (root, fixture) in recorded.items():
        tree, bdir = tmp_path / name / "tree", tmp_path / name / "build"
        tree.mkdir(parents=True)
        subprocess.run([*git, "-C", str(tree), "init", "-q"], check=True)
        subprocess.run([*git, "-C", str(tree), "commit", "-q", "--allow-empty", "-m", name], check=True)
        (bdir / UNITY).parent.mkdir(parents=True)
        text = fixture.read_text()
        assert text.count(f'"{root}/tree/src/') == 16  # the recorded tree's path, as the seed moved it
        (bdir / UNITY).write_text(text.replace(f"{root}/tree/", f"{tree}/"))  # the same moved here
        where[name] = (tree, bdir)
    (tree0, b0), (tree1, b1) = where["shared"], where["own"]
    base = compiled.Inputs({"src/llama.cpp"}, bdir=b0, tree=tree0, generated={UNITY: ""})
    base.generated[UNITY] = compiled.generated_digest(b0 / UNITY, tree0, b0)
    assert compiled.generated_changed(base.at(b1, tree1)) == []
    assert compiled.same_code_reason(["ggml/src/ggml-cuda/fattn.cu"], base.at(b1, tree1), "cpu").startswith(
        "no compiled change on cpu"
    )
    (b1 / UNITY).write_text((b1 / UNITY).read_text().replace("models/afmoe.cpp", "models/apertus.cpp"))
    assert compiled.generated_changed(base.at(b1, tree1)) == [UNITY]  # another file included: a change


# ---------------------------------------------------------------------------------------------
# The instances split per head size (patches/local/0005, generated from the tree at 0c1e57098 by
# scripts/split_fattn_instances.py): its new files and their lines are the real split tree's

LOCAL = Path(__file__).resolve().parents[2] / "patches" / "local"
SPLIT = LOCAL / "0005-cuda-fattn-mma-instances-per-head-size.patch"
SPLIT2 = LOCAL / "0009-cuda-fattn-mma-instances-hs256-and-rest.patch"  # two parts: hs256 and the rest


def _split_units(patch: Path = SPLIT) -> dict[str, list[tuple[int, int, int, int]]]:
    """The patch's new units -> their DECL_FATTN_MMA_F16_CASE lines (DKQ, DV, ncols1, ncols2)."""
    out: dict[str, list[tuple[int, int, int, int]]] = {}
    for part in patch.read_text().split("\ndiff --git ")[1:]:
        path = re.match(r"a/(\S+) b/", part)[1]
        if "\nnew file mode" in part:
            decl = re.findall(r"^\+DECL_FATTN_MMA_F16_CASE\((\d+), (\d+), (\d+), (\d+)\);$", part, re.M)
            out[path] = [tuple(map(int, d)) for d in decl]
    return out


def test_the_default_rule_names_the_split_units_their_ncols_and_head_size():
    split = _split_units()
    assert len(split) == 126  # one per DECL line of the 21 unsplit units
    pattern = re.compile(RULE.units)
    for path, decl in split.items():
        m = pattern.fullmatch(path)
        assert m and m["dkq"], path
        assert decl == [(int(m["dkq"]), decl[0][1], int(m["ncols1"]), int(m["ncols2"]))], path


def test_an_8_column_hs256_row_edit_of_the_split_tree_recompiles_fattn_cu_and_four_hs256_units(tmp_path):
    includers = {HEADER: {"ggml/src/ggml-cuda/fattn.cu", *_split_units()}}
    new = TEXT.replace(ROW8, ROW8.replace("128, 2, true", "128, 1, true"), 1)
    c = units.clear(_recipe(), [HEADER], _texts(TEXT, new), includers, tmp_path)
    kept = {"ggml/src/ggml-cuda/fattn.cu"} | {
        f"ggml/src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_{a}-ncols2_{b}-dkq_256.cu"
        for a, b in ((1, 8), (2, 4), (4, 2), (8, 1))
    }
    assert set(c.covered[HEADER]) == kept
    assert set(c.units) == includers[HEADER] - kept and len(c.units) == 126 - 4


def test_a_row_edit_of_another_head_size_clears_the_hs256_units(tmp_path):
    includers = {HEADER: {"ggml/src/ggml-cuda/fattn.cu", *_split_units()}}
    row = "GGML_CUDA_FATTN_MMA_CONFIG_CASE(128, 128,  8, 128, 2, 128,  64,  64,  64, 2, true);"
    new = TEXT.replace(row, row.replace("128, 2, 128,", "128, 2,  64,"), 1)
    c = units.clear(_recipe(), [HEADER], _texts(TEXT, new), includers, tmp_path)
    kept = {u for u in c.covered[HEADER] if "instance" in u}
    assert kept == {
        f"ggml/src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_{a}-ncols2_{b}-dkq_128.cu"
        for a, b in ((1, 8), (2, 4), (4, 2), (8, 1))
    }
    assert all(u in c.units for u in includers[HEADER] if "-dkq_256" in u)


# ---------------------------------------------------------------------------------------------
# The instances split in two, head size 256 and the rest (patches/local/0009, generated from the tree at
# 0c1e57098 by scripts/split_fattn_instances.py --dkq 256)

EIGHT = ((1, 8), (2, 4), (4, 2), (8, 1))
PART = "ggml/src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_{}-ncols2_{}-dkq_{}.cu"


def test_the_default_rule_names_the_two_way_parts_their_ncols_and_head_sizes():
    split = _split_units(SPLIT2)
    # the 16 units holding a head size 256 line in two, the 5 without one (ncols2 16 and 32) renamed
    assert len(split) == 37 and sum(p.endswith("-dkq_256.cu") for p in split) == 16
    pattern = re.compile(RULE.units)
    for path, decl in split.items():
        m = pattern.fullmatch(path)
        assert m and bool(m["dkq"]) != bool(m["notdkq"]), path
        assert {(a, b) for _, _, a, b in decl} == {(int(m["ncols1"]), int(m["ncols2"]))}, path
        if m["dkq"]:
            assert [d[0] for d in decl] == [256], path
        else:
            assert m["notdkq"] == "256" and decl and 256 not in [d[0] for d in decl], path
    # every line of the 21 unsplit units is in exactly one part (the 0005 patch holds one unit per line)
    assert sorted(d for v in split.values() for d in v) == sorted(d for v in _split_units().values() for d in v)


def test_an_8_column_hs256_row_edit_of_the_two_way_tree_recompiles_fattn_cu_and_four_hs256_parts(tmp_path):
    includers = {HEADER: {"ggml/src/ggml-cuda/fattn.cu", *_split_units(SPLIT2)}}
    new = TEXT.replace(ROW8, ROW8.replace("128, 2, true", "128, 1, true"), 1)
    c = units.clear(_recipe(), [HEADER], _texts(TEXT, new), includers, tmp_path)
    kept = {"ggml/src/ggml-cuda/fattn.cu"} | {PART.format(a, b, 256) for a, b in EIGHT}
    assert set(c.covered[HEADER]) == kept  # the four 8-column `-dkq_not256` parts are cleared too
    assert set(c.units) == includers[HEADER] - kept and len(c.units) == 37 - 4


def test_an_8_column_row_edit_of_another_head_size_recompiles_the_rest_parts_only(tmp_path):
    includers = {HEADER: {"ggml/src/ggml-cuda/fattn.cu", *_split_units(SPLIT2)}}
    row = "GGML_CUDA_FATTN_MMA_CONFIG_CASE(128, 128,  8, 128, 2, 128,  64,  64,  64, 2, true);"
    new = TEXT.replace(row, row.replace("128, 2, 128,", "128, 2,  64,"), 1)
    c = units.clear(_recipe(), [HEADER], _texts(TEXT, new), includers, tmp_path)
    assert {u for u in c.covered[HEADER] if "instance" in u} == {PART.format(a, b, "not256") for a, b in EIGHT}
    assert all(u in c.units for u in includers[HEADER] if "-dkq_256" in u)


@pytest.mark.parametrize(
    ("name", "reads"),
    [  # the names of the three layouts, and which head sizes' rows each reads (ncols 8)
        ("fattn-mma-f16-instance-ncols1_2-ncols2_4.cu", {64, 128, 256, 576}),
        ("fattn-mma-f16-instance-ncols1_2-ncols2_4-dkq_256.cu", {256}),
        ("fattn-mma-f16-instance-ncols1_2-ncols2_4-dkq_128.cu", {128}),
        ("fattn-mma-f16-instance-ncols1_2-ncols2_4-dkq_not256.cu", {64, 128, 576}),
        ("fattn-mma-f16-instance-ncols1_2-ncols2_4-dkq_not128.cu", {64, 256, 576}),
    ],
)
def test_a_row_is_read_in_its_head_sizes_part_and_unsplit_units_never_in_its_rest_part(name, reads):
    m = re.compile(RULE.units).fullmatch("ggml/src/ggml-cuda/template-instances/" + name)
    assert m, name
    groups = {k: 0 if v is None else int(v) for k, v in m.groupdict().items()}
    for dkq in (64, 128, 256, 576):
        row = {"DKQ": dkq, "DV": 512 if dkq == 576 else dkq, "ncols": 8}
        assert units.evaluate(RULE.uses, {**row, **groups}, "default.toml: affects[0]") is (dkq in reads), dkq
        assert units.evaluate(RULE.uses, {**row, "ncols": 16, **groups}, "default.toml: affects[0]") is False
