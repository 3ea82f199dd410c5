"""Parse a real SGLang launch line — `python -m sglang.launch_server --model-path M [flags]` or
`sglang serve M [flags]` — the way SGLang 0.5.23 does, offline and without importing SGLang.

* the shell (`kvplan.sources.serve_shell`): `\\` continuations, quotes, comments, `VAR=value`
  prefixes, `export` lines, wrappers, pipes and redirections; the entry points
  `python -m sglang.launch_server`, `sglang serve` (`sglang.cli.main`, also as
  `python -m sglang.cli.main serve`), and those run inside `docker run … lmsysorg/sglang …`;
* `sglang serve`'s own handling (sglang/cli/serve.py): `--model-type BACKEND` taken out first,
  a first positional word is the model (`_normalize_positional_model_path`);
* the parser `prepare_server_args` builds (`ServerArgs.add_cli_args`, srt/server_args.py) —
  plain argparse: `--flag value` / `--flag=value`, unique-prefix abbreviations (argparse's
  `allow_abbrev`; an ambiguous prefix is argparse's error), store_true flags,
  `BooleanOptionalAction`'s `--no-X`, `nargs='+'`/`'*'` lists, last value wins; each value
  typed as the flag's `type` does: `int()`, `float()`, `human_readable_int` (`1k` = 1000,
  `1Ki` = 1024), `nullable_str`, `json.loads`; choices checked (SGLang exits with argparse's
  "invalid choice" message: here an `InputError`).

The flag table is data (`kvplan.sources.sglang_flags`, extracted from SGLang 0.5.23's parser by
tools/sglang_flags_extract.py).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from kvplan.errors import InputError
from kvplan.frozen import Frozen
from kvplan.sources.serve_shell import (
    leading_assignments,
    prefix_env,
    shell_segments,
    split_words,
)
from kvplan.sources.sglang_flags import FLAG_TABLE, SGLANG_FLAGS_VERSION

# the dests that size SGLang's KV pools and that kvplan models (→ SglangDeployment / request)
KV_RELEVANT = frozenset({
    "model_path", "revision", "tp_size", "pp_size", "dp_size", "enable_dp_attention",
    "mem_fraction_static", "max_total_tokens", "context_length", "page_size", "kv_cache_dtype",
    "max_running_requests", "chunked_prefill_size", "max_prefill_tokens",
    "cuda_graph_max_bs_decode", "disable_cuda_graph", "attention_backend",
    "swa_full_tokens_ratio", "disable_radix_cache", "disable_overlap_schedule",
    "mamba_full_memory_ratio", "max_mamba_cache_size", "speculative_algorithm",
    "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
    "speculative_draft_kv_cache_dtype", "speculative_draft_model_path",
    "json_model_override_args"})
# dests that change what SGLang sizes but that kvplan does not model: planned without them,
# and said so
NOT_MODELLED = frozenset({
    "quantization", "dtype", "attn_dp_size", "moe_dp_size", "dwdp_size",
    "enable_kv_cache_sharding", "disable_hybrid_swa_memory", "cuda_graph_bs_decode",
    "cuda_graph_backend_decode", "cuda_graph_backend_prefill", "cuda_graph_max_bs_prefill",
    "cuda_graph_bs_prefill", "cuda_graph_config", "disable_decode_cuda_graph",
    "disable_prefill_cuda_graph", "decode_attention_backend", "prefill_attention_backend",
    "mamba_ssm_dtype", "mamba_radix_cache_strategy", "speculative_draft_model_revision",
    "speculative_draft_model_quantization", "speculative_dflash_block_size",
    "speculative_draft_window_size", "load_format", "cpu_offload_gb", "enable_hierarchical_cache",
    "hicache_ratio", "hicache_size", "enable_lora", "lora_paths", "max_loras_per_batch",
    "disaggregation_mode", "nnodes", "c128_page_size", "swa_prefix_tails", "kv_cache_dtype_draft",
    "enable_memory_saver", "enable_mixed_chunk", "enable_two_batch_overlap",
    "ep_size", "expert_parallel_size", "json_model_override_args_draft"})


class SglangServeCommand(Frozen):
    """One parsed SGLang launch line.

    `options` holds the flags that size the KV pools and that kvplan models, keyed by SGLang's
    argparse `dest` (`tp_size`, `mem_fraction_static`, ...), typed as SGLang parses them; an
    absent flag is absent (SGLang's default applies). `not_modelled` lists the given flags that
    change SGLang's sizing but that kvplan does not model, `ignored` the other SGLang flags
    (`--port`, `--host` ...), `unknown` the words SGLang 0.5.23 would reject.
    """

    model: str
    entry: str  # "python -m sglang.launch_server" | "sglang serve"
    options: dict[str, Any]
    env: dict[str, str]
    not_modelled: list[str]
    ignored: list[str]
    unknown: list[str]
    notes: list[str] = []


class _Flag:
    __slots__ = ("dest", "kind", "choices", "canonical", "value")

    def __init__(self, dest: str, kind: str, choices: tuple[Any, ...] | None, canonical: str,
                 value: bool | None = None) -> None:
        self.dest, self.kind, self.choices, self.canonical = dest, kind, choices, canonical
        self.value = value

    @property
    def takes_value(self) -> bool:
        return self.kind not in ("true", "bool", "optstr") and not self.kind.startswith("list_")


def _build() -> dict[str, _Flag]:
    out: dict[str, _Flag] = {}
    for names, dest, kind, choices in FLAG_TABLE:
        opts = names.split()
        canonical = opts[0]
        for o in opts:
            # argparse.BooleanOptionalAction registers --X and --no-X; the table lists both
            value = (not o.startswith("--no-")) if kind == "bool" else None
            out[o] = _Flag(dest, kind, choices, canonical, value)
    return out


FLAGS = _build()
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def human_readable_int(value: str) -> int:
    """SGLang's `human_readable_int` (srt/utils/common.py): SI suffixes k/M/G/T (decimals
    allowed), IEC Ki/Mi/Gi/Ti (integers only), case-sensitive; else `int()`."""
    v = value.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", v)
    if m:
        number, suffix = m.groups()
        iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
        if suffix in iec:
            if "." in number:
                raise ValueError(f"Decimals are not allowed with IEC suffixes like '{suffix}'.")
            return int(number) * iec[suffix]
        si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
        return int(Decimal(number) * si[suffix])
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"Invalid integer value: '{value}'. Use a plain integer, SI suffixes "
                         "(1k, 1M), or IEC suffixes (1Ki, 1Mi). Suffixes are case-sensitive."
                         ) from None


def _convert(flag: _Flag, option: str, raw: str) -> Any:
    kind = flag.kind.removeprefix("list_")
    try:
        if kind == "int":
            value: Any = int(raw)
        elif kind == "float":
            value = float(raw)
        elif kind == "hrint":
            value = human_readable_int(raw)
        elif kind == "json":
            value = json.loads(raw)
        elif kind == "str?":
            value = None if not raw or raw == "None" else raw
        else:
            value = raw
    except (ValueError, InvalidOperation) as exc:
        why = f"invalid {kind} value: {raw!r}" if kind in ("int", "float") else str(exc)
        raise InputError(f"SGLang would exit: argument {option}: {why}",
                         hint="fix the value in the serve line") from None
    if flag.choices is not None and value not in flag.choices:
        choices = ", ".join(repr(c) for c in flag.choices)
        raise InputError(f"SGLang would exit: argument {option}: invalid choice: {raw!r} "
                         f"(choose from {choices})", hint="fix the value in the serve line")
    return value


def _lookup(option: str) -> tuple[_Flag | None, str | None]:
    """argparse's option lookup: an exact option string, else a unique prefix (allow_abbrev);
    (flag, None), (None, argparse's error) for an ambiguous prefix, (None, None) if unknown."""
    if option in FLAGS:
        return FLAGS[option], None
    if not option.startswith("--"):
        return None, None
    matches = [o for o in FLAGS if o.startswith(option)]
    if len(matches) == 1:
        return FLAGS[matches[0]], None
    if len(matches) > 1:
        return None, (f"ambiguous option: {option} could match {', '.join(matches)}")
    return None, None


def _looks_like_value(word: str) -> bool:
    return not word.startswith("-") or bool(_NEGATIVE_NUMBER.match(word))


# ---------------------------------------------------------------------------------------------
# The entry point

_PY = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)*)?(?:\.exe)?$")
_SGLANG_BIN = re.compile(r"^(?:.*/)?sglang(?:\.exe)?$")
_LAUNCH_MODULES = {"sglang.launch_server", "sglang.srt.server", "sglang.launch_server.py"}


