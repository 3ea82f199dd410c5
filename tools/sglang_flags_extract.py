"""Write kvplan/sources/sglang_flags.py: every `sglang serve` / `python -m sglang.launch_server`
flag of SGLang 0.5.23, read from the parser `ServerArgs.add_cli_args` builds (the parser
`prepare_server_args` uses: srt/server_args.py).

A development tool, never a dependency: run it with the SGLang venv's Python,

    ~/.cache/sglang-oracle/.venv-0.5.23/bin/python tools/sglang_flags_extract.py \
        > kvplan/sources/sglang_flags.py
"""

from __future__ import annotations

import argparse
import sys


def kind_of(action: argparse.Action) -> str:
    name = type(action).__name__
    if name in ("_StoreTrueAction", "DeprecatedStoreTrueAction"):
        return "true"
    if name == "BooleanOptionalAction":
        return "bool"
    if name == "DeprecatedStoreConstAction":
        return "const"
    if name == "_HelpAction":
        return "help"
    t = getattr(action.type, "__name__", None)
    base = {"int": "int", "float": "float", "str": "str", "nullable_str": "str?",
            "human_readable_int": "hrint", "loads": "json", "json_list_type": "json",
            "parse_cuda_graph_backend_arg": "str", "parse_cuda_graph_config_arg": "str",
            None: "str"}[t]
    if action.nargs in ("+", "*"):
        return "list_" + base
    if action.nargs == "?":
        return "optstr"
    return base


def main() -> None:
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    out = sys.stdout
    out.write('"""Every `sglang serve` / `python -m sglang.launch_server` flag of SGLang '
              f'{sglang.__version__}, as data:\noption strings, argparse dest, value kind, '
              'choices.\n\nExtracted by tools/sglang_flags_extract.py from the parser '
              '`ServerArgs.add_cli_args` builds\n(sglang/srt/server_args.py, as '
              '`prepare_server_args` uses it). Read by `kvplan.sources.sglang_serve`.\n"""\n\n')
    out.write("from __future__ import annotations\n\nfrom typing import Any\n\n")
    out.write(f'SGLANG_FLAGS_VERSION = "{sglang.__version__}"\n\n')
    out.write("# kinds: true (store_true; deprecated store_true), bool (BooleanOptionalAction: --x,\n"
              "# --no-x), const (a deprecated flag that stores a fixed value), int, float, str,\n"
              "# str? (nullable_str: 'None' is None), hrint (human_readable_int: 1k = 1000, 1Ki =\n"
              "# 1024), json (json.loads), optstr (nargs='?'), list_<kind> (nargs '+' or '*')\n")
    out.write("FLAG_TABLE: tuple[tuple[str, str, str, tuple[Any, ...] | None], ...] = (\n")
    for a in parser._actions:
        if not a.option_strings:
            continue
        kind = kind_of(a)
        if kind == "help":
            continue
        choices = tuple(sorted(a.choices, key=str)) if a.choices else None
        line = f"    ({' '.join(a.option_strings)!r}, {a.dest!r}, {kind!r}, {choices!r}),"
        if len(line) > 100 and choices:
            out.write(f"    ({' '.join(a.option_strings)!r}, {a.dest!r}, {kind!r}, (\n")
            row = "        "
            for c in choices:
                item = f"{c!r}, "
                if len(row) + len(item) > 100:
                    out.write(row.rstrip() + "\n")
                    row = "        "
                row += item
            out.write(row.rstrip() + ")),\n")
        else:
            out.write(line + ("  # noqa: E501" if len(line) > 120 else "") + "\n")
    out.write(")\n")


if __name__ == "__main__":
    main()
