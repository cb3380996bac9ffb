"""The "Not tested" list: what the runs did not cover, derived from the evidence (GPU families not measured,
arches only compile-checked, backends and steps not run, variants and depths missing, KLD not measured)."""

from __future__ import annotations

from typing import Any

from patchkit.report.evidence import Evidence
from patchkit.report.fmt import Block, bullets, state_label, text
from patchkit.report.path import SHOWN as PATH_STEP
from patchkit.report.runview import RunView

# CUDA compute capability families the ggml CUDA backend distinguishes (major, minors or None = any).
CC_FAMILIES = (
    ((5, None), "5.x Maxwell"),
    ((6, None), "6.x Pascal"),
    ((7, (0, 2)), "7.0/7.2 Volta"),
    ((7, (5,)), "7.5 Turing"),
    ((8, (0,)), "8.0 Ampere A100"),
    ((8, (6, 7)), "8.6/8.7 Ampere GA10x/Orin"),
    ((8, (9,)), "8.9 Ada"),
    ((9, None), "9.0 Hopper"),
    ((10, None), "10.x Blackwell data centre"),
    ((11, None), "11.x Blackwell Thor"),
    ((12, None), "12.x Blackwell GeForce/RTX PRO"),
)


def _cc(cc: Any) -> tuple[int, int] | None:
    s = str(cc or "").lower().replace("sm_", "").strip()
    try:
        if "." in s:
            a, b = s.split(".", 1)
            return int(a), int(b)
        n = int(s)
        return (n // 10, n % 10) if n < 100 else (n // 100, n % 100 // 10)
    except ValueError:
        return None


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def _gpus(runs: list[RunView], ev: Evidence) -> list[str]:
    """GPU families not measured, arches only compile-checked, HIP/MUSA."""
    items: list[str] = []
    gpus = [(r.gpu, (r.env.get("gpu") or {}).get("cc")) for r in runs if r.env.get("gpu")]
    if not gpus:
        items.append("GPUs: no run had a GPU (CPU only); no CUDA kernel was run.")
    else:
        ccs = {_cc(cc) for _, cc in gpus}
        missing = [
            lab
            for (maj, mins), lab in CC_FAMILIES
            if not any(c and c[0] == maj and (mins is None or c[1] in mins) for c in ccs)
        ]
        measured = ", ".join(f"{g} (cc {cc})" for g, cc in gpus)
        items.append(f"GPUs: measured only on {measured}; not measured: cc {', '.join(missing)}.")
    ran = {f"{c[0]}{c[1]}" for _, cc in gpus if (c := _cc(cc))}
    checked = sorted({str(it.arch) for b in ev.builds for c in b.checks for it in c.items if it.ok} - ran)
    if checked:
        items.append("Compile-checked only (built, not run) for arch: " + ", ".join(checked) + ".")
    if any(r.env.get("gpu") for r in runs):
        items.append("HIP and MUSA (which build the CUDA backend's sources): not built, not run.")
    return items


def _backends(ev: Evidence) -> list[str]:
    """test-backend-ops backends run, and the ones skipped or not run per suite, run and variant."""
    items: list[str] = []
    tested = [(s, e, v) for s in ev.tests.suites for e in s.runs for v in (e.measured.variants if e.measured else [])]
    ran = sorted({str(b.name) for _, _, v in tested for b in v.backends if b.status in ("ok", "fail")})
    if ran:
        items.append("test-backend-ops backends run: " + ", ".join(ran) + " only.")
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for s, e, v in tested:
        for b in v.backends:
            if b.status in ("skipped", "not_run"):
                groups.setdefault((s.suite, e.gpu, str(b.name), b.status.replace("_", " ")), []).append(v.variant)
    for (suite, gpu, name, status), vs in groups.items():
        items.append(f"test:{suite} on {gpu}: backend {name} {status} ({', '.join(vs)}).")
    return items


def _steps(ev: Evidence) -> list[str]:
    """Steps not run (or errored without measuring anything), per run."""
    items: list[str] = []
    for name, es in (("build:*", ev.builds), ("test:*", ev.tests.runs or [])):
        items += [f"`{name}` on {e.gpu}: not run: {e.reason}" for e in es if e.status in ("absent", "not_run")]
    measured = (
        ("bench:kernel", ev.kernel.runs),
        (PATH_STEP, ev.kernel_path.runs),
        ("bench:decode", ev.decode.runs),
        ("numerics", ev.numerics.runs),
    )
    for name, ms in measured:
        for e in ms:
            if e.status in ("absent", "not_run"):
                items.append(f"`{name}` on {e.gpu}: not run: {e.reason}")
            elif e.status == "error" and e.measured is None:
                items.append(f"`{name}` on {e.gpu}: nothing measured (error: {e.reason})")
    for e in ev.occupancy.runs if ev.occupancy else []:  # a run made before the step existed: not listed
        if e.status == "not_run" or (e.status == "error" and e.cases is None):
            items.append(f"`bench:occupancy` on {e.gpu}: {state_label(e.status, e.reason)}")
    return items


def _coverage(runs: list[RunView], ev: Evidence, order: list[str]) -> list[str]:
    """Variants a measuring step left out, and the decode depths measured (and requested but missing)."""
    items: list[str] = []
    for r, ke, pe, de in zip(runs, ev.kernel.runs, ev.kernel_path.runs, ev.decode.runs):
        known = [v for v in order if v in r.variant_names and v not in r.same_code]
        rows = de.measured.rows if de.measured else []
        for name, got in (
            ("bench:kernel", {lab for c in (ke.measured.cases if ke.measured else []) for lab in c.variants}),
            (PATH_STEP, {v for c in (pe.measured.cases if pe.measured else []) for v in c.variants}),
            ("bench:decode", {x.variant for x in rows}),
        ):
            lack = [v for v in known if v not in got]
            if got and lack:
                items.append(f"`{name}` on {r.gpu}: variants not measured: {', '.join(lack)}.")
        if de.measured and rows:
            depths = sorted({x.depth for x in rows})
            items.append(f"Decode on {r.gpu}: depths {', '.join(str(d) for d in depths)} only.")
            wanted = _arg(de.measured.args, "-d")
            lack_d = [d for d in (wanted or "").split(",") if d.strip().isdigit() and int(d) not in depths]
            if lack_d:
                items.append(f"Decode on {r.gpu}: requested depths with no result: {', '.join(lack_d)}.")
            if any(len(x.samples_ts) < 2 for x in rows):
                items.append(f"Decode on {r.gpu}: some cells have one sample only (no interval).")
    return items


def _rest(ev: Evidence, order: list[str]) -> list[str]:
    """KL divergence not measured, leave-one-out variants not built, attribution not run."""
    items: list[str] = []
    for e in ev.numerics.runs:
        for p in e.measured.pairs if e.measured else []:
            if not p.kld or "mean" not in p.kld:
                items.append(
                    f"Numerics on {e.gpu}, {p.a} vs {p.b}: KL divergence not measured"
                    + (f" ({p.kld['error']})." if p.kld and p.kld.get("error") else ".")
                )
    n_pr = len([p for p in ev.patches if not p.local])
    if n_pr > 1 and not any(v.startswith("-") for v in order):
        items.append("Leave-one-out variants (each PR patch left out): not built.")
    for m in ev.attribution.missing:
        items.append(f"Attribution of {m.patch} on {m.gpu}: not run: {m.reason}.")
    return items


def _same_code(runs: list[RunView]) -> list[str]:
    out = [f"`{v}` on {r.gpu}: not measured: {why}." for r in runs for v, why in r.same_code.items()]
    for r in runs:
        sc = r.scope or {}
        for v, why in (sc.get("unchanged") or {}).items():
            what = "not tested in this run" if v == "base" else "not measured in this run"
            out.append(f"`{v}` on {r.gpu}: {what} (`--changed`): {why}.")
        if sc and sc.get("params"):
            out.append(f"Cases on {r.gpu} (`--changed`): only those matching `{sc['params']}`.")
    return out


def evidence(runs: list[RunView], ev: Evidence) -> list[str]:
    """What was not tested (ev: the evidence of every other section)."""
    order = ev.variants
    out = _gpus(runs, ev) + _same_code(runs) + _backends(ev) + _steps(ev) + _coverage(runs, ev, order)
    return out + _rest(ev, order)


def markdown(ev: Evidence) -> list[Block]:
    return [bullets(ev.not_tested)] if ev.not_tested else [text("nothing recorded as missing")]
