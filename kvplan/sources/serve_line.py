"""Parse a real `vllm serve MODEL [flags]` command line the way vLLM 0.34.0 does.

Reproduces, offline and without importing vLLM:

* shell splitting (`shlex`): `\\` continuations, quotes, comments, `VAR=value` prefixes, `export`
  lines, `env`/`sudo`/`nohup`-style wrappers, pipes and redirections after the command; the entry
  points `vllm serve`, `python -m vllm.entrypoints.openai.api_server` (and the other `-m`
  spellings), `python -m vllm.entrypoints.cli.main serve` and the `vllm/vllm-openai` image
  (`serve_shell`);
* `FlexibleArgumentParser.parse_args` (vllm/utils/argparse_utils.py): `--model` moved to the
  positional, `_` ≡ `-` in flag names, `-O3`, dotted JSON keys (`--speculative-config.method x`,
  `key+` list appends), last value wins;
* argparse itself: `--flag=value` / `--flag value`, unique-prefix abbreviations, short aliases
  (`-tp`, `-pp`, `-dcp`, `-sc`, `-cc`, `-q` ...), `--no-X` and the `--enable-X`/`--disable-X`
  pairs of `EnableDisableAction`, `nargs='+'` lists, values that look like options;
* each flag's value type as `_compute_kwargs` (vllm/engine/arg_utils.py:323) derives it from the
  config dataclass field: `int()`, `float()`, `human_readable_int` (`1k` = 1000, `1K` = 1024),
  `human_readable_int_or_auto` for `--max-model-len`, JSON for config flags, choices
  (`serve_options`).

The flag table (`kvplan/sources/vllm_flags.py`, data) was extracted from vllm 0.34.0's
`EngineArgs.add_cli_args` (vllm/engine/arg_utils.py:966-2000), `AsyncEngineArgs.add_cli_args`
(:3287) and `make_arg_parser` / `FrontendArgs` (vllm/entrypoints/common/cli_args.py:432).
"""

from __future__ import annotations

import json
import re
from typing import Any

from kvplan.errors import InputError
from kvplan.frozen import Frozen
from kvplan.sources.serve_options import (
    FLAGS,
    GLUED_SHORT,
    LONG_FLAGS,
    Flag,
    closest_flag,
    convert,
    known_flags,
)
from kvplan.sources.serve_shell import (
    NotServe,
    find_entry,
    leading_assignments,
    prefix_env,
    shell_segments,
    split_words,
)
from kvplan.sources.vllm_flags import BOUNDS, KV_RELEVANT
from kvplan.units import human_readable_int

__all__ = ["ServeCommand", "parse_serve_command", "KV_RELEVANT", "known_flags", "closest_flag"]


class ServeCommand(Frozen):
    """One parsed `vllm serve` invocation.

    `options` holds only the flags that can change KV-cache sizing, keyed by vLLM's argparse
    `dest` (e.g. `kv_cache_dtype`, `tensor_parallel_size`), typed as vLLM parses them; a flag that
    is absent is absent (vLLM's default applies). `ignored` lists the other vLLM flags that were
    given (`--port`, `--host` ...), `unknown` the flags vLLM 0.34.0 does not have (vLLM itself
    would exit with "unrecognized arguments"), `notes` anything else worth telling the user.
    """

    model: str
    options: dict[str, Any]
    env: dict[str, str]
    ignored: list[str]
    unknown: list[str]
    notes: list[str] = []



# ---------------------------------------------------------------------------------------------
# argparse layer (the shell: serve_shell; the flags and their value types: serve_options)

_NEG_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _looks_like_option(tok: str) -> bool:
    """argparse `_parse_optional`: does this token start a new option (so it cannot be a value)?"""
    if not tok or tok[0] != "-" or tok == "-":
        return False
    if tok in FLAGS or tok == "--":
        return True
    if _NEG_NUMBER.match(tok):
        return False
    if "=" in tok and tok.split("=", 1)[0] in FLAGS:
        return True
    return " " not in tok


def _resolve(name: str) -> tuple[str, Flag] | None:
    """Exact, then argparse's unique-prefix abbreviation (allow_abbrev) for `--` options."""
    spec = FLAGS.get(name)
    if spec is not None:
        return name, spec
    if name.startswith("--") and len(name) > 2:
        hits = [o for o in LONG_FLAGS if o.startswith(name)]
        dests = {(FLAGS[o].dest, FLAGS[o].value) for o in hits}
        if len(dests) == 1:
            return hits[0], FLAGS[hits[0]]
        if len(hits) > 1:
            shown = ", ".join(hits[:6]) + (" ..." if len(hits) > 6 else "")
            raise InputError(f"ambiguous option {name}: could match {shown}",
                             hint="spell the flag out in full")
    return None


