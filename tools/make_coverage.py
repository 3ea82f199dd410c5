"""Draft kvplan/data/coverage.csv from the extracted vLLM registry and kvplan's dispatch.

    .venv/bin/python tools/make_coverage.py > kvplan/data/coverage.csv

Rows already in the committed table keep their path, pending, reason and confirmed (hand edits
win); new registry architectures get a row from the rules below, to be reviewed before
committing, and `confirmed` says they have not been run through vLLM yet: run
`tools/confirm_coverage.py sweep --only ARCH` and `write` for them. Never run by tests
(tests/models/test_coverage.py checks the committed table instead).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from kvplan.models import fast_adapter_names
from kvplan.models.coverage import COVERAGE_COLUMNS, registry
from kvplan.models.drafts import is_draft_architecture

TABLE = Path(__file__).resolve().parents[1] / "kvplan" / "data" / "coverage.csv"
POOLING = {"embedding", "late_interaction", "reward", "token_classification",
           "sequence_classification", "cross_encoder"}

# Paths other branches bring (the lead reconciles after merging).
PENDING = {
    "ChatGLMModel": ("adapter:chatglm", "i9b"),
    "ChatGLMForConditionalGeneration": ("adapter:chatglm", "i9b"),
    "ExaoneForCausalLM": ("adapter:exaone", "i9b"),
    "InternLM2ForCausalLM": ("adapter:internlm2", "i9b"),
    "InternLM2VEForCausalLM": ("adapter:internlm2", "i9b"),
    "BaichuanForCausalLM": ("adapter:baichuan", "i9b"),
    "BaiChuanForCausalLM": ("adapter:baichuan", "i9b"),
    "MiniCPM3ForCausalLM": ("adapter:minicpm3", "i9b"),
    "DeciLMForCausalLM": ("adapter:nemotron_nas", "i9b"),
    "DeepseekVLV2ForCausalLM": ("adapter:deepseek_vl_v2", "i9b"),
    "Phi3SmallForCausalLM": ("refused:previously-supported", "i9b"),
}
PENDING_PREFIXES = {
    "DeepseekV4": ("adapter:deepseek_v4", "issue10"), "DeepseekV41": ("adapter:deepseek_v4", "issue10"),
    "GlmMoeDsa": ("adapter:glm_moe_dsa", "issue10"), "KimiLinear": ("adapter:kimi_linear", "issue10"),
    "KimiK3": ("adapter:kimi_k3", "issue10"), "MiniMaxM3Sparse": ("adapter:minimax_m3", "issue10"),
    "MiMoV2": ("adapter:mimo_v2", "issue10"), "Gemma4Unified": ("adapter:gemma4_unified", "issue10"),
}


def classify(arch: str, entry: dict, fast: dict[str, str]) -> tuple[str, str, str]:
    """(path, pending, reason) for one registry architecture."""
    cats = set(entry["categories"])
    interfaces = set(entry["interfaces"])
    features = set(entry["features"])
    if arch in fast:
        return f"adapter:{fast[arch]}", "", ""
    if arch in PENDING:
        path, owner = PENDING[arch]
        return path, owner, ""
    for prefix, (path, owner) in PENDING_PREFIXES.items():
        if arch.startswith(prefix):
            return path, owner, ""
    if cats <= POOLING or (cats == {"transformers_backend"}
                           and re.search(r"Embedding|Classification", arch)):
        # decoder-based pooling models keep a KV cache in vLLM, encoders have none; both are
        # planned once an adapter reads the config (kvplan.models.pooling)
        return ("refused:needs-adapter", "",
                f"{arch} is a pooling model kvplan has no adapter for yet (vLLM allocates a KV "
                "cache for decoder-based ones, none for encoder-only ones)")
    if "speculative_decoding" in cats and is_draft_architecture((arch,)):
        return ("draft:separate-head", "",
                "a separate draft head: give it as the draft (--draft / --speculative-config)")
    if "speculative_decoding" in cats and "MTP" in arch:
        return ("draft:mtp", "",
                "the target's own MTP module: planned with the target (--speculative-config "
                "method mtp) when its adapter builds the MTP layers")
    if "speculative_decoding" in cats:
        return ("refused:draft-not-modelled", "",
                f"{arch} is a vLLM speculative-decoding drafter kvplan does not model (kvplan "
                "plans DFlash, EAGLE, EAGLE-3 and MTP drafts)")
    if "SupportsTranscription" in interfaces and "cross_attention" in features:
        return ("refused:encoder-decoder", "",
                f"{arch} is an encoder-decoder (cross-attention) model; kvplan plans decoders "
                "only")
    for present, what in (("IsAttentionFree" in interfaces,
                           "is attention-free (state-space layers only)"),
                          ("IsHybrid" in interfaces or "state_space" in features,
                           "is a hybrid of attention and state-space layers"),
                          ("HasNoOps" in interfaces, "has layers without attention (no-op blocks)"),
                          ("kv_sharing" in features, "uses cross-layer KV sharing"),
                          ("chunked_local" in features, "uses chunked local attention"),
                          ("cross_attention" in features, "uses cross-attention layers"),
                          ("sink" in features, "uses attention-sink layers")):
        if present:
            return "refused:needs-adapter", "", f"{arch} {what}; kvplan has no adapter for it yet"
    if "mla" in features and "inner_language_model" not in features:
        return ("generic", "",
                "plain attention through transformers; refused at plan time when the config "
                "is an MLA one (kv_lora_rank set on an MLA model type)")
    if "transformers_backend" in cats or "transformers_supported" in cats:
        return "generic", "", "vLLM runs it on its Transformers backend"
    if "SupportsMultiModal" in interfaces:
        return "generic", "", "language model planned; the encoder cache is not modelled"
    return "generic", "", ""


def main() -> None:
    reg = registry()
    fast = fast_adapter_names()
    old: dict[str, dict[str, str]] = {}
    if TABLE.exists():
        with TABLE.open(newline="") as fh:
            old = {r["architecture"]: r for r in csv.DictReader(fh)}
    writer = csv.DictWriter(sys.stdout, fieldnames=COVERAGE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for arch, entry in sorted(reg["architectures"].items()):
        if arch in old:
            writer.writerow({k: old[arch].get(k) or "" for k in COVERAGE_COLUMNS})
            continue
        path, pending, reason = classify(arch, entry, fast)
        confirmed = ("no: not run yet (tools/confirm_coverage.py sweep)"
                     if path.startswith("adapter:") or path == "generic" else "")
        writer.writerow({"architecture": arch, "category": "+".join(entry["categories"]),
                         "path": path, "pending": pending, "reason": reason,
                         "confirmed": confirmed})


if __name__ == "__main__":
    main()