def find_sglang_entry(words: list[str]) -> tuple[int, str] | None:
    """(index of the first server argument, entry) if `words` start SGLang's server."""
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else None
        if _SGLANG_BIN.match(w) and nxt == "serve":
            return i + 2, "sglang serve"
        if _PY.match(w):
            j = i + 1
            while j < len(words) and words[j].startswith("-") and words[j] != "-m":
                j += 2 if words[j] in ("-X", "-W") else 1
            if j + 1 < len(words) and words[j] == "-m":
                mod = words[j + 1]
                if mod in _LAUNCH_MODULES:
                    return j + 2, "python -m sglang.launch_server"
                if mod in ("sglang.cli.main", "sglang") and words[j + 2:j + 3] == ["serve"]:
                    return j + 3, "sglang serve"
    return None


def is_sglang_line(text: str) -> bool:
    """Whether a command line starts SGLang's server (else it is read as `vllm serve`)."""
    try:
        segments = shell_segments(text)
    except InputError:
        return False
    for seg in segments:
        try:
            words = split_words(seg)
        except InputError:
            continue
        if find_sglang_entry(words) is not None:
            return True
    return False


def parse_sglang_command(text: str) -> SglangServeCommand:
    """A shell line (or script) that launches SGLang → its model and typed options."""
    if not text or not text.strip():
        raise InputError("the serve line is empty",
                         hint='pass --serve "python -m sglang.launch_server --model-path ..."')
    env: dict[str, str] = {}
    found: tuple[list[str], int, str] | None = None
    for seg in shell_segments(text):
        words = split_words(seg)
        hit = find_sglang_entry(words)
        if hit is None:
            leading_assignments(words, env)
            continue
        start, entry = hit
        prefix_env(words[:start], env)
        found = (words, start, entry)
        break
    if found is None:
        raise InputError("no SGLang server command in the serve line",
                         hint="expected `python -m sglang.launch_server --model-path M ...` or "
                              "`sglang serve M ...`")
    words, start, entry = found
    return _parse_args(words[start:], entry, env)


