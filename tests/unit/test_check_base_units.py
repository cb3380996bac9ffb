"""The compile check at base (issue 26): which units base compiles so that the kernels it launches in the
kernel-path cases get registers and shared memory per arch, and that check() compiles them at base, with
their objects removed first (a unit base never changes is otherwise up to date after the first check and
ptxas prints nothing for it)."""

from __future__ import annotations

from pathlib import Path

from patchkit.build import unitcheck
from patchkit.measure import check
from patchkit.recipe import load_recipe

VEC = "{root}/ggml-cuda/template-instances/*-q4_0-q4_0.cu"


def test_the_default_recipe_compiles_the_q4_0_vector_instances_at_base():
    r = load_recipe(None)
    assert check.base_units(r.kernel.params, r.kernel.path_params) == (VEC,)


def test_the_rule_reads_the_k_v_literals_and_path_params_k():
    params = r"kv=(1|2),(nb=1,.*type_K=q8_0,type_V=q8_0|nb=1,.*type_K=f16,type_V=f16),"
    assert check.base_units(params, "") == (
        "{root}/ggml-cuda/template-instances/*-q8_0-q8_0.cu",
        "{root}/ggml-cuda/template-instances/*-f16-f16.cu",
    )
    assert check.base_units(params, "type_K=f16") == ("{root}/ggml-cuda/template-instances/*-f16-f16.cu",)
    assert check.base_units("type_a=q4_0,type_b=f32", "") == ()  # other ops: base is not compiled


def test_expand_finds_the_units_under_either_layout(tmp_path):
    for root in ("ggml/src", "src"):
        t = tmp_path / root.replace("/", "_")
        inst = t / root / "ggml-cuda" / "template-instances"
        inst.mkdir(parents=True)
        for n in ("fattn-vec-instance-q4_0-q4_0.cu", "fattn-vec-instance-q4_0-f16.cu", "mmq-instance-q4_0.cu"):
            (inst / n).write_text("")
        (t / root / "ggml.c").write_text("")
        (t / root / "ggml-cuda" / "fattn.cu").write_text("")
        got = unitcheck.expand(t, (VEC, f"{root}/ggml-cuda/fattn.cu", f"{root}/ggml-cuda/gone.cu"))
        assert got == [
            f"{root}/ggml-cuda/template-instances/fattn-vec-instance-q4_0-q4_0.cu",
            f"{root}/ggml-cuda/fattn.cu",
        ]


class _State:
    def __init__(self, name: str, head: str):
        self.name, self.head = name, head
        self.patches = [{"commit": f"c{i}", "local": False} for i in range(1, int(head) + 1)]  # no local patch


def test_check_compiles_base_last_with_its_units_fresh(monkeypatch, tmp_path):
    calls = []

    def one(recipe, base, ws, state, opts, change, logs, also=(), fresh=False):
        calls.append((state.name, tuple(change[0]), also, fresh))
        src = "ggml/src/ggml-cuda/fattn.cu" if state.name != "base" else "ggml/src/ggml-cuda/v.cu"
        return [unitcheck.CheckItem(variant=state.name, arch="89", source=src, ok=True)]

    class Repo:
        @staticmethod
        def run(*a):
            assert a[0] in ("diff", "diff-tree", "rev-parse")
            return "" if a[0] == "diff" else "p" if a[0] == "rev-parse" else "ggml/src/ggml-cuda/fattn.cu\0"

    class Ws:
        def lock(self, p):
            import contextlib

            return contextlib.nullcontext()

        def builds(self, *a):
            return tmp_path

    class Base:
        commit = "b" * 40

    monkeypatch.setattr(unitcheck, "_check_one", one)
    monkeypatch.setattr(unitcheck, "open_cache_repo", lambda ws: Repo())
    from patchkit.build import BuildOptions

    opts = BuildOptions(backend="cuda", archs=("89",))
    states = [_State("base", "0"), _State("+0001", "1"), _State("+0001+0002", "2")]
    recipe = load_recipe(None)
    items = unitcheck.check(recipe, Base(), Ws(), states, opts, logs=Path(tmp_path), base_units=(VEC,))
    assert [c[0] for c in calls] == ["+0001+0002", "+0001", "base"]
    assert calls[-1] == ("base", (), (VEC,), True)
    assert calls[1][2] == ("ggml/src/ggml-cuda/fattn.cu",) and not calls[1][3]
    assert [i.variant for i in items] == ["+0001", "+0001+0002", "base"]
    calls.clear()
    unitcheck.check(recipe, Base(), Ws(), states, opts, logs=Path(tmp_path))  # no rule: base is not compiled
    assert [c[0] for c in calls] == ["+0001+0002", "+0001"]
