"""Fit the non-torch / activation / CUDA-graph terms of kvplan.budget.kv_memory on real vLLM start-up logs.

    python bench/calibrate.py            # print the fitted constants (paste them into budget.py)
    python bench/calibrate.py --table    # the comparison table of docs/calibration.md

Data: kvplan/data/vllm-memory-profiles.jsonl (33 rows; see /work/shared/data/README.md). The fit
uses the 21 vLLM 0.19.0 rows (one release, one GPU type, `vllm serve` defaults), the only ones with
known scheduler limits. The table then compares kvplan's estimate with the logged KV memory for
every row, feeding the logged weight bytes (the weight estimate is tested separately in
tests/test_weights.py) so that only the fitted terms are judged.

Model facts (hidden size, vocabulary, layers, MLP and MoE sizes) are the public config.json values
of each model; for the V0-era rows whose launch settings the logs omit, the vLLM defaults of the
time are assumed and marked in `ASSUMED`. Pure Python (no numpy), so it runs anywhere.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "kvplan" / "data" / "vllm-memory-profiles.jsonl"
GiB = 1 << 30


@dataclass(frozen=True)
class Facts:
    hidden: int
    vocab: int
    layers: int
    inter: int | None = None  # dense MLP intermediate size (None: every layer is MoE)
    moe_inter: int | None = None
    topk: int = 0
    multimodal: bool = False


LLAMA_8B = Facts(4096, 128256, 32, 14336)
LLAMA_70B = Facts(8192, 128256, 80, 28672)
QWEN25_7B = Facts(3584, 152064, 28, 18944)
QWEN25_72B = Facts(8192, 152064, 80, 29568)
MISTRAL_SMALL = Facts(5120, 131072, 40, 32768, multimodal=True)

# Keyed by a substring of the row's `model` field (first match wins).
MODEL_FACTS: list[tuple[str, Facts]] = [
    ("Llama-3.1-8B", LLAMA_8B),
    ("Meta-Llama-3-8B", LLAMA_8B),
    ("Qwen2.5-7B", QWEN25_7B),
    ("Qwen3-8B", Facts(4096, 151936, 36, 12288)),
    ("Qwen3-30B-A3B", Facts(2048, 151936, 48, None, 768, 8)),
    ("DeepSeek-V2-Lite", Facts(2048, 102400, 27, 10944, 1408, 6)),
    ("Mixtral-8x7B", Facts(4096, 32000, 32, None, 14336, 2)),
    ("Qwen2.5-72B", QWEN25_72B),
    ("Kimi-Dev-72B", QWEN25_72B),
    ("Llama-3.3-70B", LLAMA_70B),
    ("Kimi-VL-A3B", Facts(2048, 163840, 27, 11264, 1408, 6, multimodal=True)),
    ("Mistral-Small-3.", MISTRAL_SMALL),
    ("granite-3.3-8b", Facts(4096, 49159, 40, 12800)),
    ("granite-vision-3.3-2b", Facts(2048, 49155, 40, 8192, multimodal=True)),
    ("phi-4", Facts(5120, 100352, 40, 17920)),
    ("gpt-oss-20b", Facts(2880, 201088, 24, None, 2880, 4)),
    ("gpt-oss-120b", Facts(2880, 201088, 36, None, 2880, 4)),
    ("Qwen3-32B", Facts(5120, 151936, 64, 25600)),
    ("Llama-3.2-11B-Vision", Facts(4096, 128256, 40, 14336, multimodal=True)),
    ("DeepSeek-R1-class", Facts(7168, 129280, 61, 18432, 2048, 8)),
    ("QwQ-32B", Facts(5120, 152064, 64, 27648)),
]

# Launch settings the logs do not state, and how they were chosen (row index → overrides).
ASSUMED: dict[int, dict] = {
    21: {"mbt": 8192, "seqs": 1024, "why": "0.11 on H100: `vllm serve` defaults 8192/1024"},
    22: {"mbt": 8192, "seqs": 1024, "util": 0.95,
         "why": "0.11 H100 defaults; util 0.95, the only value the row reconciles at (its note)"},
    23: {"mbt": 8192, "seqs": 1024, "why": "0.11 on H100: `vllm serve` defaults"},
    24: {"mbt": 8192, "seqs": 1024, "why": "0.11 on H100: `vllm serve` defaults"},
    25: {"mbt": 8192, "seqs": 1024, "why": "0.11 on H100: `vllm serve` defaults"},
    26: {"mbt": 8192, "seqs": 256, "why": "V0 defaults: max(max_model_len 8192, 2048), 256 seqs"},
    27: {"mbt": 8192, "seqs": 256, "why": "V0 defaults; KV not in the excerpt"},
    28: {"mbt": 65536, "seqs": 128, "why": "V0 enc-dec, no chunked prefill: max_model_len"},
    29: {"mbt": 2048, "seqs": 256, "tp": 1,
         "why": "V0; parallel layout not logged (TP=1 formulas used)"},
    30: {"mbt": 2048, "seqs": 256, "why": "V0 chunked prefill on a 32 GB GPU: 2048"},
    31: {"mbt": 2048, "seqs": 256, "why": "V0 chunked prefill on a 32 GB GPU: 2048"},
    32: {"mbt": 4096, "seqs": 256, "why": "V0 without chunked prefill: max(4096, 2048)"},
}


def facts_for(model: str) -> Facts:
    for key, f in MODEL_FACTS:
        if key.lower() in model.lower():
            return f
    raise KeyError(f"no facts for {model!r}")


@dataclass(frozen=True)
class Row:
    index: int
    version: str
    model: str
    gpu: str
    tp: int
    pp: int
    util: float
    total_gib: float
    weights_gib: float
    non_torch_gib: float | None
    act_gib: float | None
    cg_gib: float | None
    kv_gib: float | None
    mbt: int
    seqs: int
    facts: Facts
    eager: bool
    pp_rank: int | None
    free_at_start_gib: float | None
    note: str

    @property
    def is_v019(self) -> bool:
        return self.version.startswith("0.19")


def load_rows(path: Path = DATA) -> list[Row]:
    rows = []
    for i, line in enumerate(path.read_text().splitlines()):
        if not line.strip():
            continue
        d = json.loads(line)
        f = d["flags"]
        a = ASSUMED.get(i, {})
        m = re.search(r"Free memory on device \(([\d.]+)/([\d.]+) GiB\)", d.get("quote") or "")
        short = d["model"]
        if "not named" in short:
            short = "DeepSeek-R1-class MoE (AWQ)"
        elif short.startswith("QwQ-32B"):
            short = "QwQ-32B (bnb 4-bit)"
        elif short.startswith("Qwen2.5-7B variant"):
            short = "Qwen2.5-7B (quantized)"
        rows.append(Row(
            index=i, version=d["vllm_version"].split(" ")[0], model=short, gpu=d["gpu"],
            tp=int(a.get("tp") or d.get("tp") or 1), pp=int(f.get("pipeline_parallel_size") or 1),
            util=float(a.get("util", d["gpu_memory_utilization"])), total_gib=d["total_gib"],
            weights_gib=d["weights_gib"], non_torch_gib=d["non_torch_gib"],
            act_gib=d["activation_peak_gib"], cg_gib=d["cudagraph_gib"], kv_gib=d["kv_gib"],
            mbt=int(f.get("max_num_batched_tokens") or a.get("mbt")),
            seqs=int(f.get("max_num_seqs") or a.get("seqs")), facts=facts_for(short),
            eager=bool(f.get("enforce_eager")), pp_rank=f.get("pp_rank"),
            free_at_start_gib=float(m.group(1)) if m else None, note=a.get("why", ""),
        ))
    return rows


# ------------------------------------------------------------------------------------------
# Least squares without numpy


def lstsq(xs: list[list[float]], ys: list[float]) -> list[float]:
    n = len(xs[0])
    a = [[sum(r[i] * r[j] for r in xs) for j in range(n)] for i in range(n)]
    b = [sum(r[i] * y for r, y in zip(xs, ys, strict=True)) for i in range(n)]
    for col in range(n):  # Gauss-Jordan with partial pivoting
        piv = max(range(col, n), key=lambda r: abs(a[r][col]))
        a[col], a[piv] = a[piv], a[col]
        b[col], b[piv] = b[piv], b[col]
        for r in range(n):
            if r != col and a[col][col]:
                k = a[r][col] / a[col][col]
                a[r] = [x - k * y for x, y in zip(a[r], a[col], strict=True)]
                b[r] -= k * b[col]
    return [b[i] / a[i][i] for i in range(n)]


def moe_ws_bytes(r: Row) -> float:
    f = r.facts
    if not f.topk or not f.moe_inter:
        return 0.0
    i = f.moe_inter // r.tp
    return 2.0 * r.mbt * f.topk * (max(2 * i, f.hidden) + i)


def forward_bytes(r: Row) -> float:
    return 2.0 * r.mbt * (3 * ((r.facts.inter or 0) // r.tp) + 2 * r.facts.hidden)


def fit(rows: list[Row]) -> dict[str, float]:
    cal = [r for r in rows if r.is_v019]
    out: dict[str, float] = {}
    # non-torch
    tp1 = [r.non_torch_gib for r in cal if r.tp == 1 and r.pp == 1]
    out["NON_TORCH_TP1_GIB"] = round(statistics.median(tp1), 4)
    pp_only = [r.non_torch_gib for r in cal if r.tp == 1 and r.pp > 1]
    # (no PP-only row: fall back to the TP=1 value, which is what the estimate would do blind)
    out["NON_TORCH_PP_ONLY_GIB"] = round(statistics.median(pp_only or tp1), 4)
    multi = [r for r in cal if r.tp > 1]
    base, per = lstsq([[1.0, math.log2(r.tp)] for r in multi], [r.non_torch_gib for r in multi])
    out["NON_TORCH_TP_BASE_GIB"] = round(base, 4)
    out["NON_TORCH_TP_PER_LOG2_GIB"] = round(per, 4)
    # activation: base + max(c1 · seqs·vocab, forward) + c2 · moe workspace
    c1 = 14.0
    for _ in range(20):
        xs, ys = [], []
        for r in cal:
            sampler = r.seqs * r.facts.vocab
            if c1 * sampler >= forward_bytes(r):
                xs.append([1.0, sampler / GiB, moe_ws_bytes(r) / GiB])
                ys.append(r.act_gib)
            else:  # forward branch: fixed coefficient 1, only base and MoE are free
                xs.append([1.0, 0.0, moe_ws_bytes(r) / GiB])
                ys.append(r.act_gib - forward_bytes(r) / GiB)
        c0, new_c1, c2 = lstsq(xs, ys)
        if abs(new_c1 - c1) < 1e-9:
            break
        c1 = new_c1
    out["ACT_BASE_GIB"] = round(c0, 4)
    out["ACT_SAMPLER_BYTES_PER_LOGIT"] = round(c1, 3)
    out["ACT_MOE_WORKSPACE_COEF"] = round(c2, 3)
    # CUDA graphs: base + a·L·H + b·L·H/tp + c·[MoE]
    xs = [[1.0, r.facts.layers / r.pp * r.facts.hidden, r.facts.layers / r.pp * r.facts.hidden / r.tp,
           1.0 if r.facts.topk else 0.0] for r in cal]
    g = lstsq(xs, [r.cg_gib for r in cal])
    out["CG_BASE_GIB"] = round(g[0], 4)
    out["CG_PER_LAYER_HIDDEN_GIB"] = float(f"{g[1]:.5g}")
    out["CG_PER_LAYER_HIDDEN_TP_GIB"] = float(f"{g[2]:.5g}")
    out["CG_MOE_GIB"] = round(g[3], 4)
    # memory in use before the start-up snapshot
    single = [r.total_gib - r.free_at_start_gib for r in cal if r.free_at_start_gib and r.tp * r.pp == 1]
    several = [r.total_gib - r.free_at_start_gib for r in cal if r.free_at_start_gib and r.tp * r.pp > 1]
    out["PRE_SNAPSHOT_SINGLE_GIB"] = round(statistics.median(single), 2)
    out["PRE_SNAPSHOT_MULTI_GIB"] = round(statistics.median(several), 2)
    return out


# ------------------------------------------------------------------------------------------
# Comparison with kvplan.budget.kv_memory


@dataclass(frozen=True)
class Comparison:
    row: Row
    est_kv_bytes: int
    est_non_torch_gib: float
    est_act_gib: float
    est_cg_gib: float

    @property
    def logged_kv_bytes(self) -> int | None:
        return None if self.row.kv_gib is None else int(round(self.row.kv_gib * GiB))

    @property
    def error_gib(self) -> float | None:
        lk = self.logged_kv_bytes
        return None if lk is None else (self.est_kv_bytes - lk) / GiB

    @property
    def rel_error(self) -> float | None:
        lk = self.logged_kv_bytes
        if lk is None or lk == 0:
            return None
        return (self.est_kv_bytes - lk) / abs(lk)


def compare(rows: list[Row] | None = None) -> list[Comparison]:
    sys.path.insert(0, str(ROOT))
    from kvplan.budget.kv_memory import estimate_budget

    out = []
    for r in rows if rows is not None else load_rows():
        f = r.facts
        b = estimate_budget(
            int(round(r.total_gib * GiB)), r.util, int(round(r.weights_gib * GiB)),
            vllm_version=r.version, tp=r.tp, pp=r.pp, hidden_size=f.hidden, vocab_size=f.vocab,
            num_layers=f.layers, intermediate_size=f.inter, moe_intermediate_size=f.moe_inter,
            num_experts_per_tok=f.topk, max_num_batched_tokens=r.mbt, max_num_seqs=r.seqs,
            enforce_eager=r.eager, weights_how="logged weight memory")
        terms = {t.name: t for t in b.breakdown}
        cg_how = terms["CUDA-graph estimate"].how
        m = re.search(r"= ([\d.]+) GiB|\(([\d.]+) GiB est\.\)", cg_how)
        cg = float(next(x for x in m.groups() if x)) if m else 0.0
        out.append(Comparison(
            row=r, est_kv_bytes=b.available_kv_bytes_per_gpu,
            est_non_torch_gib=-terms["non-torch memory"].num_bytes / GiB,
            est_act_gib=-terms["activation peak"].num_bytes / GiB, est_cg_gib=cg))
    return out


def summary(comps: list[Comparison]) -> dict[str, float]:
    errs = [abs(c.rel_error) for c in comps if c.rel_error is not None]
    v019 = [abs(c.rel_error) for c in comps if c.rel_error is not None and c.row.is_v019]
    worst = max((c for c in comps if c.rel_error is not None), key=lambda c: abs(c.rel_error))
    return {"median_abs_rel_error": statistics.median(errs), "worst_abs_rel_error": abs(worst.rel_error),
            "worst_row": worst.row.index, "median_abs_rel_error_v019": statistics.median(v019),
            "worst_abs_rel_error_v019": max(v019),
            "median_abs_error_gib": statistics.median(abs(c.error_gib) for c in comps
                                                      if c.error_gib is not None),
            "rows_compared": len(errs)}


def predict_kv_gib(r: Row, k: dict[str, float]) -> float:
    """kvplan's estimate for one row with constants `k` (the formulas of kvplan.budget.kv_memory, for the
    releases in the data: no CUDA-graph term, no extensible cache). Used for leave-one-out."""
    if r.tp == 1 and r.pp == 1:
        nt = k["NON_TORCH_TP1_GIB"]
    elif r.tp == 1:
        nt = k["NON_TORCH_PP_ONLY_GIB"]
    else:
        nt = k["NON_TORCH_TP_BASE_GIB"] + k["NON_TORCH_TP_PER_LOG2_GIB"] * math.log2(r.tp)
    sampler = k["ACT_SAMPLER_BYTES_PER_LOGIT"] * r.seqs * r.facts.vocab
    act = (k["ACT_BASE_GIB"] * GiB + max(sampler, forward_bytes(r))
           + k["ACT_MOE_WORKSPACE_COEF"] * moe_ws_bytes(r)) / GiB
    requested = math.ceil(int(round(r.total_gib * GiB)) * r.util) / GiB
    return requested - r.weights_gib - nt - act


def leave_one_out(rows: list[Row]) -> list[tuple[Row, float]]:
    """(row, relative KV error) for each 0.19 row, predicted by constants fitted without it."""
    cal = [r for r in rows if r.is_v019]
    out = []
    for r in cal:
        k = fit([x for x in rows if x is not r])
        out.append((r, (predict_kv_gib(r, k) - r.kv_gib) / abs(r.kv_gib)))
    return out


WEIGHT_CONFIGS = {  # row model substring → folder under tests/data/hf-configs
    "Llama-3.1-8B-Instruct": "meta-llama--Llama-3.1-8B",
    "Qwen2.5-7B-Instruct": "Qwen--Qwen2.5-7B",
    "Qwen3-8B": "Qwen--Qwen3-8B",
    "Qwen3-30B-A3B": "Qwen--Qwen3-30B-A3B",
    "gpt-oss-20b": "openai--gpt-oss-20b",
}


def end_to_end(rows: list[Row]) -> list[tuple[Row, float, float]]:
    """(row, estimated weight GiB per rank, KV error with estimated weights) where a config is at
    hand: the weights come from kvplan.budget.weights.weight_bytes_from_config, not from the log."""
    sys.path.insert(0, str(ROOT))
    from kvplan.budget.weights import weight_bytes_from_config

    out = []
    comps = {c.row.index: c for c in compare(rows)}
    for r in rows:
        folder = next((v for k, v in WEIGHT_CONFIGS.items() if k in r.model
                       and "quantized" not in r.model), None)
        if folder is None or r.kv_gib is None:
            continue
        cfg = json.loads((ROOT / "tests/data/hf-configs" / folder / "config.json").read_text())
        wb = weight_bytes_from_config(cfg)
        est_w = wb.max_per_rank_bytes(r.tp, pp_size=r.pp) / GiB
        kv = comps[r.index].est_kv_bytes / GiB + (r.weights_gib - est_w)
        out.append((r, est_w, (kv - r.kv_gib) / abs(r.kv_gib)))
    return out


def markdown_table(comps: list[Comparison]) -> str:
    head = ("| # | vLLM | model | TP/PP | util | logged KV GiB | estimated KV GiB | error GiB | "
            "error % | non-torch log/est | activation log/est | CUDA graph log/est |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for c in comps:
        r = c.row

        def pair(logged: float | None, est: float) -> str:
            return f"{'—' if logged is None else f'{logged:.2f}'} / {est:.2f}"

        kv = "—" if r.kv_gib is None else f"{r.kv_gib:.2f}"
        err = "—" if c.error_gib is None else f"{c.error_gib:+.2f}"
        rel = "—" if c.rel_error is None else f"{100 * c.rel_error:+.1f}%"
        tp_pp = f"{r.tp}/{r.pp}" + (f" (rank {r.pp_rank})" if r.pp_rank is not None else "")
        lines.append(f"| {r.index} | {r.version} | {r.model.split('/')[-1]} | {tp_pp} | {r.util} | {kv} | "
                     f"{c.est_kv_bytes / GiB:.2f} | {err} | {rel} | {pair(r.non_torch_gib, c.est_non_torch_gib)} | "
                     f"{pair(r.act_gib, c.est_act_gib)} | {pair(r.cg_gib, c.est_cg_gib)} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    rows = load_rows()
    if "--table" in argv:
        comps = compare(rows)
        print(markdown_table(comps))
        print()
        for k, v in summary(comps).items():
            print(f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}")
        loo = leave_one_out(rows)
        errs = sorted(abs(e) for _, e in loo)
        print(f"leave-one-out (0.19 rows): median {statistics.median(errs):.4f}, worst {errs[-1]:.4f}")
        for r, e in loo:
            print(f"  loo row {r.index}: {100 * e:+.2f}%")
        print()
        print("| # | model | TP/PP | logged weights GiB | kvplan weights GiB | KV error with kvplan weights |")
        print("|---|---|---|---|---|---|")
        for r, w, e in end_to_end(rows):
            print(f"| {r.index} | {r.model.split('/')[-1]} | {r.tp}/{r.pp} | {r.weights_gib:.2f} | "
                  f"{w:.2f} | {100 * e:+.1f}% |")
        return 0
    for k, v in fit(rows).items():
        print(f"{k} = {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