def _parse_args(args: list[str], entry: str, env: dict[str, str]) -> SglangServeCommand:
    notes: list[str] = []
    if entry == "sglang serve":
        # cli/serve.py: --model-type is taken out, then a first positional word is the model
        kept, i = [], 0
        while i < len(args):
            if args[i] == "--model-type":
                i += 2
                continue
            if args[i].startswith("--model-type="):
                i += 1
                continue
            kept.append(args[i])
            i += 1
        args = kept
        if args and not args[0].startswith("-"):
            args = ["--model-path", args[0], *args[1:]]
    values: dict[str, Any] = {}
    given: dict[str, str] = {}  # dest → the canonical flag, in order
    unknown: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or word in ("-", "--") or _NEGATIVE_NUMBER.match(word):
            unknown.append(word)
            continue
        option, eq, inline = word.partition("=")
        flag, ambiguous = _lookup(option)
        if ambiguous:
            if option == "--cuda-graph-max-bs":
                # older SGLang's name (before the decode / prefill split)
                flag = FLAGS["--cuda-graph-max-bs-decode"]
                notes.append("--cuda-graph-max-bs is older SGLang's name: SGLang "
                             f"{SGLANG_FLAGS_VERSION} would exit ({ambiguous}); read as "
                             "--cuda-graph-max-bs-decode")
            else:
                raise InputError(f"SGLang would exit: {ambiguous}",
                                 hint="spell the flag out in the serve line")
        if flag is None:
            unknown.append(option)
            if not eq and i < len(args) and _looks_like_value(args[i]):
                unknown.append(args[i])
                i += 1
            continue
        if flag.kind in ("true", "bool"):
            if eq:
                raise InputError(f"SGLang would exit: argument {option}: ignored explicit "
                                 f"argument {inline!r}")
            values[flag.dest] = True if flag.kind == "true" else flag.value
        elif flag.kind == "optstr":
            if eq:
                values[flag.dest] = inline
            elif i < len(args) and not args[i].startswith("-"):
                values[flag.dest] = args[i]
                i += 1
            else:
                values[flag.dest] = ""
        elif flag.kind.startswith("list_"):
            items = [inline] if eq else []
            while not eq and i < len(args) and _looks_like_value(args[i]):
                items.append(args[i])
                i += 1
            if not items and "+" in flag.kind:
                raise InputError(f"SGLang would exit: argument {option}: expected at least one "
                                 "argument")
            values[flag.dest] = [_convert(flag, option, x) for x in items]
        else:
            if eq:
                raw = inline
            elif i < len(args) and _looks_like_value(args[i]):
                raw = args[i]
                i += 1
            else:
                raise InputError(f"SGLang would exit: argument {option}: expected one argument",
                                 hint="give the flag its value in the serve line")
            values[flag.dest] = _convert(flag, option, raw)
        given[flag.dest] = flag.canonical
    if "config" in values:
        notes.append(f"--config {values['config']}: the YAML file is not read; give its "
                     "flags on the line")
    model = values.get("model_path")
    if not model:
        raise InputError("the SGLang serve line names no model",
                         hint="add --model-path ORG/NAME (or `sglang serve ORG/NAME`)")
    options = {k: v for k, v in values.items() if k in KV_RELEVANT and k != "model_path"}
    if "enable_dp_attention" in given:
        notes.append("--enable-dp-attention is deprecated in SGLang "
                     f"{SGLANG_FLAGS_VERSION} (its attention DP size is --dp-size)")
    if "disable_cuda_graph" in given:
        notes.append("--disable-cuda-graph is deprecated in SGLang "
                     f"{SGLANG_FLAGS_VERSION}; it still disables both CUDA graphs")
    return SglangServeCommand(
        model=str(model), entry=entry, options=options, env=env,
        not_modelled=[given[d] for d in given if d in NOT_MODELLED],
        ignored=[given[d] for d in given if d not in KV_RELEVANT and d not in NOT_MODELLED
                 and d != "config"],
        unknown=unknown, notes=notes)
