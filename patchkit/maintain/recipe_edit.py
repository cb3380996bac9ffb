"""Editing hand-written recipes: a few values replaced, tables added, commented out or inserted, and
everything else - prose, comments, order, formatting of untouched lines - kept exactly (tomlkit).

tomlkit has no call to put comment lines before an item or to turn a table into comment lines. The
text rendered before an item is its `trivia.indent` (where tomlkit itself keeps the blank line before
a table it adds), so such lines go there (`_Doc.lead`), once every other edit is done: tomlkit reads
a table's indent to indent the keys added to it. Text before the whole document or after its last
table is kept on the side (`_Doc.head`, `_Doc.tail`).
"""

from __future__ import annotations

import tomlkit
from tomlkit.items import AoT, Comment, Item, Null, Table, Whitespace
from tomlkit.toml_document import TOMLDocument

from patchkit.recipe import Base, Patch

DROPPED_NOTE = "already upstream in the new base; dropped by patchkit rebase"
OLD_GIT_NOTE = "(the previous base's git commit; not this recipe's base)"
OLD_SDIST_NOTE = "(the previous base's sdist; it does not vendor this recipe's base)"


class _Doc:
    def __init__(self, text: str):
        self.doc: TOMLDocument = tomlkit.parse(text if text.endswith("\n") or not text else text + "\n")
        self.head = ""  # text before the document
        self.tail = ""  # text after the document's last table
        self.leads: dict[int, tuple[Item, str]] = {}  # id(item) -> (item, text to write before it)

    def lead(self, item: Item, text: str) -> None:
        """Write `text` right before `item` (before what was to be written there already)."""
        self.leads[id(item)] = (item, text + self.leads.get(id(item), (item, ""))[1])

    def take_lead(self, item: Item) -> str:
        """The text to be written before `item`, which is about to be removed."""
        return self.leads.pop(id(item), (item, ""))[1]

    def text(self) -> str:
        for item, text in self.leads.values():
            item.trivia.indent = text + item.trivia.indent
        self.leads.clear()
        return self.head + tomlkit.dumps(self.doc) + self.tail

    def headers(self) -> list[tuple[str, Table]]:
        """Every table that renders a [header] or [[header]], in the order they are written."""
        return _headers(self.doc.body, ())

    def lead_next(self, table: Table, text: str) -> None:
        """Put `text` right before the header that follows `table` (or at the end)."""
        heads = [t for _, t in self.headers()]
        at = next(i for i, t in enumerate(heads) if t is table) + 1
        if at < len(heads):
            self.lead(heads[at], text)
        else:
            self.tail = text + self.tail


def _headers(body: list, prefix: tuple[str, ...]) -> list[tuple[str, Table]]:
    out: list[tuple[str, Table]] = []
    for k, v in body:
        if k is None:
            continue
        path = (*prefix, k.key)
        if isinstance(v, AoT):
            for t in v.body:
                out += [(".".join(path), t), *_headers(t.value.body, path)]
        elif isinstance(v, Table):
            if not v.is_super_table():
                out.append((".".join(path), v))
            out += _headers(v.value.body, path)
    return out


def _key(table: Table, name: str) -> str | None:
    """The key as the recipe spells it (`depends-on` or `depends_on`)."""
    return next((k for k in table if k.replace("-", "_") == name), None)


def _set(table: Table, name: str, value: object) -> None:
    """Replace a value (its line's comment and indent kept), or add the key at the table's end."""
    table[_key(table, name) or name] = value


def _drop(table: Table, name: str) -> None:
    k = _key(table, name)
    if k is not None:
        del table[k]


def _commented(lines: str) -> str:
    return "".join(("# " + ln) if ln.strip() else "#\n" for ln in lines.splitlines(keepends=True))


def _content_end(body: list) -> int:
    """Where the trailing blank and comment lines of a table's body begin."""
    n = len(body)
    while n and body[n - 1][0] is None and isinstance(body[n - 1][1], (Whitespace, Comment, Null)):
        n -= 1
    return n


def _split_tail(table: Table) -> tuple[str, str]:
    """The table's body as text, less its trailing blank and comment lines (which are returned
    second: they introduce what follows more than they belong to this table)."""
    body = table.value.body
    n = _content_end(body)
    tail = "".join(v.as_string() for _, v in body[n:])
    text = table.as_string()
    return text[: len(text) - len(tail)], tail


def _comment_out(d: _Doc, table: Table, name: str, note: str, *, aot: bool) -> str:
    """The lines that replace `table` (its header, keys and values as comments after `note`); the
    caller removes the table and hands the text to `d.lead_next` first."""
    text, tail = _split_tail(table)
    t = table.trivia
    opening, closing = ("[[", "]]") if aot else ("[", "]")
    header = f"{opening}{table.display_name or name}{closing}{t.comment_ws}{t.comment}\n"
    return f"{d.take_lead(table)}{t.indent}# {note}\n{_commented(header + text)}{tail}"


def _comment_out_table(d: _Doc, parent: Table, key: str, name: str, note: str) -> None:
    table = parent.get(key)
    if not isinstance(table, Table):
        return
    lines = _comment_out(d, table, name, note, aot=False)
    d.lead_next(table, lines)
    del parent[key]


def _comment_out_element(d: _Doc, aot: AoT, index: int, name: str, note: str) -> None:
    table = aot[index]
    lines = _comment_out(d, table, name, note, aot=True)
    d.lead_next(table, lines)
    del aot[index]
    if not len(aot):
        del d.doc[name]


