"""Evidence derived across the report's sections: per-patch attribution (adjacent prefixes compared on
kernel medians and decode t/s) and the "Not tested" list (what the runs did not cover, from the data)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from patchkit import stats

if TYPE_CHECKING:
    from patchkit.report import Run

# CUDA compute capability families the ggml CUDA backend distinguishes (major, minors or None = any).
CC_FAMILIES = (
    ((5, None), "5.x (Maxwell)"),
    ((6, None), "6.x (Pascal)"),
    ((7, (0, 2)), "7.0/7.2 (Volta)"),
    ((7, (5,)), "7.5 (Turing)"),
    ((8, (0,)), "8.0 (Ampere, A100)"),
    ((8, (6, 7)), "8.6/8.7 (Ampere, GA10x/Orin)"),
    ((8, (9,)), "8.9 (Ada Lovelace)"),
    ((9, None), "9.0 (Hopper)"),
    ((10, None), "10.x (Blackwell, data centre)"),
    ((11, None), "11.x (Blackwell, Thor)"),
    ((12, None), "12.x (Blackwell, GeForce/RTX PRO)"),
)


def _throughput_verdict(r: stats.Ratio) -> str:
    """A t/s ratio (> 1 faster) judged like a time ratio (its inverse)."""
    if min(r.ratio, r.ci_low, r.ci_high) <= 0:
        return "no measurable change"
    inv = stats.Ratio(ratio=1 / r.ratio, ci_low=1 / r.ci_high, ci_high=1 / r.ci_low)
    return stats.verdict(inv, 0.0)


def attribution(runs: list[Run], patches: list[dict], kernel: dict, decode: dict) -> dict[str, Any]:
    """Each PR patch: the prefix without it against the prefix with it (kernel medians, decode t/s)."""
    ids = [p["id"] for p in patches if not p["local"]]
    prefixes = ["base"] + ["+" + "+".join(ids[: i + 1]) for i in range(len(ids))]
    out: dict[str, Any] = {"patches": ids, "rows": [], "missing": []}
    for r, ke, de in zip(runs, kernel["runs"], decode["runs"]):
        for i, pid in enumerate(ids):
            a, b = prefixes[i], prefixes[i + 1]
            n0 = len(out["rows"])
            for c in ke.get("cases") or []:
                va, vb = c["variants"].get(a), c["variants"].get(b)
                if not va or not vb or not va.get("samples_us") or not vb.get("samples_us"):
                    continue
                stored = c["vs_base"].get(b) if a == "base" else None
                if stored:
                    rr, verdict, how = (
                        stats.Ratio(ratio=stored["ratio"], ci_low=stored["ci_low"], ci_high=stored["ci_high"]),
                        stored["verdict"],
                        "stored",
                    )
                else:
                    rr = stats.ratio(va["samples_us"], vb["samples_us"])
                    verdict, how = stats.verdict(rr, ke.get("noise_floor") or 0.0), "computed"
                out["rows"].append(
                    {
                        "gpu": r.gpu,
                        "patch": pid,
                        "without": a,
                        "with": b,
                        "kind": "kernel",
                        "what": c["params"],
                        "unit": "us",
                        "value_without": va["median"],
                        "value_with": vb["median"],
                        **rr.to_dict(),
                        "verdict": verdict,
                        "source": how,
                    }
                )
            rows = {(x["variant"], x["depth"], x["type_k"], x["type_v"], x["n_gen"]): x for x in de.get("rows") or []}
            for (v, depth, tk, tv, ng), xb in rows.items():
                xa = rows.get((a, depth, tk, tv, ng))
                if v != b or xa is None:
                    continue
                stored = (
                    next((s for s in de.get("vs_base") or [] if s["variant"] == b and s["depth"] == depth), None)
                    if a == "base"
                    else None
                )
                if stored:
                    rr, verdict, how = (
                        stats.Ratio(ratio=stored["ratio"], ci_low=stored["ci_low"], ci_high=stored["ci_high"]),
                        stored["verdict"],
                        "stored",
                    )
                else:
                    rr = stats.ratio(xa["samples_ts"], xb["samples_ts"])
                    verdict, how = _throughput_verdict(rr), "computed"
                out["rows"].append(
                    {
                        "gpu": r.gpu,
                        "patch": pid,
                        "without": a,
                        "with": b,
                        "kind": "decode",
                        "what": _test_name(xb),
                        "unit": "t/s",
                        "value_without": xa["median"],
                        "value_with": xb["median"],
                        **rr.to_dict(),
                        "verdict": verdict,
                        "source": how,
                    }
                )
            if len(out["rows"]) == n0:
                out["missing"].append(
                    {
                        "gpu": r.gpu,
                        "patch": pid,
                        "without": a,
                        "with": b,
                        "reason": f"`{a}` and `{b}` were not both measured (bench:kernel, bench:decode)",
                    }
                )
    return out


def _test_name(row: dict) -> str:
    name = f"tg{row.get('n_gen')}"
    return name + (f" @ d{row['depth']}" if row.get("depth") else "")


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


def not_tested(runs: list[Run], ev: dict[str, Any], order: list[str]) -> list[str]:
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
        items.append(
            "GPUs: measured only on "
            + ", ".join(f"{g} (cc {cc})" for g, cc in gpus)
            + "; not measured: cc "
            + ", ".join(missing)
            + "."
        )
    ran = {f"{c[0]}{c[1]}" for _, cc in gpus if (c := _cc(cc))}
    checked = sorted(
        {str(it["arch"]) for b in ev["builds"] for c in b["checks"] for it in c["items"] if it.get("ok")} - ran
    )
    if checked:
        items.append("Compile-checked only (built, not run) for arch: " + ", ".join(checked) + ".")
    if any(r.env.get("gpu") for r in runs):
        items.append("HIP and MUSA (which build the CUDA backend's sources): not built, not run.")
    backends = sorted(
        {
            str(b["name"])
            for s in ev["tests"]["suites"]
            for e in s["runs"]
            for v in e.get("variants") or []
            for b in v["backends"]
            if b["status"] in ("ok", "fail")
        }
    )
    if backends:
        items.append("test-backend-ops backends run: " + ", ".join(backends) + " only.")
    for s in ev["tests"]["suites"]:
        for e in s["runs"]:
            for v in e.get("variants") or []:
                for b in v["backends"]:
                    if b["status"] in ("skipped", "not_run"):
                        items.append(
                            f"test:{s['suite']} on {e['gpu']}, {v['variant']}: backend {b['name']} {b['status'].replace('_', ' ')}."
                        )
    steps = [
        ("build:*", list(ev["builds"])),
        ("test:*", ev["tests"].get("runs") or []),
        ("bench:kernel", ev["kernel"]["runs"]),
        ("kernel-path", ev["kernel_path"]["runs"]),
        ("bench:decode", ev["decode"]["runs"]),
        ("numerics", ev["numerics"]["runs"]),
    ]
    for name, es in steps:
        for e in es:
            if e.get("status") in ("absent", "not_run"):
                items.append(f"`{name}` on {e['gpu']}: not run: {e['reason']}")
            elif (
                e.get("status") == "error" and not any(k in e for k in ("cases", "rows", "pairs")) and name != "build:*"
            ):
                items.append(f"`{name}` on {e['gpu']}: nothing measured (error: {e['reason']})")
    for r, ke, pe, de in zip(runs, ev["kernel"]["runs"], ev["kernel_path"]["runs"], ev["decode"]["runs"]):
        known = [v for v in order if v in r.variant_names]
        for name, got in (
            ("bench:kernel", {lab for c in ke.get("cases") or [] for lab in c["variants"]}),
            ("kernel-path", {v for c in pe.get("cases") or [] for v in c["variants"]}),
            ("bench:decode", {x["variant"] for x in de.get("rows") or []}),
        ):
            lack = [v for v in known if v not in got]
            if got and lack:
                items.append(f"`{name}` on {r.gpu}: variants not measured: {', '.join(lack)}.")
        if de.get("rows"):
            depths = sorted({x["depth"] for x in de["rows"]})
            items.append(f"Decode on {r.gpu}: depths {', '.join(str(d) for d in depths)} only.")
            wanted = _arg(de.get("args") or [], "-d")
            lack_d = [d for d in (wanted or "").split(",") if d.strip().isdigit() and int(d) not in depths]
            if lack_d:
                items.append(f"Decode on {r.gpu}: requested depths with no result: {', '.join(lack_d)}.")
            if any(len(x["samples_ts"]) < 2 for x in de["rows"]):
                items.append(f"Decode on {r.gpu}: some cells have one sample only (no interval).")
    for e in ev["numerics"]["runs"]:
        for p in e.get("pairs") or []:
            if not p.get("kld") or "mean" not in p["kld"]:
                items.append(
                    f"Numerics on {e['gpu']}, {p['a']} vs {p['b']}: KL divergence not measured"
                    + (f" ({p['kld']['error']})." if p.get("kld") and p["kld"].get("error") else ".")
                )
    n_pr = len([p for p in ev["patches"] if not p["local"]])
    if n_pr > 1 and not any(v.startswith("-") for v in order):
        items.append("Leave-one-out variants (each PR patch left out): not built.")
    for m in ev["attribution"]["missing"]:
        items.append(f"Attribution of {m['patch']} on {m['gpu']}: not run: {m['reason']}.")
    return items


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None
