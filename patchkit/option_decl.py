"""What a setting is (`Option`), what it resolved to (`Value`) and how a raw value becomes one of its
type (`convert`): the declaration machinery of patchkit.option_set, whose table declares every setting."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.errors import OptionError

SOURCES = ("default", "recipe", "environment", "command line")


@dataclass(frozen=True, kw_only=True)
class Option:
    name: str  # the setting: a RunOptions field by dotted name ('kernel.max_rounds'), or 'work', 'recipe', ...
    help: str
    flags: tuple[str, ...] = ()  # the command line's ('--jobs', '-j'); a name without '-' is a positional
    dest: str = ""  # the argparse destination read (default: from the first flag); shared by a derived setting
    env: str = ""  # the environment variable, e.g. PATCHKIT_JOBS
    recipe: str = ""  # the recipe's field by attribute path on Recipe, e.g. 'kernel.max_rounds'
    key: str = ""  # the recipe's key as written in TOML, e.g. 'bench.kernel.max-rounds'
    profile: str = ""  # the field of [profile.<backend>] that replaces the recipe's (when set)
    default: object = None
    type: str = "str"  # str | int | float | bool | ints (comma-separated whole numbers) | strs (repeatable)
    minimum: int = 0  # whole numbers: the least accepted
    action: str = ""  # store_true (a flag), store_false (a flag that turns it off), append (repeatable), '': one value
    arg_type: str = ""  # argparse type: positive | non_negative | int_list (patchkit.cli.base)
    choices: tuple[str, ...] = ()
    metavar: str = ""
    adds: bool = False  # command-line values add to the recipe's instead of replacing them
    nargs: str = ""
    empty: bool = True  # an empty value ('' or no items) is one: False refuses it in one line (a path, an arch)

    @property
    def arg(self) -> str:
        """The argparse destination this setting is read from."""
        if self.dest:
            return self.dest
        if not self.flags:
            return ""
        return self.flags[0].lstrip("-").replace("-", "_")

    @property
    def label(self) -> str:
        """How an error names it: '--test-procs / PATCHKIT_TEST_PROCS', '--rounds', 'bench.decode.max-rounds'."""
        first = next((f for f in self.flags if f.startswith("--")), "")
        names = [n for n in (first, self.env) if n]
        return " / ".join(names) or self.key or self.name


@dataclass(frozen=True)
class Value:
    value: object
    source: str  # one of SOURCES
    why: str = ""  # the default's reason, or the environment variable's name


def _int(v: object, what: str, minimum: int = 0) -> int:
    try:
        n = int(v)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise OptionError(f"{what}: expected a whole number, got {v!r}") from None
    if n < minimum:
        raise OptionError(f"{what}: expected at least {minimum}, got {n}")
    return n


def convert(o: Option, v: object, what: str = "") -> object:
    """A value of `o` in its type, checked: one line naming `what` (the flag, variable or key) otherwise."""
    what = what or o.label
    if not o.empty and v in ("", None, (), []):
        raise OptionError(f"{what}: expected a value, got {v!r}")
    if o.choices and v not in o.choices:
        raise OptionError(f"{what}: expected one of {', '.join(o.choices)}, got {v!r}")
    if o.type == "int":
        return _int(v, what, o.minimum)
    if o.type == "float":
        try:
            return float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise OptionError(f"{what}: expected a number, got {v!r}") from None
    if o.type == "bool":
        return bool(v)
    if o.type in ("ints", "strs"):
        items = v.split(",") if isinstance(v, str) else v
        out = tuple(x.strip() if isinstance(x, str) else x for x in items)  # type: ignore[union-attr]
        if not o.empty and not [x for x in out if x != ""]:
            raise OptionError(f"{what}: expected a value, got {v!r}")
        return tuple(_int(x, what) for x in out) if o.type == "ints" else tuple(str(x) for x in out if x != "")
    return "" if v is None else str(v)