def _preprocess(args: list[str], entry: str) -> tuple[list[str], list[str]]:
    """FlexibleArgumentParser.parse_args before argparse (argparse_utils.py:376-520)."""
    notes: list[str] = []
    # -- `--model X` → positional (serve only; api_server keeps --model as a flag: same effect here)
    processed: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            processed.extend(args[i:])
            break
        if arg.startswith("--"):
            if "=" in arg:
                flag_part, raw_value = arg.split("=", 1)
                head, dot, tail = flag_part[2:].partition(".")
                processed.append("--" + head.replace("_", "-") + dot + tail + "=" + raw_value)
            else:
                head, dot, tail = arg[2:].partition(".")
                processed.append("--" + head.replace("_", "-") + dot + tail)
        elif arg.startswith("-O") and arg != "-O":
            level = arg[3:] if arg[2:3] == "=" else arg[2:]
            processed += ["--optimization-level", level]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            processed.append("--optimization-level")
        else:
            processed.append(arg)
        i += 1

    # -- dotted JSON keys: --speculative-config.method x, -sc.num_speculative_tokens=7, --cc.sizes+ 1,2
    dict_args: dict[str, dict[str, Any]] = {}
    out: list[str] = []
    i = 0
    while i < len(processed):
        arg = processed[i]
        if arg == "--":
            out.extend(processed[i:])
            break
        if arg.startswith("-") and "." in arg and not _NEG_NUMBER.match(arg.split("=", 1)[0]):
            if "=" in arg:
                key_path, value_str = arg.split("=", 1)
                if "." not in key_path:
                    out.append(arg)
                    i += 1
                    continue
                i += 1
            else:
                if i + 1 >= len(processed):
                    raise InputError(f"{arg} is missing its value", hint=f"write {arg} VALUE or {arg}=VALUE")
                key_path, value_str = arg, processed[i + 1]
                i += 2
            if key_path.endswith("+"):
                key_path = key_path[:-1]
                value_str = json.dumps(value_str.split(","))
            key, *keys = key_path.split(".")
            if not all(keys):
                raise InputError(f"malformed dotted option {key_path!r}", hint="write --json-flag.key value")
            try:
                value: Any = json.loads(value_str)
            except (json.JSONDecodeError, RecursionError):
                try:
                    value = human_readable_int(value_str)
                except ValueError:
                    value = value_str
            nested: Any = value
            for k in reversed(keys):
                nested = {k: nested}
            _merge(dict_args.setdefault(key, {}), nested)
            continue
        out.append(arg)
        i += 1
    by_dest: dict[str, list[str]] = {}
    for key, merged in dict_args.items():
        if key in out:
            notes.append(f"{key} given both as JSON and with dotted keys: the dotted keys win")
        spec = FLAGS.get(key)
        if spec is not None:
            by_dest.setdefault(spec.dest, []).append(key)
        out += [key, json.dumps(merged)]
    for keys in by_dest.values():
        if len(keys) > 1:
            notes.append(f"dotted keys under both {' and '.join(keys)}: vLLM merges each spelling separately and "
                         f"keeps only the last ({keys[-1]}); the others are lost")
    return out, notes


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _merge(original[k], v)
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v


def parse_serve_command(text: str) -> ServeCommand:
    """Parse a `vllm serve MODEL [flags]` command line (or a short shell snippet containing one).

    Raises InputError (one line + hint) for: unbalanced quotes, text that is not a vLLM server
    command, a missing model, a flag without its value, a value vLLM's argparse type rejects
    (non-integer for an int flag, invalid JSON in a config flag, a bad choice), and values vLLM's
    config validation rejects at startup for the KV-relevant flags (e.g. gpu_memory_utilization 1.5).
    """
    if not isinstance(text, str):
        raise InputError(f"expected the command line as text, got {type(text).__name__}")
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise InputError("empty command line", hint="pass: vllm serve MODEL [flags]")
    if "\x00" in text:
        raise InputError("the command line contains NUL bytes", hint="pass the text of a vllm serve command")

    env: dict[str, str] = {}
    found: tuple[list[str], int, str] | None = None
    other: str | None = None
    segments = shell_segments(text)
    for segment in segments:
        words = split_words(segment)
        while words and words[0] in ("$", "%", "#", ">"):
            words = words[1:]
        if not words:
            continue
        try:
            hit = find_entry(words)
        except NotServe as e:
            other = other or str(e)
            continue
        if hit is None:
            leading_assignments(words, env)
            continue
        if found is not None:
            raise InputError("found more than one vLLM server command", hint="pass one vllm serve command at a time")
        found = (words, hit[0], hit[1])
        prefix_env(words[:hit[0]], env)
    if found is None:
        if other is not None:
            raise InputError(f"`{other}` is not the vLLM server command",
                             hint="pass the command that starts the server: vllm serve MODEL [flags]")
        first = split_words(segments[0])[:3] if segments else []
        shown = " ".join(first) or text.strip()[:40]
        raise InputError(f"not a vllm serve command: {shown!r}",
                         hint="pass e.g.: vllm serve Qwen/Qwen3-8B --max-model-len 32768 "
                              "(or python -m vllm.entrypoints.openai.api_server --model ...)")
    words, start, entry = found
    return _parse_args(words[start:], entry, env)


