"""The markdown view of the report's evidence (patchkit.report.evidence): tables, fixed labels and
sentences generated from the data, laid out by templates/pr.md.j2.

Every section is a list of blocks: {"kind": "table", "header", "rows"}, {"kind": "list", "items"},
{"kind": "heading", "text"} or {"kind": "text", "text"}. Every table is followed by a "Raw logs:"
line naming its logs. Numbers have fixed formats (FORMATS) so the same evidence gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2

NOT_PROVIDED = "_(not provided by the author)_"
DASH = "—"
# decimals per quantity (tests read these to check every number in a table against the data)
FORMATS = {"us": 2, "ts": 2, "ratio": 3, "pct": 1, "seconds": 1, "kld": 6}
TEMPLATES = Path(__file__).resolve().parent / "templates"


def num(x: Any, kind: str) -> str:
    if x is None or isinstance(x, bool):
        return DASH
    return f"{float(x):.{FORMATS[kind]}f}"


def interval(lo: Any, hi: Any, kind: str) -> str:
    return f"[{num(lo, kind)}–{num(hi, kind)}]"


def pct(x: Any) -> str:
    return DASH if x is None else f"{num(x, 'pct')} %"


def code(s: Any) -> str:
    s = str(s)
    fence = "``" if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def cell(s: Any) -> str:
    return str(s).replace("\r", " ").replace("\n", " ").replace("|", "\\|")


def table(header: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    return {"kind": "table", "header": [cell(h) for h in header], "rows": [[cell(c) for c in r] for r in rows]}


def text(t: str) -> dict[str, Any]:
    return {"kind": "text", "text": t}


def bullets(items: list[str]) -> dict[str, Any]:
    return {"kind": "list", "items": [str(i).replace("\n", " ") for i in items]}


def heading(t: str) -> dict[str, Any]:
    return {"kind": "heading", "text": t}


def logs_line(logs: list[str] | None, none: str = "none") -> dict[str, Any]:
    logs = [x for x in logs or [] if x]
    return text("Raw logs: " + (", ".join(code(x) for x in dict.fromkeys(logs)) if logs else none))


def state_label(status: Any, reason: Any) -> str:
    status, reason = str(status or ""), str(reason or "")
    if status == "ok":
        return "ok"
    if status == "fail":
        return "FAIL" + (f": {reason}" if reason else "")
    if status == "error":
        return "error" + (f": {reason}" if reason else "")
    return "not run" + (f": {reason}" if reason else "")


def _gpu_col(multi: bool, gpu: str) -> list[str]:
    return [gpu] if multi else []


def _not_run(runs: list[dict], multi: bool) -> list[dict[str, Any]]:
    """'not run: reason' lines for runs whose step has no data."""
    return [text((f"{e['gpu']}: " if multi else "") + state_label(e["status"], e["reason"])) for e in runs]


# ---------------------------------------------------------------------------------------------
# 1. Hardware / software


def _get(d: Any, *path: str) -> Any:
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _unit(x: Any, unit: str) -> str | None:
    return None if x in (None, "", 0) else f"{x} {unit}"


HW_FIELDS: list[tuple[str, Callable[[dict], Any]]] = [
    ("GPU", lambda e: _get(e, "gpu", "name")),
    ("compute capability", lambda e: _get(e, "gpu", "cc")),
    ("SMs", lambda e: _get(e, "gpu", "sm_count")),
    ("shared memory per SM", lambda e: _unit(_get(e, "gpu", "smem_per_sm_kb"), "KB")),
    ("L2 cache", lambda e: _unit(_get(e, "gpu", "l2_mb"), "MB")),
    ("memory", lambda e: _unit(_get(e, "gpu", "mem_total_mb"), "MB")),
    ("peak DRAM bandwidth", lambda e: _unit(_get(e, "gpu", "peak_bw_gbs"), "GB/s")),
    (
        "memory clock / bus",
        lambda e: (
            f"{_get(e, 'gpu', 'mem_clock_mhz')} MHz / {_get(e, 'gpu', 'bus_width_bits')} bit"
            if _get(e, "gpu", "mem_clock_mhz")
            else None
        ),
    ),
    ("SM clock max", lambda e: _unit(_get(e, "gpu", "sm_clock_max_mhz"), "MHz")),
    ("driver", lambda e: _get(e, "gpu", "driver") or _get(e, "gpu", "driver_api")),
    ("CUDA", lambda e: " / ".join(f"{k} {v}" for k, v in sorted((_get(e, "cuda") or {}).items()) if v) or None),
    (
        "C / C++ compiler",
        lambda e: (
            " / ".join(
                str(v) for v in ((_get(e, "compiler") or {}).get("c"), (_get(e, "compiler") or {}).get("cxx")) if v
            )
            or None
        ),
    ),
    ("CMake", lambda e: _get(e, "cmake")),
    ("Ninja", lambda e: _get(e, "ninja")),
    (
        "OS",
        lambda e: (
            " ".join(str(e["os"][k]) for k in ("system", "release", "machine") if e["os"].get(k))
            if isinstance(e.get("os"), dict)
            else e.get("os")
        ),
    ),
    (
        "CPU",
        lambda e: ", ".join(x for x in (_get(e, "cpu", "model"), _unit(_get(e, "cpu", "cores"), "cores")) if x) or None,
    ),
    (
        "CMake flags",
        lambda e: code(" ".join(str(f) for f in e.get("cmake_flags") or [])) if e.get("cmake_flags") else None,
    ),
]


def _base_line(b: dict[str, Any]) -> str:
    commit = str(b.get("commit") or "")
    s = f"commit {code(commit[:12])}" if commit else "commit not recorded"
    if b.get("upstream"):
        s = f"{code(b['upstream'])}, " + s
    if b.get("upstream_verified"):
        s += " (verified: upstream's own commit and tree)"
    elif b.get("route") == "sdist":
        s += f" (imported from {code(b.get('sdist_file') or 'sdist')}, sha256 {code(str(b.get('sdist_sha256') or '')[:12])}; not verified as upstream's commit)"
    else:
        s += " (not verified against upstream)"
    return s


def hardware(ev: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    hw = ev["hardware"]
    rows = []
    for label, fn in HW_FIELDS:
        vals = []
        for h in hw:
            v = fn(h["env"]) if h["env"] else None
            vals.append(DASH if v in (None, "") else v)
        if label.startswith("GPU") or any(v != DASH for v in vals):
            rows.append([label, *vals])
    rows.append(["run", *[code(h["run_id"]) for h in hw]])
    out = [table(["", *[h["gpu"] for h in hw]], rows)]
    missing = [h["gpu"] for h in hw if h["env_missing"]]
    out.append(
        text(
            "Raw logs: none (recorded in `env.json`"
            + (f"; no `env.json` for {', '.join(missing)}" if missing else "")
            + ")"
        )
    )
    bases = {_base_line(h["base"]) for h in hw}
    if len(bases) == 1:
        out.append(text("Base: " + bases.pop() + "."))
    else:
        out.append(bullets([f"Base on {h['gpu']}: {_base_line(h['base'])}" for h in hw]))
    if ev["merge_problems"]:
        out.append(text("Merged with `--force` although: " + "; ".join(ev["merge_problems"]) + "."))
    if ev["patches"]:
        rows = [
            [
                code(p["id"]),
                p["subject"],
                code(p["file"]),
                code(p["sha256"][:12]) if p["sha256"] else DASH,
                "local test-only" if p["local"] else "yes",
            ]
            for p in ev["patches"]
        ]
        out.append(table(["patch", "subject", "file", "sha256", "in this PR"], rows))
        out.append(text("Raw logs: none (sha256s recorded in `results.json`)"))
    return out


# ---------------------------------------------------------------------------------------------
# 2. Builds and compile checks


def builds(ev: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rows, logs, notes = [], [], []
    for b in ev["builds"]:
        if not b["configs"]:
            out += _not_run([b], multi)
        for c in b["configs"]:
            logs += c["logs"]
            if c["status"] != "ok":
                notes.append(
                    (f"{b['gpu']}: " if multi else "")
                    + f"`build:{c['config']}`: "
                    + state_label(c["status"], c["reason"])
                )
            if c["cmake_args"]:
                notes.append(
                    (f"{b['gpu']}: " if multi else "")
                    + f"CMake arguments (`{c['config']}`): "
                    + code(" ".join(str(a) for a in c["cmake_args"]))
                )
            for v in c["variants"]:
                logs.append(v["log"])
                reused = DASH if v["reused"] is None else ("yes" if v["reused"] else "no")
                rows.append(
                    [
                        *_gpu_col(multi, b["gpu"]),
                        c["config"],
                        code(v["variant"]),
                        num(v["seconds"], "seconds"),
                        reused,
                        code(str(v["head"] or "")[:12]) if v["head"] else DASH,
                    ]
                )
    if rows:
        out.append(table([*_gpu_col(multi, "GPU"), "config", "variant", "build s", "reused", "head"], rows))
        out.append(logs_line(logs))
    out += [text(n) for n in notes]
    rows, logs = [], []
    for b in ev["builds"]:
        for c in b["checks"]:
            logs += c["logs"]
            for it in c["items"]:
                res = "ok" if it["ok"] else "FAIL" + (f": {it['error']}" if it.get("error") else "")
                rows.append(
                    [*_gpu_col(multi, b["gpu"]), c["config"], code(it["variant"]), it["arch"], code(it["source"]), res]
                )
            if not c["items"]:
                rows.append(
                    [*_gpu_col(multi, b["gpu"]), c["config"], DASH, DASH, DASH, state_label(c["status"], c["reason"])]
                )
    if rows:
        out.append(heading("Compile checks"))
        out.append(table([*_gpu_col(multi, "GPU"), "config", "variant", "arch", "source", "result"], rows))
        out.append(logs_line(logs))
    else:
        out.append(text("Compile checks: " + state_label("absent", ev["builds"][0].get("checks_reason", ""))))
    return out


# ---------------------------------------------------------------------------------------------
# 3. test-backend-ops


def _variant_result(v: dict[str, Any]) -> str:
    if v["status"] == "ok":
        return "passed"
    return state_label(v["status"], v["reason"])


def _passed(b: dict[str, Any]) -> str:
    if b.get("tests_total") is None:
        return DASH
    return f"{b.get('tests_passed')}/{b['tests_total']}"


def _backend_result(b: dict[str, Any]) -> str:
    return {
        "ok": "ok",
        "fail": "FAIL",
        "skipped": "skipped",
        "not_run": "not run (0 cases)",
        "incomplete": "incomplete",
    }.get(str(b["status"]), str(b["status"]))


def tests(ev: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    t = ev["tests"]
    if not t["suites"]:
        return _not_run(t["runs"], multi)
    out: list[dict[str, Any]] = []
    for s in t["suites"]:
        out.append(heading(f"`test:{s['suite']}`"))
        rows, logs, failing, diffs, notes = [], [], [], [], []
        for e in s["runs"]:
            pre = f"{e['gpu']}: " if multi else ""
            logs += e["logs"]
            if "variants" not in e:
                notes.append(pre + state_label(e["status"], e["reason"]))
                continue
            notes.append(
                pre
                + f"arguments {code(' '.join(e['args']))}"
                + (f", backend {code(e['backend'])}" if e.get("backend") else "")
                + "."
            )
            if e["status"] in ("fail", "error"):
                notes.append(pre + "step result: " + state_label(e["status"], e["reason"]))
            for v in e["variants"]:
                logs.append(v["log"])
                ns = DASH if v["n_not_supported"] is None else str(v["n_not_supported"])
                for b in v["backends"] or [None]:
                    if b is None:
                        rows.append(
                            [
                                *_gpu_col(multi, e["gpu"]),
                                code(v["variant"]),
                                _variant_result(v),
                                DASH,
                                DASH,
                                DASH,
                                ns,
                                DASH,
                            ]
                        )
                        continue
                    ran = b["status"] not in (
                        "skipped",
                        "not_run",
                    )  # the variant's counts belong to the backend that ran
                    rows.append(
                        [
                            *_gpu_col(multi, e["gpu"]),
                            code(v["variant"]),
                            _variant_result(v),
                            b["name"],
                            _backend_result(b),
                            _passed(b),
                            ns if ran else DASH,
                            str(len(b["failing"])) if ran else DASH,
                        ]
                    )
                    failing += [f"{pre}{code(v['variant'])} on {b['name']}: {code(f)}" for f in b["failing"]]
            for v, d in e["diff"].items():
                parts = [
                    f"{k.replace('_', ' ')} ({len(d[k])}): " + ", ".join(code(x) for x in d[k])
                    for k in ("new_failures", "fixed", "disappeared", "appeared")
                    if d[k]
                ]
                diffs.append(
                    f"{pre}{code(v)} vs `base`: "
                    + ("; ".join(parts) if parts else "no new failures, no fixed, disappeared or appeared cases")
                )
        out += [text(n) for n in notes]
        if rows:
            out.append(
                table(
                    [
                        *_gpu_col(multi, "GPU"),
                        "variant",
                        "result",
                        "backend",
                        "backend result",
                        "passed/total",
                        "not supported",
                        "failing",
                    ],
                    rows,
                )
            )
            out.append(logs_line(logs))
        if failing:
            out += [text("Failing cases:"), bullets(failing)]
        if diffs:
            out += [text("Against base:"), bullets(diffs)]
    return out


# ---------------------------------------------------------------------------------------------
# 4. Kernel timing


def _labels(runs: list[dict], key: str) -> list[str]:
    out: list[str] = []
    for e in runs:
        for lab in e.get(key) or []:
            if lab not in out:
                out.append(lab)
    return out


def kernel(ev: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    runs = ev["kernel"]["runs"]
    have = [e for e in runs if e.get("cases") is not None]
    out: list[dict[str, Any]] = (
        [] if len(have) == len(runs) else _not_run([e for e in runs if e.get("cases") is None], multi)
    )
    if not have:
        return out
    labels = _labels(have, "labels")
    for e in have:
        for c in e["cases"]:
            labels += [lab for lab in c["variants"] if lab not in labels]
    base = labels[0] if labels else "base"
    vs = [lab for lab in labels if lab != base]
    rows, logs, notes = [], [], []
    for e in have:
        logs += e["logs"]
        pre = f"{e['gpu']}: " if multi else ""
        for c in e["cases"]:
            row = [*_gpu_col(multi, e["gpu"]), code(c["short"])]
            for lab in labels:
                v = c["variants"].get(lab)
                if not v:
                    row.append(DASH)
                    continue
                s = f"{num(v['median'], 'us')} {interval(v['min'], v['max'], 'us')}"
                if v.get("pct_peak") is not None:
                    s += f" ({pct(v['pct_peak'])} of peak)"
                row.append(s)
            for lab in vs:
                r = c["vs_base"].get(lab)
                row.append(_ratio_cell(r, e.get("noise_floor")) if r else DASH)
            rows.append(row)
        n = sorted({v["n"] for c in e["cases"] for v in c["variants"].values()})
        notes.append(
            pre
            + f"{code(e.get('op'))} on {code(e.get('backend'))}, {e.get('rounds')} interleaved rounds (samples per cell: {', '.join(str(x) for x in n)})."
        )
        floor = e.get("noise_floor")
        if floor is not None and any(c.get("aa_ratio") is not None for c in e["cases"]):
            notes.append(
                pre
                + f'A/A noise floor (`{base}` against its second copy): {num(100 * floor, "pct")} %; a change inside it reads "no measurable change".'
            )
        else:
            notes.append(pre + "A/A noise floor: not measured (no A/A copy of base in this run).")
        if e["status"] in ("fail", "error"):
            notes.append(pre + "step result: " + state_label(e["status"], e["reason"]))
        if e.get("peak_bw_gbs"):
            notes.append(
                pre
                + f"% of peak: bytes the op must move (K, V at their cache type, Q, mask, output) / median time / {e['peak_bw_gbs']} GB/s."
            )
    header = [*_gpu_col(multi, "GPU"), "case", *[f"{lab} µs" for lab in labels], *[f"{lab} / {base}" for lab in vs]]
    out.append(table(header, rows))
    out.append(logs_line(logs))
    out.append(
        text(
            f"Times: median µs per op call [min–max]; ratio = time(variant) / time({base}), < 1 is faster, with its 95 % interval."
        )
    )
    out += [text(n) for n in notes]
    if ev["kernel"].get("common_params"):
        out.append(text("Common parameters: " + code(ev["kernel"]["common_params"])))
    return out


def _ratio_cell(r: dict[str, Any], floor: float | None) -> str:
    s = f"{num(r['ratio'], 'ratio')} {interval(r['ci_low'], r['ci_high'], 'ratio')} {r['verdict']}"
    if r["verdict"] == "no measurable change" and floor is not None and abs(r["ratio"] - 1) <= floor:
        s += f" (inside the A/A noise floor of {pct(100 * floor)})"
    return s


# ---------------------------------------------------------------------------------------------
# 5. Kernel path


def kernel_name(name: str) -> str:
    """'void flash_attn_ext_f16<256, 256, 8>(const char*, ...)' -> 'flash_attn_ext_f16<256, 256, 8>'."""
    s = name.removeprefix("void ")
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            return s[:i]
    return s


def kernel_path(ev: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    runs = ev["kernel_path"]["runs"]
    have = [e for e in runs if e.get("cases") is not None]
    out: list[dict[str, Any]] = (
        [] if len(have) == len(runs) else _not_run([e for e in runs if e.get("cases") is None], multi)
    )
    if not have:
        return out
    rows, logs = [], []
    for e in have:
        logs += e["logs"]
        if e["status"] in ("fail", "error"):
            out.append(
                text((f"{e['gpu']}: " if multi else "") + "step result: " + state_label(e["status"], e["reason"]))
            )
        for c in e["cases"]:
            base = {k["name"] for k in c["variants"].get("base") or []}
            for v, ks in c["variants"].items():
                names = {k["name"] for k in ks}
                same = (
                    DASH
                    if v == "base" or not base
                    else ("same kernels as base" if names == base else "differs from base")
                )
                kern = (
                    "; ".join(f"{code(kernel_name(k['name']))} ×{k['count']}, {pct(100 * k['share'])}" for k in ks)
                    or DASH
                )
                rows.append([*_gpu_col(multi, e["gpu"]), code(c["short"]), code(v), kern, same])
    if rows:
        out.append(
            table([*_gpu_col(multi, "GPU"), "case", "variant", "kernels (launches, share of time)", "path"], rows)
        )
    out.append(logs_line(logs))
    counts = sorted({str(e.get("launch_count")) for e in have if e.get("launch_count")})
    out.append(
        text(
            "Kernels named by Nsight Compute (`ncu`)"
            + (f", first {', '.join(counts)} launches per variant and case" if counts else "")
            + "; share = kernel time / all profiled kernel time."
        )
    )
    return out


# ---------------------------------------------------------------------------------------------
# 6. Decode


def _model_line(e: dict[str, Any]) -> str:
    m = e.get("model") or {}
    parts = [
        f"{k} {str(v)[:12] if k == 'sha256' else v}"
        for k, v in sorted(m.items())
        if k != "path" and v not in (None, "", [], {}) and not isinstance(v, (dict, list))
    ]
    s = ", ".join(parts) if parts else "not described"
    if e.get("model_path"):
        s += f" ({code(e['model_path'])})"
    return s


def _vs(e: dict[str, Any], row: dict[str, Any], variant: str) -> dict[str, Any] | None:
    for v in e.get("vs_base") or []:
        if (
            v["variant"] == variant
            and v["depth"] == row["depth"]
            and all(v.get(k) in (None, row.get(k)) for k in ("type_k", "type_v", "n_gen"))
        ):
            return v
    return None


def decode(ev: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    runs = ev["decode"]["runs"]
    have = [e for e in runs if e.get("rows") is not None]
    out: list[dict[str, Any]] = (
        [] if len(have) == len(runs) else _not_run([e for e in runs if e.get("rows") is None], multi)
    )
    if not have:
        return out
    variants = [v for v in ev["variants"] if any(x["variant"] == v for e in have for x in e["rows"])]
    variants += sorted({x["variant"] for e in have for x in e["rows"]} - set(variants))
    base = "base" if "base" in variants else variants[0]
    others = [v for v in variants if v != base]
    rows, logs, notes = [], [], []
    for e in have:
        logs += e["logs"]
        pre = f"{e['gpu']}: " if multi else ""
        keys: dict[tuple, dict[str, dict]] = {}
        for x in e["rows"]:
            keys.setdefault((x["n_gen"] or 0, str(x["type_k"]), str(x["type_v"]), x["depth"]), {})[x["variant"]] = x
        for (_, tk, tv, _), by in keys.items():
            any_row = next(iter(by.values()))
            row = [*_gpu_col(multi, e["gpu"]), _test_name(any_row), f"{tk}/{tv}"]
            for v in variants:
                x = by.get(v)
                row.append(
                    f"{num(x['median'], 'ts')} {interval(x['ci_low'], x['ci_high'], 'ts')} n={len(x['samples_ts'])}"
                    if x
                    else DASH
                )
            for v in others:
                r = _vs(e, any_row, v) if v in by else None
                row.append(
                    f"{num(r['ratio'], 'ratio')} {interval(r['ci_low'], r['ci_high'], 'ratio')} {r['verdict']}"
                    if r
                    else DASH
                )
            rows.append(row)
        notes.append(pre + "Model: " + _model_line(e) + ".")
        if e.get("args"):
            notes.append(
                pre
                + "llama-bench arguments: "
                + code(" ".join(e["args"]))
                + (f"; {e['rounds']} interleaved round(s)" if e.get("rounds") else "")
                + "."
            )
        if e["status"] in ("fail", "error"):
            notes.append(pre + "step result: " + state_label(e["status"], e["reason"]))
    header = [
        *_gpu_col(multi, "GPU"),
        "test",
        "K/V cache",
        *[f"t/s {v}" for v in variants],
        *[f"speedup {v}" for v in others],
    ]
    out.append(table(header, rows))
    out.append(logs_line(logs))
    out.append(
        text(
            f"t/s: median of the samples [95 % interval], n = samples; speedup = t/s(variant) / t/s({base}), > 1 is faster, with its 95 % interval."
        )
    )
    out += [text(n) for n in notes]
    if ev.get("plot"):
        out.append(text(f"![decode t/s by depth]({ev['plot']})"))
    return out


def _test_name(row: dict[str, Any]) -> str:
    return f"tg{row.get('n_gen')}" + (f" @ d{row['depth']}" if row.get("depth") else "")


# ---------------------------------------------------------------------------------------------
# 7. Numerics


def _yes_no(x: Any) -> str:
    return DASH if x is None else ("yes" if x else "no")


def numerics(ev: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    runs = ev["numerics"]["runs"]
    have = [e for e in runs if e.get("pairs") is not None]
    out: list[dict[str, Any]] = (
        [] if len(have) == len(runs) else _not_run([e for e in runs if e.get("pairs") is None], multi)
    )
    if not have:
        return out
    gen_rows, kld_rows, logs, kld_logs, summary = [], [], [], [], []
    for e in have:
        pre = f"{e['gpu']}: " if multi else ""
        logs += e["logs"]
        if not e["pairs"]:
            summary.append(pre + "no pair compared (no variant besides base).")
        for p in e["pairs"]:
            pair = f"{code(p['a'])} vs {code(p['b'])}"
            gens = p["generations"]
            n_diff = sum(1 for g in gens if g.get("identical") is False)
            n_err = sum(1 for g in gens if g.get("identical") is None)
            s = f"{pre}{pair}: " + ("bit-identical" if p.get("identical") else "not bit-identical")
            s += f" ({n_diff} of {len(gens)} generations differ" + (f", {n_err} not compared" if n_err else "") + ")."
            summary.append(s)
            for g in gens:
                logs += [g.get("log_a"), g.get("log_b")]
                ident = (
                    _yes_no(g.get("identical"))
                    if g.get("identical") is not None
                    else "not compared" + (f": {g['error']}" if g.get("error") else "")
                )
                gen_rows.append(
                    [
                        *_gpu_col(multi, e["gpu"]),
                        pair,
                        str(g.get("depth")),
                        str(g.get("prompt")),
                        ident,
                        DASH if g.get("first_diff_char") is None else str(g["first_diff_char"]),
                        DASH if g.get("first_diff_token") is None else str(g["first_diff_token"]),
                        code(str(g.get("sha256_a"))[:12]) if g.get("sha256_a") else DASH,
                        code(str(g.get("sha256_b"))[:12]) if g.get("sha256_b") else DASH,
                    ]
                )
            k = p.get("kld")
            if k:
                kld_logs.append(k.get("log"))
                if "mean" in k:
                    kld_rows.append(
                        [
                            *_gpu_col(multi, e["gpu"]),
                            pair,
                            num(k.get("mean"), "kld"),
                            num(k.get("p99"), "kld"),
                            num(k.get("max"), "kld"),
                            DASH if k.get("same_top_p") is None else num(k["same_top_p"], "pct"),
                        ]
                    )
                else:
                    kld_rows.append(
                        [
                            *_gpu_col(multi, e["gpu"]),
                            pair,
                            "not measured" + (f": {k['error']}" if k.get("error") else ""),
                            DASH,
                            DASH,
                            DASH,
                        ]
                    )
            else:
                kld_rows.append([*_gpu_col(multi, e["gpu"]), pair, "not measured", DASH, DASH, DASH])
    out += [bullets(summary)] if summary else []
    if gen_rows:
        out.append(
            table(
                [
                    *_gpu_col(multi, "GPU"),
                    "pair",
                    "depth",
                    "prompt",
                    "identical",
                    "first diff (char)",
                    "first diff (token)",
                    "sha256 a",
                    "sha256 b",
                ],
                gen_rows,
            )
        )
        out.append(logs_line(logs))
    if kld_rows:
        out.append(table([*_gpu_col(multi, "GPU"), "pair", "mean KLD", "99 % KLD", "max KLD", "same top p"], kld_rows))
        out.append(logs_line(kld_logs))
    return out


# ---------------------------------------------------------------------------------------------
# 8. Per-patch attribution


def attribution(ev: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    a = ev["attribution"]
    if not a["patches"]:
        return [text("not run: no PR patch in this series")]
    out: list[dict[str, Any]] = []
    rows = []
    for r in a["rows"]:
        kind = "us" if r["unit"] == "us" else "ts"
        what = f"kernel {code(_short(ev, r['what']))}" if r["kind"] == "kernel" else f"decode {r['what']}"
        rows.append(
            [
                *_gpu_col(multi, r["gpu"]),
                code(r["patch"]),
                f"{code(r['without'])} → {code(r['with'])}",
                what,
                f"{num(r['value_without'], kind)} → {num(r['value_with'], kind)} {'µs' if kind == 'us' else 't/s'}",
                f"{num(r['ratio'], 'ratio')} {interval(r['ci_low'], r['ci_high'], 'ratio')}",
                r["verdict"],
            ]
        )
    if rows:
        out.append(
            table([*_gpu_col(multi, "GPU"), "patch", "compared", "measurement", "median", "ratio", "verdict"], rows)
        )
        out.append(text("Raw logs: those of `bench:kernel` and `bench:decode` above"))
        out.append(
            text(
                "Kernel ratio = time(with) / time(without), < 1 is faster; decode ratio = t/s(with) / t/s(without), > 1 is faster. "
                "Against base: the stored ratios; between two prefixes: computed from the stored samples (bootstrap 95 % interval of the ratio of medians)."
            )
        )
    for m in a["missing"]:
        out.append(text((f"{m['gpu']}: " if multi else "") + f"{code(m['patch'])}: not run: {m['reason']}"))
    return out


def _short(ev: dict[str, Any], params: str) -> str:
    for e in ev["kernel"]["runs"]:
        for c in e.get("cases") or []:
            if c["params"] == params:
                return c["short"]
    return params


# ---------------------------------------------------------------------------------------------
# The document


def additional(ev: dict[str, Any]) -> dict[str, Any]:
    def item(p: dict[str, Any]) -> str:
        s = f"{code(p['id'])} {p['subject'] or DASH} ({code(p['file'])})"
        s += "; depends on: " + (", ".join(code(d) for d in p["depends_on"]) if p["depends_on"] else "none")
        if not p["local"]:
            s += "; upstream PR: " + (p["upstream_pr"] or DASH)
        return s

    return {
        "pr": [item(p) for p in ev["patches"] if not p["local"]],
        "local": [item(p) for p in ev["patches"] if p["local"]],
    }


def render_markdown(ev: dict[str, Any]) -> str:
    multi = len(ev["runs"]) > 1
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    sections = {
        "hardware": hardware(ev, multi),
        "builds": builds(ev, multi),
        "tests": tests(ev, multi),
        "kernel": kernel(ev, multi),
        "kernel_path": kernel_path(ev, multi),
        "decode": decode(ev, multi),
        "numerics": numerics(ev, multi),
        "attribution": attribution(ev, multi),
        "not_tested": [bullets(ev["not_tested"])] if ev["not_tested"] else [text("nothing recorded as missing")],
    }
    p = ev["prose"]
    return env.get_template("pr.md.j2").render(
        title=p["title"] or NOT_PROVIDED,
        overview=p["overview"] or NOT_PROVIDED,
        ai_disclosure=p["ai_disclosure"] or NOT_PROVIDED,
        notes=p["notes"],
        patches=additional(ev),
        s=sections,
        missing_logs=[code(m) for m in ev["missing_logs"]],
        gpus=[r["gpu"] for r in ev["runs"]],
        multi=multi,
    )
