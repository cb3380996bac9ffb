"""The author's prose and the patch list: recipe_info (recorded in results.json) of the newest run.

The author's words are kept as they are, character for character: only soft wraps are undone (`reflow`:
a single newline inside a paragraph or list item becomes a space; paragraphs, list items, code blocks,
tables and headings keep their lines). Non-ASCII characters in them are not replaced but named in the
report's footer (`non_ascii_prose`), since llama.cpp's AGENTS.md asks for ASCII. Related upstream PRs
and issues (recipe_info.related) become links.
"""

from __future__ import annotations

import re

from patchkit.report.evidence import Evidence, Patch, Prose, Related
from patchkit.report.fmt import DASH, code, non_ascii
from patchkit.report.merge import patch_shas
from patchkit.report.runview import RunView

UPSTREAM = "ggml-org/llama.cpp"  # the repository a bare '#N' refers to
_REF = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)?#(?P<n>\d+)\b[:,]?\s*(?P<text>.*)$", re.DOTALL)
_URL = re.compile(r"^(?P<url>https?://\S+?)[.,;:]?(?:\s+[:-]?\s*(?P<text>.*))?$", re.DOTALL)
_GH = re.compile(r"^https?://github\.com/(?P<repo>[\w.-]+/[\w.-]+)/(?:pull|issues)/(?P<n>\d+)\b")
_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,9}[.)])(?:\s+|$)")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_VERBATIM = re.compile(r"^\s{0,3}(?:\||#{1,6}(?:\s|$)|>|<|(?:[-*_]\s*){3,}$)")


def prose_run(runs: list[RunView]) -> RunView:
    """The run whose recipe_info (author prose) is used: the newest one (by created, then run id)."""
    return max(runs, key=lambda r: (str(r.data.get("created") or ""), r.run_id))


def patches_of(runs: list[RunView]) -> list[Patch]:
    run = prose_run(runs)
    info = run.data.get("recipe_info") or {}
    env_shas = patch_shas(run)
    out = []
    for p in info.get("patches") or []:
        f = str(p.get("file") or "")
        out.append(
            Patch(
                id=str(p.get("id") or ""),
                file=f,
                subject=str(p.get("subject") or ""),
                upstream_pr=str(p.get("upstream_pr") or ""),
                depends_on=[str(x) for x in p.get("depends_on") or []],
                local=bool(p.get("local")),
                sha256=str(p.get("sha256") or env_shas.get(f) or ""),
            )
        )
    return out


def related(ref: str) -> Related:
    """'ggml-org/llama.cpp#15035: what', '#15035 what' (llama.cpp), or a URL (then what) -> a link."""
    s = ref.strip()
    if m := _REF.match(s):
        repo = m["repo"] or UPSTREAM
        return Related(
            ref=ref, url=f"https://github.com/{repo}/pull/{m['n']}", label=f"{repo}#{m['n']}", text=m["text"].strip()
        )
    if m := _URL.match(s):
        gh = _GH.match(m["url"])
        label = f"{gh['repo']}#{gh['n']}" if gh else m["url"]
        return Related(ref=ref, url=m["url"], label=label, text=(m["text"] or "").strip())
    return Related(ref=ref, url="", label="", text=s)


def prose(runs: list[RunView], patches: list[Patch]) -> Prose:
    """Title (recipe_info.title, else the top PR patch's subject), overview, AI disclosure, notes, related."""
    run = prose_run(runs)
    info = run.data.get("recipe_info") or {}
    title = str(info.get("title") or "")
    pr = [p for p in patches if not p.local]
    if not title and pr:
        title = pr[-1].subject  # the top of the series
    return Prose(
        title=title,
        overview=str(info.get("overview") or ""),
        ai_disclosure=str(info.get("ai_disclosure") or ""),
        notes=[str(n) for n in info.get("notes") or []],
        from_run=run.run_id,
        related=[related(str(r)) for r in info.get("related") or [] if str(r).strip()],
    )


# ---------------------------------------------------------------------------------------------
# Reflowing the author's text


def _hard_break(line: str) -> bool:
    return line.endswith(("  ", "\\"))


def reflow(text: str) -> str:
    """Soft wraps undone: the lines of a paragraph or list item joined with one space; blank lines, list
    item starts, fenced and indented code, tables, headings, quotes, HTML and hard breaks kept."""
    out: list[str] = []
    cur: str | None = None  # the paragraph or list item being joined
    fence, in_list, code_block, blank = "", False, False, True
    for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if fence:
            out.append(ln)
            fence = "" if ln.strip().startswith(fence) else fence
            continue
        stripped = ln.strip()
        lead = len(ln) - len(ln.lstrip(" \t"))
        indented = lead >= 4 or ln.startswith("\t")
        if not stripped:
            cur = _flush(out, cur)
            if out and out[-1] != "":
                out.append("")
            blank = True
            continue
        if m := _FENCE.match(ln):
            cur, fence, in_list = _flush(out, cur), m.group(1), in_list and lead >= 2
            out.append(ln)
        elif (code_block or (blank and not in_list)) and indented:
            cur, code_block = _flush(out, cur), True
            out.append(ln)
        elif _ITEM.match(ln):
            cur = _flush(out, cur)
            cur, in_list, code_block = ln, True, False
        elif _VERBATIM.match(ln):
            cur, code_block, in_list = _flush(out, cur), False, in_list and lead >= 2
            out.append(ln)
        elif cur is not None and not blank and not _hard_break(cur):
            cur = cur.rstrip() + " " + ln.lstrip()
        else:
            cur = _flush(out, cur)
            in_list = in_list and (lead >= 2 or not blank)
            cur, code_block = (ln if in_list else ln.lstrip()), False
        blank = False
    _flush(out, cur)
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out)