_FOLDED = {"spec_method": ("--spec-method", "method"), "spec_model": ("--spec-model", "model"),
           "spec_tokens": ("--spec-tokens", "num_speculative_tokens")}


def _move_model_flag(args: list[str]) -> tuple[str | None, list[str]]:
    """argparse_utils.py:389: with `vllm serve`, `--model X` / `--model=X` becomes the positional."""
    for idx, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--model":
            if idx + 1 >= len(args) or _looks_like_option(args[idx + 1]):
                raise InputError("--model is missing its value", hint="write vllm serve MODEL [flags]")
            return args[idx + 1], args[:idx] + args[idx + 2:]
        if arg.startswith("--model="):
            return arg.removeprefix("--model="), args[:idx] + args[idx + 1:]
    return None, args


def _parse_args(args: list[str], entry: str, env: dict[str, str]) -> ServeCommand:
    moved_model: str | None = None
    if entry in ("serve", "image"):
        moved_model, args = _move_model_flag(args)
    args, notes = _preprocess(args, entry)
    values: dict[str, Any] = {}
    positionals: list[str] = [moved_model] if moved_model is not None else []
    model_flag: str | None = None
    ignored: list[str] = []
    unknown: list[str] = []

    i, n = 0, len(args)
    while i < n:
        tok = args[i]
        i += 1
        if tok == "--":
            positionals.extend(args[i:])
            break
        if not _looks_like_option(tok):
            positionals.append(tok)
            continue
        name, eq, explicit_s = tok.partition("=")
        explicit: str | None = explicit_s if eq else None
        resolved = _resolve(name)
        if resolved is None and not name.startswith("--") and name[:2] in GLUED_SHORT and explicit is None:
            resolved, explicit = (name[:2], FLAGS[name[:2]]), name[2:]  # -qfp8
        if resolved is None:
            unknown.append(name)
            # Its value, most likely — once the model is known (vllm serve MODEL first).
            model_known = bool(positionals) or entry == "api_server"
            if explicit is None and i < n and not _looks_like_option(args[i]) and model_known:
                i += 1
            continue
        opt, spec = resolved
        label = spec.canonical if opt.startswith("--") else f"{opt} ({spec.canonical})"
        value, i = _take_value(args, i, name, label, spec, explicit, values)
        dest = spec.dest
        if dest == "model":
            model_flag = value
            continue
        if dest in values and spec.kind != "append" and values[dest] != value:
            notes.append(f"{spec.canonical} given more than once; the last value wins ({value!r})")
        values[dest] = value
        if dest not in KV_RELEVANT and dest not in _FOLDED and opt not in ignored:
            ignored.append(opt)

    model = _pick_model(positionals, model_flag, values, unknown)
    _fold_speculative(values)
    _check_bounds(values)

    if "config" in values:
        notes.append(f"--config {values['config']}: kvplan does not read vLLM YAML config files; "
                     "flags set there are not included")
    for u in unknown:
        near = closest_flag(u)
        notes.append(f"{u} is not a vLLM 0.34.0 flag" + (f" (did you mean {near}?)" if near else "")
                     + "; vLLM would exit with 'unrecognized arguments'")
    if entry == "image":
        notes.append("arguments after the vllm/vllm-openai image are read as `vllm serve` arguments")

    options = {k: v for k, v in values.items() if k in KV_RELEVANT}
    return ServeCommand(model=model, options=options, env=env, ignored=ignored, unknown=unknown, notes=notes)


