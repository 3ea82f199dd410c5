"""Run vLLM's own `human_readable_int` / `human_readable_int_or_auto` (vllm/utils/argparse_utils.py,
identical in 0.31.0-0.34.0) through argparse, as `vllm serve` does for --max-model-len,
--max-num-batched-tokens and --kv-cache-memory-bytes, on hand-picked and random strings: the
value, or argparse's error text. Writes the golden table tests/data/vllm-functions/
human_readable_int.0.34.0.json:

    /tmp/kvplan-e2e/oracle/.venv-0.34.0/bin/python tools/vllm_human_readable_int.py \
        > tests/data/vllm-functions/human_readable_int.0.34.0.json
"""

import argparse
import json
import random
import sys

import vllm
from vllm.utils.argparse_utils import human_readable_int, human_readable_int_or_auto

PICKED = [
    "0", "1", "-1", "-5", "auto", "AUTO", " Auto ", "128k", "128K", "128m", "128M", "1g", "1G",
    "2t", "2T", "25.6k", "25.6K", "1.5K", "1.5k", "1.5", "1.5M", "0.5m", "4.1m", "4.35k", "1.1k",
    "131072", "131_072", "131,072", " 32k ", "32 k", "32kk", "k", "K", "", " ", "1e3", "1e3k",
    "+5", "+5k", "-5k", "0x10", "1KiB", "1Ki", "128KB", "40G", "40g", "40GiB", "1.0K", "007k",
    "00.5k", ".5k", "5.k", "1..5k", "\u0663k", "\u0663\u0662K", "12\u0663", "1 000", "9" * 25,
    "9" * 25 + "k", "1.999999999999999999k", "262144", "1M", "1m", "8k", "8K", "1.5G", "0.0001k",
    "3.14159t", "1_0k", "1_000", "_1", "nan", "inf", "1\n", "\t64k\t",
]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm serve", exit_on_error=False)
    p.add_argument("--max-model-len", type=human_readable_int_or_auto)
    p.add_argument("--max-num-batched-tokens", type=human_readable_int)
    return p


def run(flag: str, text: str) -> dict:
    try:
        ns = parser().parse_args([f"{flag}={text}"])
    except argparse.ArgumentError as exc:
        return {"error": str(exc)}
    return {"value": getattr(ns, flag[2:].replace("-", "_"))}


def main() -> None:
    rng = random.Random(19)
    alphabet = list("0123456789") * 3 + list(".kKmMgGtT") + [" ", "-", "_", "+", "e", "a", "\u0663"]
    randoms = []
    for _ in range(1500):
        n = rng.choice([1, 2, 3, 4, 5, 6, 8])
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if rng.random() < 0.5:  # bias towards well-formed number + suffix shapes
            s = str(rng.randint(0, 10**rng.randint(1, 7)))
            if rng.random() < 0.5:
                s += "." + str(rng.randint(0, 999))
            s += rng.choice(["", "k", "K", "m", "M", "g", "G", "t", "T"])
        randoms.append(s)
    rows = []
    for text in dict.fromkeys(PICKED + randoms):
        rows.append({"input": text,
                     "max_model_len": run("--max-model-len", text),
                     "max_num_batched_tokens": run("--max-num-batched-tokens", text)})
    json.dump({"vllm_version": vllm.__version__, "python": sys.version.split()[0],
               "functions": ["vllm.utils.argparse_utils.human_readable_int_or_auto (--max-model-len)",
                             "vllm.utils.argparse_utils.human_readable_int (--max-num-batched-tokens)"],
               "rows": rows}, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
