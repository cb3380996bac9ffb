"""A synthetic GGUF model: random weights, real attention geometry, a small valid tokenizer.

`patchkit bench decode` uses it when no model is given. What matters for the kernels under test is
the attention shape (head dim 256, 24 query heads, 4 KV heads: GQA 6) and the context length, not
what the weights say, so the weights are random normal (std 0.02, norms ones) and the file is small.

Architecture: "llama". At the pinned base llama.cpp reads `llama.attention.key_length` /
`value_length` for every arch with attention heads (`llama_model::load_hparams`, defaulting to
n_embd / n_head only when the keys are absent), and the llama arch builds its projections from
them (`create_tensor_qkv(layer, i, n_embd, n_embd_head_k * n_head, n_embd_k_gqa, n_embd_v_gqa)`,
`wo: {n_embd_head_k * n_head, n_embd}`), so head_dim != n_embd / n_head works without switching
to qwen3. The llama arch also requires n_rot == head_dim (checked at load), so
`llama.rope.dimension_count` is written as head_dim.

Tokenizer: SentencePiece style (`tokenizer.ggml.model = "llama"`): <unk>, <s>, </s>, the 256 byte
tokens <0x00>..<0xFF> (type BYTE, so any input byte can be tokenized and any output byte
detokenized), "▁", the printable ASCII characters, then "▁"-prefixed and plain lowercase
strings of growing length up to n_vocab (each one reachable by merging two shorter pieces).

The `gguf` package is imported lazily: it may be missing on the GPU machine, where llama.cpp's own
`gguf-py` is used instead (`gguf_py=`).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib
import itertools
import math
import string
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit.errors import PatchkitError, RecipeError

if TYPE_CHECKING:
    import numpy as np

WEIGHT_STD = 0.02
RMS_EPS = 1e-5
WEIGHT_TYPES = ("f16", "f32", "q8_0", "q4_0")
SUPPORTED_ARCHS = ("llama",)
Q8_0_BLOCK = 32  # elements per block of q8_0 and q4_0
# q4_0 weights are written as random blocks (an f16 scale, 16 bytes of random 4-bit values), not
# quantized normals: what decode measures is the bytes read per token, and random blocks cost no
# quantization time (a 0.8 GB model in about a second). The scale makes the values' std WEIGHT_STD:
# (q - 8) * d with q uniform on 0..15 has a std of 4.61 d.
Q4_0_SCALE = WEIGHT_STD / 4.61
MAX_VOCAB = 262144
# rows generated at a time: bounds the float32 scratch; part of the file's definition (changing it
# changes which random numbers land where), so it is a constant, not a knob.
_CHUNK_ELEMS = 1 << 22

_SPECIALS = ("<unk>", "<s>", "</s>")  # ids 0, 1, 2: llama.cpp's SPM defaults
_SPACE = "\u2581"  # "▁", SentencePiece's escaped space
_PRINTABLE = [c for c in string.printable if c.isprintable() and c != " "]  # 94 chars, 0x21..0x7e
MIN_VOCAB = len(_SPECIALS) + 256 + 1 + len(_PRINTABLE)


@dataclass(frozen=True, kw_only=True)
class SyntheticModelSpec:
    arch: str = "llama"
    n_layer: int = 4
    n_embd: int = 1024
    n_head: int = 24
    n_head_kv: int = 4
    head_dim: int = 256
    n_ff: int = 2048
    n_vocab: int = 512
    context_length: int = 131072  # decode benches go to depth 122880
    rope_theta: float = 1e6
    weight_type: str = "f16"
    seed: int = 0

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def n_gqa(self) -> int:
        return self.n_head // self.n_head_kv


def _fail(field: str, why: str) -> None:
    raise RecipeError(f"model.{field}: {why}")


def _validate(s: SyntheticModelSpec) -> None:
    if not isinstance(s.arch, str) or s.arch not in SUPPORTED_ARCHS:
        _fail("arch", f"{s.arch!r} is not supported (supported: {', '.join(SUPPORTED_ARCHS)})")
    if not isinstance(s.weight_type, str) or s.weight_type not in WEIGHT_TYPES:
        _fail("weight_type", f"{s.weight_type!r} is not one of {', '.join(WEIGHT_TYPES)}")
    minimum = {
        "n_layer": 1,
        "n_embd": 1,
        "n_head": 1,
        "n_head_kv": 1,
        "head_dim": 2,
        "n_ff": 1,
        "n_vocab": 1,
        "context_length": 1,
        "seed": 0,
    }
    for name, lo in minimum.items():
        v = getattr(s, name)
        if isinstance(v, bool) or not isinstance(v, int):
            _fail(name, f"must be an integer, got {v!r}")
        if v < lo:
            _fail(name, f"must be >= {lo}, got {v}")
    if isinstance(s.rope_theta, bool) or not isinstance(s.rope_theta, (int, float)):
        _fail("rope_theta", f"must be a number, got {s.rope_theta!r}")
    if not (math.isfinite(s.rope_theta) and s.rope_theta > 0):
        _fail("rope_theta", f"must be a positive finite number, got {s.rope_theta!r}")
    if s.head_dim % 2:
        _fail("head_dim", f"must be even (RoPE rotates pairs), got {s.head_dim}")
    if s.n_head % s.n_head_kv:
        _fail("n_head_kv", f"n_head ({s.n_head}) must be a multiple of n_head_kv ({s.n_head_kv})")
    if not MIN_VOCAB <= s.n_vocab <= MAX_VOCAB:
        _fail(
            "n_vocab",
            f"must be in [{MIN_VOCAB}, {MAX_VOCAB}] to hold the synthetic tokenizer "
            f"(3 specials, 256 byte tokens, printable ASCII), got {s.n_vocab}",
        )
    if s.weight_type in ("q8_0", "q4_0"):
        # every weight matrix is quantized along its input dimension (a row of ggml's ne[0])
        for name, v in (("n_embd", s.n_embd), ("n_ff", s.n_ff)):
            if v % Q8_0_BLOCK:
                _fail(name, f"must be a multiple of {Q8_0_BLOCK} for weight_type {s.weight_type}, got {v}")
        if (s.n_head * s.head_dim) % Q8_0_BLOCK:
            _fail(
                "head_dim",
                f"n_head*head_dim ({s.n_head * s.head_dim}) must be a multiple of {Q8_0_BLOCK} "
                f"for weight_type {s.weight_type}",
            )


_FIELDS = tuple(f.name for f in dataclasses.fields(SyntheticModelSpec))


def spec_from_mapping(d: Mapping[str, Any]) -> SyntheticModelSpec:
    """Build a spec from a recipe table (e.g. `[model]`); unknown keys are an error with a hint."""
    if not isinstance(d, Mapping):
        raise RecipeError(f"model: expected a table of settings, got {type(d).__name__}")
    for key in d:
        if key not in _FIELDS:
            close = difflib.get_close_matches(str(key), _FIELDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(_FIELDS)})"
            raise RecipeError(f"model: unknown key {key!r}{hint}")
    kwargs = dict(d)
    if isinstance(kwargs.get("rope_theta"), int) and not isinstance(kwargs["rope_theta"], bool):
        kwargs["rope_theta"] = float(kwargs["rope_theta"])
    return SyntheticModelSpec(**kwargs)


# --- tensor plan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tensor:
    name: str
    shape: tuple[int, ...]  # numpy order: (rows, row_length); ggml's ne is the reverse
    is_norm: bool


def _tensor_names() -> dict[str, str]:
    """gguf's names for the llama tensors (falls back to llama.cpp's spelling without gguf)."""
    fallback = {
        "TOKEN_EMBD": "token_embd",
        "OUTPUT_NORM": "output_norm",
        "OUTPUT": "output",
        "ATTN_NORM": "blk.{bid}.attn_norm",
        "ATTN_Q": "blk.{bid}.attn_q",
        "ATTN_K": "blk.{bid}.attn_k",
        "ATTN_V": "blk.{bid}.attn_v",
        "ATTN_OUT": "blk.{bid}.attn_output",
        "FFN_NORM": "blk.{bid}.ffn_norm",
        "FFN_GATE": "blk.{bid}.ffn_gate",
        "FFN_UP": "blk.{bid}.ffn_up",
        "FFN_DOWN": "blk.{bid}.ffn_down",
    }
    gguf = sys.modules.get("gguf")
    if gguf is None:
        return fallback
    arch_tensors = set(gguf.MODEL_TENSORS[gguf.MODEL_ARCH.LLAMA])
    names = {}
    for key in fallback:
        t = getattr(gguf.MODEL_TENSOR, key)
        if t not in arch_tensors:  # would mean the gguf package and llama.cpp disagree
            raise PatchkitError(f"gguf's llama arch has no tensor {key}; gguf package too old or too new")
        names[key] = gguf.TENSOR_NAMES[t]
    return names


def _plan(spec: SyntheticModelSpec) -> list[_Tensor]:
    n = _tensor_names()
    e, q, kv, ff, v = spec.n_embd, spec.n_head * spec.head_dim, spec.n_head_kv * spec.head_dim, spec.n_ff, spec.n_vocab
    out = [
        _Tensor(n["TOKEN_EMBD"] + ".weight", (v, e), False),
        _Tensor(n["OUTPUT_NORM"] + ".weight", (e,), True),
        _Tensor(n["OUTPUT"] + ".weight", (v, e), False),
    ]
    for i in range(spec.n_layer):

        def t(key: str, shape: tuple[int, ...], norm: bool = False, i: int = i) -> _Tensor:
            return _Tensor(n[key].format(bid=i) + ".weight", shape, norm)

        out += [
            t("ATTN_NORM", (e,), True),
            t("ATTN_Q", (q, e)),  # n_embd -> n_head * head_dim
            t("ATTN_K", (kv, e)),  # n_embd -> n_head_kv * head_dim
            t("ATTN_V", (kv, e)),
            t("ATTN_OUT", (e, q)),  # n_head * head_dim -> n_embd
            t("FFN_NORM", (e,), True),
            t("FFN_GATE", (ff, e)),
            t("FFN_UP", (ff, e)),
            t("FFN_DOWN", (e, ff)),
        ]
    return out


def parameter_count(spec: SyntheticModelSpec) -> int:
    return sum(math.prod(t.shape) for t in _plan(spec))


# --- tokenizer ---------------------------------------------------------------------------------


def _extra_pieces() -> Iterator[str]:
    """Lowercase pieces of growing length, "▁"-prefixed first; every piece is the merge of two
    shorter pieces already in the vocab, so SentencePiece-style merging can reach it."""
    letters = string.ascii_lowercase
    for length in itertools.count(1):
        for chars in itertools.product(letters, repeat=length):
            yield _SPACE + "".join(chars)
        if length >= 2:
            for chars in itertools.product(letters, repeat=length):
                yield "".join(chars)


def build_vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) of the synthetic SPM tokenizer, exactly n_vocab entries."""
    NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6  # gguf.TokenType values (stable in the format)
    tokens = list(_SPECIALS)
    types = [UNKNOWN, CONTROL, CONTROL]
    scores = [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(BYTE)
        scores.append(0.0)
    pieces = itertools.chain([_SPACE], _PRINTABLE, _extra_pieces())
    for piece in itertools.islice(pieces, n_vocab - len(tokens)):
        tokens.append(piece)
        types.append(NORMAL)
        scores.append(-float(len(tokens)))  # earlier pieces merge first
    assert len(tokens) == n_vocab == len(set(tokens))
    return tokens, scores, types


# --- writing -----------------------------------------------------------------------------------


def _import_gguf(gguf_py: Path | None):
    try:
        return importlib.import_module("gguf")
    except ImportError as e:
        first_error = e
    if gguf_py is not None:
        p = Path(gguf_py)
        if not (p / "gguf" / "__init__.py").is_file() and (p / "gguf-py" / "gguf" / "__init__.py").is_file():
            p = p / "gguf-py"  # given the llama.cpp tree itself
        if str(p) in sys.path:
            sys.path.remove(str(p))
        sys.path.insert(0, str(p))  # ahead of whatever failed to import above
        importlib.invalidate_caches()
        try:
            return importlib.import_module("gguf")
        except ImportError as e:
            raise PatchkitError(
                f"cannot import gguf from {p} ({e}); `pip install gguf` or pass a llama.cpp tree whose gguf-py works"
            ) from None
    raise PatchkitError(
        f"the gguf Python package is needed to write the synthetic model ({first_error}); "
        "`pip install gguf` or pass the llama.cpp tree (its gguf-py)"
    ) from None


def _ggml_type(gguf, spec: SyntheticModelSpec, t: _Tensor):
    Q = gguf.GGMLQuantizationType
    if t.is_norm or spec.weight_type == "f32":
        return Q.F32
    return {"f16": Q.F16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0}[spec.weight_type]


def _nbytes(gguf, shape: tuple[int, ...], qtype) -> int:
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    return math.prod(shape[:-1]) * (shape[-1] // block) * type_size


def _make_tensor(gguf, rng: np.random.Generator, t: _Tensor, qtype) -> np.ndarray:
    """The tensor's bytes as an array ready for `write_tensor_data`, generated in row chunks so the
    only full-size array is the output (float32 scratch is bounded by _CHUNK_ELEMS)."""
    import numpy as np

    Q = gguf.GGMLQuantizationType
    if t.is_norm:
        return np.ones(t.shape, dtype=np.float32)
    rows, cols = t.shape
    if qtype == Q.Q4_0:
        return _random_q4_0(rng, rows, cols)
    if qtype == Q.F32:
        out = np.empty((rows, cols), dtype=np.float32)
    elif qtype == Q.F16:
        out = np.empty((rows, cols), dtype=np.float16)
    else:
        block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        out = np.empty((rows, cols // block * type_size), dtype=np.uint8)
    step = max(1, _CHUNK_ELEMS // cols)
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        chunk = rng.standard_normal((r1 - r0, cols), dtype=np.float32)
        chunk *= np.float32(WEIGHT_STD)
        if qtype in (Q.F32, Q.F16):
            out[r0:r1] = chunk
        else:
            out[r0:r1] = gguf.quants.quantize(chunk, qtype)
    return out


def _random_q4_0(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Random q4_0 blocks (see Q4_0_SCALE): per block of 32 an f16 scale, then 16 bytes of two 4-bit values."""
    import numpy as np

    nb = cols // Q8_0_BLOCK
    out = np.empty((rows, nb, 18), dtype=np.uint8)
    out[:, :, :2] = np.frombuffer(np.float16(Q4_0_SCALE).tobytes(), dtype=np.uint8)
    out[:, :, 2:] = rng.integers(0, 256, size=(rows, nb, 16), dtype=np.uint8)
    return out.reshape(rows, nb * 18)


def _add_metadata(w, gguf, spec: SyntheticModelSpec) -> None:
    """The model's key-value metadata: name, file type, shapes, rope, and the vocabulary (build_vocab)."""
    arch = spec.arch
    K = gguf.Keys
    w.add_name(
        f"patchkit synthetic {arch} L{spec.n_layer} E{spec.n_embd} "
        f"H{spec.n_head}/{spec.n_head_kv}x{spec.head_dim} seed {spec.seed}"
    )
    w.add_type("model")
    w.add_file_type(
        {
            "f32": gguf.LlamaFileType.ALL_F32,
            "f16": gguf.LlamaFileType.MOSTLY_F16,
            "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
            "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
        }[spec.weight_type]
    )
    if spec.weight_type in ("q8_0", "q4_0"):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(spec.context_length)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_uint32(K.Attention.KEY_LENGTH.format(arch=arch), spec.head_dim)
    w.add_uint32(K.Attention.VALUE_LENGTH.format(arch=arch), spec.head_dim)
    w.add_rope_dimension_count(spec.head_dim)  # llama checks n_rot == key_length
    w.add_rope_freq_base(float(spec.rope_theta))
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_vocab_size(spec.n_vocab)

    tokens, scores, ttypes = build_vocab(spec.n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(ttypes)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)


def write_synthetic_gguf(
    path: Path | str, spec: SyntheticModelSpec | None = None, *, gguf_py: Path | None = None
) -> Path:
    """Write the model described by `spec` to `path` (deterministic for a given spec, seed included).

    Tensors are generated and written one at a time; the file appears complete or not at all
    (written to a temporary name, then renamed).
    """
    import numpy as np

    spec = spec or SyntheticModelSpec()
    gguf = _import_gguf(gguf_py)
    if spec.weight_type == "q8_0" and not hasattr(getattr(gguf, "quants", None), "quantize"):
        _fail("weight_type", "q8_0 needs gguf.quants.quantize, missing from this gguf package; use f16")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")

    plan = _plan(spec)
    types = [_ggml_type(gguf, spec, t) for t in plan]
    w = gguf.GGUFWriter(tmp, spec.arch)
    try:
        _add_metadata(w, gguf, spec)

        for t, qt in zip(plan, types):
            w.add_tensor_info(t.name, t.shape, np.dtype(np.float32), _nbytes(gguf, t.shape, qt), raw_dtype=qt)

        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        rng = np.random.Generator(np.random.PCG64(spec.seed))
        for t, qt in zip(plan, types):
            data = _make_tensor(gguf, rng, t, qt)
            w.write_tensor_data(data)
            del data
        w.close()
        tmp.replace(path)
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    return path


def describe(spec: SyntheticModelSpec, path: Path | str | None = None) -> dict[str, Any]:
    """The spec for the report: its fields, derived numbers, and the file (size, sha256) if written."""
    d: dict[str, Any] = {"synthetic": True, **dataclasses.asdict(spec)}
    d["n_gqa"] = spec.n_gqa
    d["n_params"] = parameter_count(spec)
    d["weight_std"] = WEIGHT_STD
    d["tokenizer"] = "spm (llama), synthetic"
    if path is not None:
        p = Path(path)
        d["path"] = str(p)
        if p.is_file():
            d["file_size"] = p.stat().st_size
            h = hashlib.sha256()
            with p.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            d["sha256"] = h.hexdigest()
    return d


# --- real models: what their GGUF header says, and every model's label ----------------------------------

# llama.cpp's llama_ftype (general.file_type) by number, as its quantize tool names them
FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    32: "BF16",
}
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _read(f, fmt: str):
    import struct

    size = struct.calcsize(fmt)
    raw = f.read(size)
    if len(raw) != size:
        raise EOFError
    return struct.unpack(fmt, raw)[0]


def _value(f, vtype: int, keep: bool):
    """One GGUF value; an array is skipped (None) unless `keep` (then its first 8 items)."""
    import struct

    if vtype == 8:
        n = _read(f, "<Q")
        return f.read(n).decode("utf-8", "replace")
    if vtype == 9:
        etype, n = _read(f, "<I"), _read(f, "<Q")
        if etype in _SCALARS and etype != 8:
            f.seek(n * struct.calcsize(_SCALARS[etype]), 1)
            return None
        items = [_value(f, etype, False) for _ in range(n)]  # strings: each length read, 262k in ~0.2 s
        return items[:8] if keep else None
    return _read(f, _SCALARS[vtype])


def gguf_header(path: Path | str) -> dict[str, Any]:
    """The GGUF's key/value pairs (arrays left out) and `n_params` from its tensor infos; read directly
    (gguf's GGUFReader decodes every token of a 262k vocabulary: over a minute on 2 cores)."""
    try:
        with Path(path).open("rb") as f:
            if f.read(4) != b"GGUF":
                raise PatchkitError(f"{path}: not a GGUF file")
            _version, n_tensors, n_kv = _read(f, "<I"), _read(f, "<Q"), _read(f, "<Q")
            kv: dict[str, Any] = {}
            for _ in range(n_kv):
                key = _value(f, 8, False)
                v = _value(f, _read(f, "<I"), False)
                if v is not None:
                    kv[key] = v
            params = 0
            for _ in range(n_tensors):
                _value(f, 8, False)
                dims = [_read(f, "<Q") for _ in range(_read(f, "<I"))]
                _read(f, "<I"), _read(f, "<Q")
                params += math.prod(dims)
    except (EOFError, KeyError, OSError) as e:
        raise PatchkitError(f"{path}: cannot read its GGUF header ({type(e).__name__}: {e})") from None
    kv["n_params"] = params
    return kv


def real_info(path: Path | str, source: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A real GGUF for the report: what its header says (name, size, file type, attention shape) and
    where it came from (`source`: model_package.ModelFile.to_dict())."""
    h = gguf_header(path)
    arch = str(h.get("general.architecture", ""))

    def a(key: str, default: Any = None) -> Any:
        return h.get(f"{arch}.{key}", default)

    n_head, n_kv = a("attention.head_count"), a("attention.head_count_kv")
    info: dict[str, Any] = {
        "synthetic": False,
        "name": str(h.get("general.name", "")),
        "size_label": str(h.get("general.size_label", "")),
        "file_type": FILE_TYPES.get(h.get("general.file_type"), f"file type {h.get('general.file_type')}"),
        "license": str(h.get("general.license", "")),
        "arch": arch,
        "n_layer": a("block_count"),
        "n_embd": a("embedding_length"),
        "n_head": n_head,
        "n_head_kv": n_kv,
        "head_dim": a("attention.key_length"),
        "head_dim_v": a("attention.value_length"),
        "sliding_window": a("attention.sliding_window"),
        "context_length": a("context_length"),
        "n_params": h["n_params"],
        "n_gqa": n_head // n_kv if isinstance(n_head, int) and isinstance(n_kv, int) and n_kv else None,
        "path": str(path),
        "file_size": Path(path).stat().st_size,
    }
    return {**info, **{k: v for k, v in (source or {}).items() if v and k != "path"}}


def _params(n: int) -> str:
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def label(info: Mapping[str, Any]) -> str:
    """A model as every table names it: a real model by its GGUF metadata ('Gemma 3 270m Q4_K_M'), the
    synthetic one as synthetic with its shape ('synthetic llama, 4 layers, width 1024, 24/4 heads x 256,
    f16')."""
    if info.get("synthetic", True) and "n_layer" in info and not info.get("name"):
        return (
            f"synthetic {info.get('arch', 'llama')}, {info['n_layer']} layers, width {info.get('n_embd')}, "
            f"{info.get('n_head')}/{info.get('n_head_kv')} heads x {info.get('head_dim')}, {info.get('weight_type')}"
        )
    name = str(info.get("name") or Path(str(info.get("path", "model"))).stem)
    size = str(info.get("size_label") or (_params(int(info["n_params"])) if info.get("n_params") else ""))
    if size and size.lower() not in name.lower():
        name += f" {size}"
    return f"{name} {info['file_type']}" if info.get("file_type") else name


def shape_line(info: Mapping[str, Any]) -> str:
    """The attention a model exercises, from its header: 'head size 256, 4 query / 1 KV heads (GQA 4),
    sliding window 512, 18 layers'."""
    parts = [f"head size {info.get('head_dim')}"]
    if info.get("n_head") and info.get("n_head_kv"):
        parts.append(
            f"{info['n_head']} query / {info['n_head_kv']} KV heads (GQA {info['n_head'] // info['n_head_kv']})"
        )
    if info.get("sliding_window"):
        parts.append(f"sliding window {info['sliding_window']}")
    parts.append(f"{info.get('n_layer')} layers")
    return ", ".join(parts)
