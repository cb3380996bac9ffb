"""What a setting is (`Option`, written `opt(...)` / `flag(...)` in the tables), what it resolved to
(`Value`) and how a raw value becomes one of its type (`convert`), and the chain of one setting
(`resolve_one`): the declaration machinery of patchkit.option_set, whose table (with
patchkit.option_measure's half) declares every setting."""

from __future__ import annotations

from collections.abc import Mapping
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


def opt(name: str, help: str, *flags: str, **kw) -> Option:
    """A declaration as the tables write it: name, help, then its flags."""
    return Option(name=name, help=help, flags=flags, **kw)


def flag(name: str, help: str, *flags: str, **kw) -> Option:
    """A setting that is off unless its flag is typed."""
    return Option(name=name, help=help, flags=flags, type="bool", default=False, action="store_true", **kw)


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


def _attr(obj: object, path: str) -> object:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _from_recipe(o: Option, recipe: object) -> tuple[bool, object]:
    """(whether the recipe gives `o` a value, the value): a key the file wrote, 0 and empty values too; in a
    recipe made or changed in code (no record of the keys written), a value other than the declared default."""
    if not o.recipe or recipe is None:
        return False, None
    v = _attr(recipe, o.recipe)
    keys = getattr(recipe, "keys", None)
    return (keys is not None and o.key in keys) or v != o.default, v


def resolve_one(
    o: Option,
    cli: Mapping[str, object],
    environ: Mapping[str, str],
    *,
    recipe: object = None,
    profile: object = None,
    default: tuple[object, str] | None = None,
) -> Value:
    """The chain of one setting: its default (or `default`, a (value, reason) the machine gives) < the
    recipe (its [profile.<backend>] over its plain key) < the environment < the command line; the source
    is the highest layer that gave a value. A layer gives one when it has the setting at all: `cli` holds
    only what was typed (the parser is sparse: patchkit.cli.base.typed), a variable set to '' is set, and
    0, '' and false are values wherever they come from."""
    value, why = default if default is not None else (o.default, "default")
    got = Value(value, "default", why)
    has, v = _from_recipe(o, recipe)
    if has:
        got = Value(v, "recipe", o.key)
    if o.profile and profile is not None and getattr(profile, o.profile) is not None:
        got = Value(getattr(profile, o.profile), "recipe", f"profile.{o.profile}")
    if o.env and o.env in environ:
        raw = environ[o.env]
        got = Value(convert(o, raw if o.type not in ("ints", "strs") else (raw,), o.label), "environment", o.env)
    if o.arg and o.arg in cli:
        v = cli[o.arg] if o.action != "store_false" else False
        if o.adds:
            v = tuple(got.value) + tuple(v)  # type: ignore[arg-type]
        got = Value(v, "command line", "command line")
    what = o.key if got.source == "recipe" and o.key else o.label
    return Value(convert(o, got.value, what), got.source, got.why)