def _flush(out: list[str], cur: str | None) -> None:
    """The joined line out, trailing blanks dropped unless they make a hard break."""
    if cur is not None:
        out.append(cur if _hard_break(cur) else cur.rstrip())
    return None


def indent_rest(text: str, pad: str = "  ") -> str:
    """Every line after the first indented by pad (a multi-paragraph text under a list bullet)."""
    first, *rest = text.split("\n")
    return "\n".join([first, *[(pad + x) if x else x for x in rest]])


def non_ascii_prose(ev: Evidence) -> list[str]:
    """Where the author's text has non-ASCII characters: 'overview (U+2014, U+2192)', one entry per field."""
    p = ev.prose
    fields = [("title", p.title), ("overview", p.overview), ("AI disclosure", p.ai_disclosure)]
    fields += [(f"note {i}", n) for i, n in enumerate(p.notes, 1)]
    fields += [(f"related {i}", r.ref) for i, r in enumerate(p.related, 1)]
    fields += [(f"subject of patch {x.id}", x.subject) for x in ev.patches]
    return [f"{where} ({', '.join(chars)})" for where, s in fields if (chars := non_ascii(s))]


# ---------------------------------------------------------------------------------------------
# Markdown: the Additional information lists


def related_line(r: Related) -> str:
    if not r.url:
        return r.text
    return f"[{r.label}]({r.url})" + (f": {r.text}" if r.text else "")


def _item(p: Patch) -> str:
    s = f"{code(p.id)} {p.subject or DASH} ({code(p.file)})"
    return s + "; depends on: " + (", ".join(code(d) for d in p.depends_on) if p.depends_on else "none")


def additional(ev: Evidence) -> dict[str, list[str]]:
    """The author's notes (reflowed), the related PRs and issues (links), the local test-only patches."""
    return {
        "notes": [indent_rest(reflow(n)) for n in ev.prose.notes],
        "related": [related_line(r) for r in ev.prose.related],
        "local": [_item(p) for p in ev.patches if p.local],
    }