def _new_table(pairs: dict[str, str], prev: Table | None) -> Table:
    """A new table of `pairs` to be written right after `prev`, after a blank line; `prev`'s trailing
    blank and comment lines move below it (they introduce what follows `prev`)."""
    t = tomlkit.table()
    for k, v in pairs.items():
        t.add(k, v)
    if prev is not None:
        t.trivia.indent = "\n"
        body = prev.value.body
        n = _content_end(body)
        for _, item in body[n:]:
            if not isinstance(item, Null):
                t.add(item)
        del body[n:]  # unkeyed items only: no key's index in the container changes
    return t


def _last_of(d: _Doc, name: str) -> Table | None:
    """The last table written of `name` and its sub-tables."""
    last = [t for n, t in d.headers() if n == name or n.startswith(name + ".")]
    return last[-1] if last else None


def comment_block(text: str, width: int = 98) -> str:
    """`text` word-wrapped as '# ' comment lines."""
    out, line = [], ""
    for w in text.split():
        if line and len(line) + 1 + len(w) > width:
            out.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return "".join(f"# {ln}\n" for ln in ([*out, line] if line else out))


# ---------------------------------------------------------------------------------------------
# The rebase rewrite


def rewrite_recipe(
    text: str, *, name: str, base: Base, files: dict[str, str], dropped: dict[str, str], note: str, prov: dict
) -> str:
    """The recipe text with a new name, base and patch files; every other line (prose, comments) kept.

    `files`: old patch file -> new one; `dropped`: file -> id of patches already upstream (their
    tables are commented out, and they leave every depends-on); `note` goes on top, as a comment."""
    d = _Doc(text)
    _set_name(d, name)
    b = d.doc["base"]
    _set(b, "source", base.route)
    if base.upstream:
        _set(b, "upstream", base.upstream)
    else:
        _drop(b, "upstream")
    _set_git(d, b, base)
    _set_sdist(d, b, base, prov)
    _set_series(d, files, dropped)
    d.head = comment_block(note) + d.head
    return d.text()


def _set_name(d: _Doc, name: str) -> None:
    if "recipe" in d.doc:
        _set(d.doc["recipe"], "name", name)
        return
    table = tomlkit.dumps({"recipe": {"name": name}}) + "\n"
    heads = d.headers()
    if heads:  # before the first table, after the file's opening comments
        d.lead(heads[0][1], table)
    else:
        d.tail += table


def _set_git(d: _Doc, b: Table, base: Base) -> None:
    git = b.get("git")
    if base.git is None:
        _comment_out_table(d, b, "git", "base.git", OLD_GIT_NOTE)
    elif isinstance(git, Table):
        _set(git, "url", base.git.url)
        _set(git, "commit", base.git.commit)
    else:
        b.add("git", _new_table({"url": base.git.url, "commit": base.git.commit}, _last_of(d, "base")))


def _set_sdist(d: _Doc, b: Table, base: Base, prov: dict) -> None:
    sd = base.sdist
    table = b.get("sdist")
    if sd is None:
        _comment_out_table(d, b, "sdist", "base.sdist", OLD_SDIST_NOTE)
        return
    if isinstance(table, Table):
        _set(table, "name", sd.name)
        _set(table, "version", sd.version)
        _set(table, "sha256", sd.sha256)
        _drop(table, "url")  # a direct URL named the old version's file
    else:
        pairs = {"name": sd.name, "version": sd.version, "sha256": sd.sha256, "subdir": sd.subdir}
        table = _new_table(pairs, _last_of(d, "base"))
        b.add("sdist", table)
    if prov.get("sha256_from") == "index":
        line = (
            f"# sha256 taken from the index's JSON simple API ({prov.get('index_url')}, files[].hashes.sha256)"
            " by patchkit rebase\n"
        )
        _lead_once(d, table, "sha256", line)


def _lead_once(d: _Doc, table: Table, name: str, line: str) -> None:
    """`line` before the key `name`, unless the line before it is that already."""
    key = _key(table, name)
    if key is None:
        return
    body = table.value.body
    at = next(i for i, (k, _) in enumerate(body) if k is not None and k.key == key)
    if at > 0 and isinstance(body[at - 1][1], Comment) and body[at - 1][1].as_string() == line:
        return
    d.lead(body[at][1], line)


def _set_series(d: _Doc, files: dict[str, str], dropped: dict[str, str]) -> None:
    """New patch files; patches already upstream commented out, and no longer depended on."""
    aot = d.doc.get("series")
    if not isinstance(aot, AoT):
        return
    dropped_ids = set(dropped.values()) | set(dropped)
    old_files = []
    for t in aot:
        fk = _key(t, "file")
        old = str(t[fk]) if fk else ""
        old_files.append(old)
        if old in files:
            t[fk] = files[old]
        dk = _key(t, "depends_on")
        if dk is None or not dropped_ids:
            continue
        deps = t[dk].unwrap()
        deps = [deps] if isinstance(deps, str) else list(deps)
        kept = [x for x in deps if x not in dropped_ids]
        if kept == deps:
            continue
        if kept:
            t[dk] = kept
        else:
            del t[dk]
    for i in reversed(range(len(old_files))):
        if old_files[i] in dropped:
            _comment_out_element(d, aot, i, "series", DROPPED_NOTE)


# ---------------------------------------------------------------------------------------------
# Refresh: new [[series]] tables


def add_series(text: str, patches: list[Patch], *, after: int | None) -> str:
    """The recipe with a [[series]] table (file, id) for each new patch, right after the series
    table number `after` (0-based; None: after the last one)."""
    d = _Doc(text)
    aot = d.doc.get("series")
    if not isinstance(aot, AoT):
        aot = tomlkit.aot()
        d.doc.append("series", aot)
    at = len(aot) if after is None else after + 1
    for p in patches:
        aot.insert(at, _new_table({"file": p.file, "id": p.id}, aot[at - 1] if at > 0 else None))
        at += 1
    return d.text()
