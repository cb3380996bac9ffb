from pathlib import Path

import pytest

from patchkit.errors import RecipeError
from patchkit.recipe import load_recipe, parse_recipe
from tests.conftest import default_local

ROOT = Path(__file__).resolve().parents[2]
BASE = """
[base]
upstream = "ggml-org/llama.cpp@0c1e57098bba43ac29e6e3b677cdceebdd22334f"
[base.sdist]
name = "llama-cpp-python"
version = "0.3.36"
sha256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
"""


def test_default_recipe_loads_with_its_series():
    r = load_recipe(str(ROOT / "recipes" / "default.toml"))
    assert [p.key for p in r.pr_patches] == ["0001", "0002"]
    assert [p.key for p in r.local_patches] == list(default_local())
    assert r.series[1].depends_on == ("0001",)
    assert r.base.route == "sdist" and r.base.git.commit.startswith("0c1e57098")
    assert r.suites["flash_attn"] == ("-o", "FLASH_ATTN_EXT")
    assert r.decode.depths == (0, 32768, 122880)


@pytest.mark.parametrize(
    "text, message",
    [
        (BASE + "[bild]\n", "unknown key 'bild' (did you mean 'build'?)"),
        (BASE + "[build]\nbackend = 'cuda'\narchs = ['89']\n", "unknown key 'build.archs' (did you mean 'arch'?)"),
        (BASE + "[build]\njobs = 'four'\n", "build.jobs: expected int, got str 'four'"),
        (BASE + "[bench.decode]\ndepths = [0, 'x']\n", "bench.decode.depths[1]: expected int"),
        (BASE.replace('sha256 = "832d', 'sha256 = "zz32d'), "base.sdist.sha256: expected 64 hex digits"),
        ("[base]\nsource = 'git'\n", "base.source is 'git' but there is no [base.git] table"),
        (BASE + "[[series]]\nfile = 'a.patch'\ndepends-on = ['0009']\n", "series[0].depends_on: unknown patch '0009'"),
        (
            BASE + "[[series]]\nfile = '0001-a.patch'\ndepends-on = ['0002']\n[[series]]\nfile = '0002-b.patch'\n",
            "'0002' must come before '0001'",
        ),
        (BASE + "[build\n", "TOML syntax error"),
        # names that become folder names (defect 10) and a self-dependency (defect 11b)
        ("[recipe]\nname = '..'\n" + BASE, "recipe.name: '..' cannot be a folder name"),
        ("[recipe]\nname = '.'\n" + BASE, "recipe.name: '.' cannot be a folder name"),
        ("[recipe]\nname = 'a/b'\n" + BASE, "recipe.name: 'a/b' cannot be a folder name"),
        (BASE + "[[series]]\nfile = 'a.patch'\nid = '../x'\n", "series[0].id: '../x' cannot be a folder name"),
        (BASE + "[[series]]\nfile = 'p/../.patch'\n", "series[0].file (its id, '.patch')"),
        (BASE.replace('name = "llama-cpp-python"', 'name = "../x"'), "base.sdist.name: '../x' cannot be"),
        (BASE.replace('version = "0.3.36"', 'version = "1/2"'), "base.sdist.version: '1/2' cannot be"),
        (
            BASE + "[[series]]\nfile = '0001-a.patch'\n[[series]]\nfile = '0002-b.patch'\ndepends-on = ['0002']\n",
            "series[1].depends_on: patch 0002 depends on itself",
        ),
        (
            BASE + "[[series]]\nfile = '0002-b.patch'\ndepends-on = ['0002-b.patch']\n",
            "series[0].depends_on: patch 0002 depends on itself",
        ),
    ],
)
def test_bad_recipes_name_the_file_and_key(text, message):
    with pytest.raises(RecipeError) as e:
        parse_recipe(text, Path("recipes/x.toml"))
    assert str(e.value).startswith("recipes/x.toml: ")
    assert message in str(e.value)


def test_toml_syntax_error_names_the_line():
    with pytest.raises(RecipeError, match=r"line 3"):
        parse_recipe('[base]\nupstream = "x"\nbroken = \n', Path("r.toml"))


def test_missing_patch_file_is_named(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(BASE + "[[series]]\nfile = 'patches/0001-missing.patch'\n")
    with pytest.raises(RecipeError, match=r"series\[0\]\.file: patches/0001-missing.patch: patch file not found"):
        load_recipe(str(tmp_path / "recipes" / "r.toml"))


def test_missing_recipe_is_named(tmp_path):
    with pytest.raises(RecipeError, match=r"recipes/nope\.toml: recipe not found"):
        load_recipe("nope", cwd=tmp_path)


def test_unknown_key_hint_uses_the_toml_spelling(tmp_path):
    text = (ROOT / "recipes" / "default.toml").read_text().replace("n-gen = 32", "n-genn = 32")
    with pytest.raises(RecipeError, match=r"unknown key 'bench\.decode\.n-genn' \(did you mean 'n-gen'\?\)"):
        parse_recipe(text, tmp_path / "x.toml", root=ROOT)


def test_missing_patch_file_names_the_path_tried_and_what_it_is_relative_to(tmp_path):
    """Issue 28: a patch path is relative to the folder above recipes/, not to the recipe or the cwd."""
    (tmp_path / "recipes" / "patches").mkdir(parents=True)
    (tmp_path / "recipes" / "patches" / "0001-x.patch").write_text("beside the recipe: not where it is looked for\n")
    (tmp_path / "recipes" / "r.toml").write_text(BASE + "[[series]]\nfile = 'patches/0001-x.patch'\n")
    with pytest.raises(RecipeError) as e:
        load_recipe(str(tmp_path / "recipes" / "r.toml"))
    msg = str(e.value)
    assert f"patch file not found: tried {tmp_path.resolve() / 'patches' / '0001-x.patch'} " in msg
    assert f"relative to {tmp_path.resolve()}, the folder above the recipe's folder" in msg
    assert "\n" not in msg


def test_a_git_base_named_by_its_upstream_commit():
    """Issue 28: [base.git] needs no commit when [base] upstream names the full commit."""
    sha = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    text = f'[base]\nupstream = "ggml-org/llama.cpp@{sha}"\n[base.git]\nurl = "/home/me/llama.cpp"\n'
    r = parse_recipe(text, Path("recipes/x.toml"))
    assert r.base.route == "git" and r.base.git.commit == sha and r.base.git.url == "/home/me/llama.cpp"
    with pytest.raises(RecipeError, match=r"missing key 'base.git.commit' \(or name the full 40-hex commit"):
        parse_recipe(text.replace(sha, sha[:12]), Path("recipes/x.toml"))