def _take_value(args: list[str], i: int, name: str, label: str, spec: Flag, explicit: str | None,
                values: dict[str, Any]) -> tuple[Any, int]:
    """Consume this option's value(s) as argparse would; returns (typed value, next index)."""
    n = len(args)
    if spec.kind in ("bool", "true"):
        if explicit is not None:
            hint = f"write {name} alone" + (f", or --no-{spec.canonical[2:]} to turn it off" if spec.kind == "bool"
                                            else "")
            raise InputError(f"{name} takes no value, got {name}={explicit}", hint=hint)
        return (spec.value if spec.kind == "bool" else True), i
    if spec.kind == "optstr":
        if explicit is not None:
            return explicit, i
        if i < n and not _looks_like_option(args[i]):
            return args[i], i + 1
        return True, i
    if spec.kind in ("list_str", "list_int"):
        raws = [explicit] if explicit is not None else []
        if explicit is None:
            while i < n and not _looks_like_option(args[i]):
                raws.append(args[i])
                i += 1
        if not raws:
            raise InputError(f"{label} is missing its value", hint=f"write {name} VALUE [VALUE ...]")
        return [convert(label, spec, r, name) for r in raws], i
    if explicit is None:
        if i >= n or _looks_like_option(args[i]):
            got = f" (next is {args[i]!r})" if i < n else ""
            raise InputError(f"{label} is missing its value{got}", hint=f"write {name} VALUE or {name}=VALUE")
        explicit = args[i]
        i += 1
    value = convert(label, spec, explicit, name)
    if spec.kind == "append":
        value = [*values.get(spec.dest, []), value]
    return value, i


def _pick_model(positionals: list[str], model_flag: str | None, values: dict[str, Any], unknown: list[str]) -> str:
    model = positionals[0] if positionals else None
    if len(positionals) > 1:
        extra = " ".join(positionals[1:])
        if model_flag is None and len(positionals) == 2 and values.get("served_model_name") is None:
            hint = "vLLM would exit with 'unrecognized arguments'; give the model once, first"
        else:
            hint = "vLLM would exit with 'unrecognized arguments'; flags need a leading --"
        raise InputError(f"unexpected extra argument(s) besides the model {model!r}: {extra!r}", hint=hint)
    if model is not None and model_flag is not None and model != model_flag:
        raise InputError(f"two models given: {model!r} (positional) and {model_flag!r} (--model)",
                         hint="vLLM would exit with 'unrecognized arguments'; give the model once")
    model = model or model_flag
    if model:
        return model
    if values.get("config") is not None:
        raise InputError(f"the model is not on the command line (it may be in --config {values['config']})",
                         hint="kvplan does not read --config YAML files; put the model after `vllm serve`")
    if values.get("served_model_name"):
        raise InputError("missing model: `vllm serve` takes the model as its first positional argument",
                         hint="--served-model-name takes every word after it; write vllm serve MODEL "
                              "--served-model-name NAME")
    hint = "vLLM 0.34.0 would silently serve its default model Qwen/Qwen3-0.6B; name it: vllm serve MODEL [flags]"
    if unknown:
        hint += f" (is {unknown[-1]} a typo?)"
    raise InputError("missing model", hint=hint)


def _fold_speculative(values: dict[str, Any]) -> None:
    """--spec-method/--spec-model/--spec-tokens merge into speculative_config (arg_utils.py:2141)."""
    spec_cfg = values.get("speculative_config")
    if spec_cfg is not None and not isinstance(spec_cfg, dict):
        raise InputError(f"--speculative-config wants a JSON object, got {json.dumps(spec_cfg)}",
                         hint='write --speculative-config \'{"method": "eagle3", "model": "...", '
                              '"num_speculative_tokens": 3}\'')
    for dest, (flag, key) in _FOLDED.items():
        v = values.pop(dest, None)
        if v is None:
            continue
        spec_cfg = dict(spec_cfg or {})
        if key in spec_cfg:
            raise InputError(f"{flag} and --speculative-config['{key}'] are mutually exclusive",
                             hint="give the value once")
        spec_cfg[key] = v
    if spec_cfg is not None:
        values["speculative_config"] = {str(k).replace("-", "_"): v for k, v in spec_cfg.items()}


def _check_bounds(values: dict[str, Any]) -> None:
    for dest, (low, inclusive, high) in BOUNDS.items():
        v = values.get(dest)
        if v is None or isinstance(v, bool) or not isinstance(v, int | float):
            continue
        bad = v != v or (low is not None and (v < low if inclusive else v <= low)) or (high is not None and v > high)
        if bad:
            flag = "--" + dest.replace("_", "-")
            rng = f"{'>=' if inclusive else '>'} {low:g}" + (f" and <= {high:g}" if high is not None else "")
            raise InputError(f"{flag} {v} is out of range: vLLM requires {rng}",
                             hint="vLLM's config validation would refuse to start with this value")
