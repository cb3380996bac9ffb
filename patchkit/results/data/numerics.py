"""`numerics`' stored data (patchkit.measure.numerics writes it; docs/model.md): each variant's greedy
generations against base's, and its KL divergence against base's logits (format 3 of patchkit.results.upgrade).
Here rather than in its runner, which is near 600 lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from patchkit.results.data.base import ABSENT, Data, StepData


@dataclass(kw_only=True)
class Generation(Data):
    """One (depth, prompt) greedy generation of a pair, compared."""

    depth: int  # tokens of real text before the prompt
    prompt: int  # the prompt's index
    prompt_tokens: int | None = ABSENT  # the prompt's tokens at that depth (None: not compared; absent: older runs)
    identical: bool | None  # None: not compared (error)
    first_diff_char: int | None = ABSENT  # None: identical or not compared (absent: not compared, older runs)
    first_diff_token: int | None = ABSENT  # in base's llama-tokenize split of the two texts (absent: older runs)
    sha256_a: str = ABSENT  # of base's text ('' when not compared; absent: not compared, older runs)
    sha256_b: str = ABSENT  # of the variant's text
    log_a: str  # base's llama-completion log, relative to the run folder
    log_b: str  # the variant's
    error: str = ABSENT  # why not compared ('' when compared; absent: older runs)

    SHOWN: ClassVar[dict[str, object]] = {  # what the report shows for a key an older run did not write
        "prompt_tokens": None,
        "first_diff_char": None,
        "first_diff_token": None,
        "sha256_a": "",
        "sha256_b": "",
        "error": "",
    }


@dataclass(kw_only=True)
class Kld(Data):
    """llama-perplexity --kl-divergence of a variant against base's logits."""

    mean: float | None  # None: not measured (error)
    p99: float | None
    max: float | None
    same_top_p: float | None  # percent
    log: str  # relative to the run folder
    error: str = ABSENT  # why not measured ('' when measured; absent: older runs)


@dataclass(kw_only=True)
class PairResult(Data):
    """Variant b against base (a)."""

    a: str  # base
    b: str  # the variant
    identical: bool  # every compared generation bit-identical (and at least one compared)
    generations: list[Generation]
    kld: Kld | None  # None: no KL divergence (no base logits)


@dataclass(kw_only=True)
class NumericsData(StepData):
    """numerics. A step that compared nothing holds only `inputs`."""

    KIND = "numerics"
    pairs: list[PairResult] = ABSENT  # absent: nothing compared
    depths: list[int] = ABSENT  # depths of real text before the prompts
    prompts: list[str] = ABSENT
    n_predict: int = ABSENT  # tokens generated greedily
    model: dict[str, str | int | float | bool | None] = ABSENT  # model.describe / model.real_info, with its label
    text: str = ABSENT  # where the long-depth prefix and the KL divergence's text came from ('': prompts repeated)
    config_reads: list[dict[str, Any]] = ABSENT  # config rows read per process (0011): {variant, log, keys}
    rows_scope: str = ABSENT  # --changed: which variants' numerics were not run again and where they stand, or why

    @property
    def measured(self) -> bool:
        return self.pairs is not ABSENT
