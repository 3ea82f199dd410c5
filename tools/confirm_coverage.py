"""Confirm kvplan/data/coverage.csv with vLLM 0.34.0's own code (issue #18): for every `adapter:*`
and `generic` row, a config on which the e2e harness and `kvplan check` agree, or why not.

A development tool (never run by tests). Run from the project root, with any Python 3.11+:

    python3 tools/confirm_coverage.py sweep [--only ARCH ...] [--rerun]   # resumable; slow
    python3 tools/confirm_coverage.py status                              # counts so far
    python3 tools/confirm_coverage.py write   # coverage.csv `confirmed`, goldens, PROVENANCE
    python3 tools/confirm_coverage.py write --only ARCH ...   # those rows only (the others kept)

For each row it picks a config:

* real: a published config.json in tests/data/hf-configs, examples/configs,
  tests/data/coverage-real-configs or tests/data/heldout-configs (REAL_DIRS, in that order) whose
  first architecture is the row's (hand-made folders and stubs are skipped);
* defaults: else one built by tools/coverage_config_builder.py (in the vLLM venv) from the
  defaults of the configuration class vLLM would use for the architecture, written to
  tests/data/coverage-configs/<ARCH>/config.json.

Then it runs /work/shared/vllm-e2e's harness (vLLM 0.34.0's start-up code on a faked H100) and
`kvplan check` with compare.py's flags and compares them with compare.py's own functions
(`run_vllm`, `run_kvplan`, `compare_one`, imported from --e2e-dir). When vLLM refuses the flags
(`--max-model-len 32768` above the config's derived maximum) and kvplan refuses with the same
message, both are run again at that derived maximum, so that the KV layout is compared too; when
vLLM's scheduler refuses them (no chunked prefill, `--max-num-batched-tokens 8192` below the
length), both are run again at 8192 (the refusal matches when kvplan refuses with its message).
Results go to WORK/results.jsonl (one line per architecture, the last one wins) and the raw
outputs to WORK/out/.

Measured (2 cores shared with other jobs, load 6–11): the full sweep of 327 rows (247 with a
config, ~370 harness runs) took 3615 s with the fork server (vs ~60 s per fresh harness process
at that load); `recheck` (kvplan's side again, after a kvplan fix) ~25 min; `write` seconds.
Run `check-fork --only DIR ...` to compare the fork server with fresh processes (6 configs:
identical output).

`write` puts `confirmed` into coverage.csv (`real:<dir>`, `defaults:<dir>` or `no: <reason>`),
writes the trimmed vLLM outputs of the confirming runs as goldens
(tests/data/coverage-configs/<ARCH>/vllm-0.34.0.json, checked by
tests/models/test_coverage_confirmed.py) and tests/data/coverage-configs/PROVENANCE.md, and
removes the built configs no row is confirmed by.

`--retired` runs the same machinery over the architectures vLLM retired from its registry whose
transformers class its Transformers backend takes (no coverage.csv row): configs and goldens in
tests/data/retired-configs (STATUS.md there; tests/models/test_retired_backend.py replays them).
A multimodal one needs the checkpoint's processor: `tools/retired_processor.py CONFIG
WORK/processor/<config folder name>` first, and vLLM then runs on that folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "kvplan" / "data" / "coverage.csv"
BUILT = ROOT / "tests" / "data" / "coverage-configs"
# real published configs, in order of preference: the project's, the examples, the configs found
# for this table (tests/data/coverage-real-configs, PROVENANCE.md there), the held-out ones
REAL_DIRS = [ROOT / "tests" / "data" / "hf-configs", ROOT / "examples" / "configs",
             ROOT / "tests" / "data" / "coverage-real-configs",
             ROOT / "tests" / "data" / "heldout-configs"]
# --retired: the architectures vLLM 0.34.0 retired from its registry (_PREVIOUSLY_SUPPORTED_MODELS)
# whose transformers class its Transformers backend takes (kvplan/data/vllm_arch_resolution.json);
# they have no coverage.csv row, so their configs and goldens live apart
RETIRED = ROOT / "tests" / "data" / "retired-configs"
RETIRED_REAL_DIRS = REAL_DIRS
E2E_WORK = os.environ.get("KVPLAN_E2E_WORK") or os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                              "kvplan-e2e")
GOLDEN = "vllm-0.34.0.json"

# vLLM's max-length refusal, to read the derived maximum from (vllm/config/model.py,
# _get_and_verify_max_len)
_DERIVED = re.compile(r"greater than the derived max_model_len \((\w+)=([0-9.]+|inf)")
# vLLM's SchedulerConfig refusal when chunked prefill is off (vllm/config/scheduler.py)
_NO_CHUNKING = re.compile(r"max_num_batched_tokens \(\d+\) is smaller than max_model_len")


def compare_run(compare, v: dict, k: dict) -> tuple[str, list[str], dict]:
    """compare.py's compare_one, plus the flag refusal it does not list: vLLM's SchedulerConfig
    refusing --max-num-batched-tokens below max_model_len for a model without chunked prefill
    (a pooling model with CLS/MEAN/STEP pooling, an encoder) is the flags', not the model's; it
    matches when kvplan refuses with the same message, as compare_one's VLLM_REJECTS_FLAGS."""
    verdict, diffs, row = compare.compare_one(v, k)
    msg = " ".join(str((v.get("exception") or {}).get("message", "")).split())
    if v.get("status") == "ok" or not _NO_CHUNKING.search(msg):
        return verdict, diffs, row
    if k.get("_rc") in (1, 2) and row.get("kvplan_error") and compare._same_error(
            msg, row["kvplan_error"]):
        return "MATCH", [], row
    if k.get("_rc") in (1, 2):
        return "MISMATCH", [f"both refuse, different message: vLLM {msg[:300]!r} vs kvplan "
                            f"{str(row.get('kvplan_error'))[:300]!r}"], row
    return "MISMATCH", [f"vLLM refuses at start-up ({msg[:300]}) but kvplan plans it "
                        f"(rc={k.get('_rc')}, verdict {k.get('verdict')})"], row


def confirmable(row: dict) -> bool:
    return row["path"].startswith("adapter:") or row["path"] == "generic"


# held-out folders that are trimmed copies of the hub file (tests/data/heldout-configs/PROVENANCE.md:
# key order and missing fields show it): not a published config of the architecture
TRIMMED = {"MiniMaxAI--MiniMax-M3", "Qwen--Qwen3-VL-2B-Instruct", "Qwen--Qwen3-VL-235B-A22B-Instruct",
           "XiaomiMiMo--MiMo-7B-Base", "stepfun-ai--Step-3.7-Flash", "stepfun-ai--Step-3.7-Flash-FP8"}


def retired_rows() -> list[dict]:
    """--retired: one row per retired architecture vLLM 0.34.0 serves on its Transformers
    backend (registry.py _try_resolve_transformers before _raise_for_unsupported)."""
    data = json.loads((ROOT / "kvplan" / "data" / "vllm_arch_resolution.json").read_text())
    rel_ = data["releases"]["0.34.0"]
    backend = set(rel_["transformers_backend"]) | set(rel_["transformers_backend_models"])
    return [{"architecture": a, "path": "retired"} for a in rel_["previously_supported"]
            if a in backend]


def real_configs(dirs: list[Path] | None = None) -> dict[str, Path]:
    """architecture -> the real config folder whose first architecture it is."""
    out: dict[str, Path] = {}
    for base in dirs or REAL_DIRS:
        for d in sorted(base.iterdir()) if base.is_dir() else []:
            # hand-made folders and draft heads (a draft's architecture is its target's) are
            # not a published config of the architecture
            if (re.search(r"handmade|EAGLE|DFlash|draft|stub", d.name) or d.name in TRIMMED
                    or not (d / "config.json").is_file()):
                continue
            archs = json.loads((d / "config.json").read_text()).get("architectures") or []
            if archs and archs[0] not in out:
                out[archs[0]] = d
    return out


_VLLM_SIDE = ("HARNESS_ERROR", "VLLM_CANNOT_BUILD", "VLLM_MODEL_INIT_ERROR")


def overall(runs: list[dict]) -> str:
    """A row's verdict from its runs: vLLM not building the config outweighs a disagreement
    (nothing can be confirmed on it), a disagreement outweighs a match."""
    for x in runs:
        if x["verdict"] in _VLLM_SIDE:
            return str(x["verdict"])
    return next((str(x["verdict"]) for x in runs if x["verdict"] != "MATCH"), "MATCH")


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# ---------------------------------------------------------------------------------------------
class ForkServer:
    """tools/vllm_e2e_forkserver.py: the harness's main() in a forked child per config."""

    def __init__(self, python: str, e2e_dir: str, work: Path) -> None:
        self.work = work
        self.p = subprocess.Popen([python, str(ROOT / "tools" / "vllm_e2e_forkserver.py"),
                                   "--e2e-dir", e2e_dir], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  env=dict(os.environ, HF_HUB_OFFLINE="1",
                                           TRANSFORMERS_OFFLINE="1"))
        assert self.p.stdout is not None and self.p.stdin is not None
        if json.loads(self.p.stdout.readline()).get("ready") is not True:
            raise SystemExit("fork server did not start")

    def run(self, argv: list[str], timeout: int) -> dict:
        assert self.p.stdout is not None and self.p.stdin is not None
        out, err = self.work / "fork.out.json", self.work / "fork.err.txt"
        self.p.stdin.write(json.dumps({"argv": argv, "out": str(out), "err": str(err),
                                       "timeout": timeout}) + "\n")
        self.p.stdin.flush()
        reply = json.loads(self.p.stdout.readline())
        tail = err.read_text(errors="replace")[-3000:] if err.exists() else ""
        if reply["rc"] is None:
            return {"status": "harness_timeout", "stderr_tail": tail}
        try:
            d: dict = json.loads(out.read_text())
        except (OSError, json.JSONDecodeError):
            return {"status": "harness_crash", "rc": reply["rc"], "stderr_tail": tail}
        d["stderr_tail"] = tail
        return d


class Sweep:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.work = Path(a.work)
        (self.work / "out").mkdir(parents=True, exist_ok=True)
        sys.path.insert(0, a.e2e_dir)
        import compare  # the e2e harness's comparison (its rules, not a copy)

        self.compare = compare
        self.results_file = self.work / "results.jsonl"
        self.fork: ForkServer | None = None
        self.built = RETIRED if getattr(a, "retired", False) else BUILT

    def run_vllm(self, cfg: Path) -> dict:
        c = self.compare
        extra: list[str] = []
        proc = self.work / "processor" / cfg.name
        if self.a.retired and (proc / "config.json").is_file():
            # a multimodal Transformers-backend model: vLLM reads the checkpoint's processor while
            # it builds ModelConfig (transformers/multimodal.py _get_supported_modalities) and,
            # with --skip-tokenizer-init, hands it no tokenizer; the folder made by
            # tools/retired_processor.py holds the same config.json plus processor files built
            # from the processor class's defaults (read for the modalities only), and vLLM runs
            # with its tokenizer (--no-skip-tokenizer-init)
            cfg, extra = proc, ["--extra=--no-skip-tokenizer-init"]
        if not self.a.fork:
            assert not extra, "the processor folders need the fork server (--extra)"
            return dict(c.run_vllm(self.a.vllm_python, str(cfg), self.a.timeout, True))
        if self.fork is None:
            self.fork = ForkServer(self.a.vllm_python, self.a.e2e_dir, self.work)
        # compare.run_vllm's harness arguments (with --pass-kv-cache-memory-bytes, its default)
        return self.fork.run([str(cfg), "--kv-memory", str(c.KV_MEM_BYTES), "--max-model-len",
                              str(c.MAX_MODEL_LEN), "--max-num-batched-tokens", str(c.MNBT),
                              "--pass-kv-cache-memory-bytes", *extra], self.a.timeout)

    def results(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        if self.results_file.exists():
            for line in self.results_file.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    if r.get("runs"):
                        r["verdict"] = overall(r["runs"])
                    out[r["architecture"]] = r
        return out

    def choices(self, archs: list[str]) -> dict[str, dict]:
        """The builder's choice per architecture (cached in WORK/choices.json)."""
        cache = self.work / "choices.json"
        have: dict[str, dict] = json.loads(cache.read_text()) if cache.exists() else {}
        missing = [a for a in archs if a not in have]
        if missing:
            p = subprocess.run([self.a.vllm_python, str(ROOT / "tools" / "coverage_config_builder.py"),
                                *missing], capture_output=True, text=True, check=True,
                               env=dict(os.environ, VLLM_E2E_DIR=self.a.e2e_dir,
                                        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
            have.update(json.loads(p.stdout))
            cache.write_text(json.dumps(have, indent=1, sort_keys=True))
        return have

    @contextmanager
    def max_model_len(self, n: int):
        old = self.compare.MAX_MODEL_LEN
        self.compare.MAX_MODEL_LEN = n
        try:
            yield
        finally:
            self.compare.MAX_MODEL_LEN = old

    def run_pair(self, arch: str, cfg: Path, mml: int) -> tuple[str, list[str], dict, dict, dict]:
        c = self.compare
        with self.max_model_len(mml):
            v = self.run_vllm(cfg)
            k = c.run_kvplan(self.a.kvplan, str(cfg), self.a.timeout)
        for tag, d in (("vllm", v), ("kvplan", k)):
            (self.work / "out" / f"{arch}.{mml}.{tag}.json").write_text(
                json.dumps(d, indent=1, default=str))
        verdict, diffs, row = compare_run(c, v, k)
        return verdict, diffs, row, v, k

    def one(self, row: dict, real: dict[str, Path], choice: dict | None) -> dict:
        arch = row["architecture"]
        res: dict = {"architecture": arch, "path": row["path"]}
        if arch in real:
            cfg, kind = real[arch], "real"
        elif choice is not None and "config" in choice:
            cfg, kind = self.built / arch, "defaults"
            cfg.mkdir(parents=True, exist_ok=True)
            (cfg / "config.json").write_text(json.dumps(choice["config"], indent=2) + "\n")
        else:
            res.update(kind="none", verdict="NO_CONFIG",
                       reason=(choice or {}).get("error", "no config"),
                       model_type=(choice or {}).get("model_type"))
            return res
        res.update(kind=kind, config=rel(cfg))
        if choice:
            res.update(model_type=choice.get("model_type"), config_class=choice.get("config_class"),
                       how=choice.get("how"))
        t0 = time.monotonic()
        verdict, diffs, summary, v, _ = self.run_pair(arch, cfg, self.compare.MAX_MODEL_LEN)
        runs = [{"max_model_len": self.compare.MAX_MODEL_LEN, "verdict": verdict, "diffs": diffs,
                 **summary}]
        exc = v.get("exception") or {}
        m = _DERIVED.search(str(exc.get("message", "")))
        if v.get("status") != "ok" and m and m.group(2) != "inf":
            # vLLM refused the flags: compare the KV layout at its derived maximum too (the
            # row is confirmed only when both runs match)
            mml = int(float(m.group(2)))
            verdict, diffs, summary, v2, _ = self.run_pair(arch, cfg, mml)
            runs.append({"max_model_len": mml, "verdict": verdict, "diffs": diffs, **summary})
            if _NO_CHUNKING.search(str((v2.get("exception") or {}).get("message", ""))):
                # a model without chunked prefill (an encoder) needs max_model_len ≤ the batch
                # (that run stands in for the one vLLM's scheduler refused)
                skipped = runs.pop()["max_model_len"]
                mml = self.compare.MNBT
                verdict, diffs, summary, _, _ = self.run_pair(arch, cfg, mml)
                runs.append({"max_model_len": mml, "verdict": verdict, "diffs": diffs,
                             "instead_of": skipped, **summary})
        elif v.get("status") != "ok" and _NO_CHUNKING.search(str(exc.get("message", ""))):
            # vLLM's scheduler refused the flags (no chunked prefill: max_model_len above the
            # batch): compare the KV layout with max_model_len = the batch too
            mml = self.compare.MNBT
            verdict, diffs, summary, _, _ = self.run_pair(arch, cfg, mml)
            runs.append({"max_model_len": mml, "verdict": verdict, "diffs": diffs, **summary})
        res.update(verdict=overall(runs), runs=runs, seconds=round(time.monotonic() - t0, 1))
        return res

    def sweep(self) -> int:
        rows = (retired_rows() if self.a.retired else
                [r for r in csv.DictReader(TABLE.open(newline="")) if confirmable(r)])
        if self.a.only:
            rows = [r for r in rows if r["architecture"] in set(self.a.only)]
        done = self.results()
        todo = [r for r in rows if self.a.rerun or r["architecture"] not in done]
        real = real_configs(RETIRED_REAL_DIRS if self.a.retired else None)
        choices = self.choices([r["architecture"] for r in todo if r["architecture"] not in real])
        t0 = time.monotonic()
        print(f"# {len(todo)} of {len(rows)} rows to run; work dir {self.work}", flush=True)
        for i, row in enumerate(todo, 1):
            arch = row["architecture"]
            res = self.one(row, real, choices.get(arch))
            with self.results_file.open("a") as fh:
                fh.write(json.dumps(res, default=str) + "\n")
            last = (res.get("runs") or [{}])[-1]
            print(f"[{i}/{len(todo)} {time.monotonic() - t0:7.0f}s] {res['verdict']:<22} {arch} "
                  f"({res['kind']}) {'; '.join(last.get('diffs', []))[:300]}"
                  f"{(last.get('vllm_error') or res.get('reason') or '')[:300]}", flush=True)
        print(f"# done in {time.monotonic() - t0:.0f}s", flush=True)
        return 0


def recheck(a: argparse.Namespace) -> int:
    """kvplan's side again against the stored vLLM outputs (after a kvplan fix; seconds)."""
    s = Sweep(a)
    c = s.compare
    results = s.results()
    changed = 0
    for arch, r in sorted(results.items()):
        if a.only and arch not in a.only or not r.get("runs"):
            continue
        before = r["verdict"]
        cfg = ROOT / r["config"]
        if r["kind"] == "defaults" and not (cfg / "config.json").exists():
            cfg.mkdir(parents=True, exist_ok=True)
            choice = json.loads((s.work / "choices.json").read_text())[arch]
            (cfg / "config.json").write_text(json.dumps(choice["config"], indent=2) + "\n")
        for x in r["runs"]:
            mml = x["max_model_len"]
            v = json.loads((s.work / "out" / f"{arch}.{mml}.vllm.json").read_text())
            with s.max_model_len(mml):
                k = c.run_kvplan(a.kvplan, str(ROOT / r["config"]), a.timeout)
            (s.work / "out" / f"{arch}.{mml}.kvplan.json").write_text(
                json.dumps(k, indent=1, default=str))
            verdict, diffs, summary = compare_run(c, v, k)
            x.clear()
            x.update({"max_model_len": mml, "verdict": verdict, "diffs": diffs, **summary})
        r["verdict"] = overall(r["runs"])
        if r["verdict"] != before:
            changed += 1
            print(f"{before} -> {r['verdict']}: {arch}", flush=True)
    with s.results_file.open("a") as fh:
        for r in results.values():
            if r.get("runs"):
                fh.write(json.dumps(r, default=str) + "\n")
    print(f"# {changed} rows changed verdict")
    return 0


_VOLATILE = ("log", "patches", "stderr_tail", "model_dir")


def check_fork(a: argparse.Namespace) -> int:
    """The fork server's output equals a fresh harness process's, on the given config folders."""
    s = Sweep(a)
    bad = 0
    for d in a.only or []:
        cfg = Path(d).resolve()
        a.fork = True
        t0 = time.monotonic()
        f = s.run_vllm(cfg)
        t1 = time.monotonic()
        a.fork = False
        g = s.run_vllm(cfg)
        t2 = time.monotonic()
        f2, g2 = ({k: v for k, v in x.items() if k not in _VOLATILE} for x in (f, g))
        same = json.dumps(f2, sort_keys=True, default=str) == json.dumps(g2, sort_keys=True,
                                                                           default=str)
        bad += not same
        diff = sorted(k for k in set(f2) | set(g2) if f2.get(k) != g2.get(k))
        print(f"{'same' if same else 'DIFFERENT'} {cfg.name}: status {f.get('status')}, "
              f"fork {t1 - t0:.0f}s, fresh {t2 - t1:.0f}s {diff}", flush=True)
    return 1 if bad else 0


def status(a: argparse.Namespace) -> int:
    s = Sweep(a)
    res = s.results()
    counts: dict[str, int] = {}
    for r in res.values():
        key = f"{r['verdict']} ({r['kind']})"
        counts[key] = counts.get(key, 0) + 1
    for k in sorted(counts):
        print(f"{counts[k]:4d}  {k}")
    print(f"{len(res):4d}  total")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=("sweep", "status", "write", "check-fork", "recheck"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--rerun", action="store_true", help="run rows that have a result again")
    ap.add_argument("--prune", action="store_true",
                    help="write: remove the built configs of rows that are not confirmed")
    ap.add_argument("--work", default=os.path.join(E2E_WORK, "coverage"))
    ap.add_argument("--e2e-dir", default=os.environ.get("VLLM_E2E_DIR", "/work/shared/vllm-e2e"))
    ap.add_argument("--vllm-python", default=os.environ.get(
        "VLLM_E2E_PYTHON", os.path.join(E2E_WORK, "oracle/.venv-0.34.0/bin/python")))
    ap.add_argument("--kvplan", default=str(ROOT / ".venv" / "bin" / "kvplan"))
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--retired", action="store_true",
                    help="the retired architectures the Transformers backend serves (no coverage "
                    "row; configs and goldens in tests/data/retired-configs) instead of the table")
    ap.add_argument("--no-fork", dest="fork", action="store_false",
                    help="a fresh harness process per run (compare.run_vllm) instead of the "
                    "fork server")
    a = ap.parse_args(argv)
    if a.command == "sweep":
        return Sweep(a).sweep()
    if a.command == "status":
        return status(a)
    if a.command == "check-fork":
        return check_fork(a)
    if a.command == "recheck":
        return recheck(a)
    return write_retired(a) if a.retired else write(a)


# ---------------------------------------------------------------------------------------------
# write: the `confirmed` column, the goldens, PROVENANCE.md

def _one_line(text: object, n: int = 160) -> str:
    t = " ".join(str(text or "").split())
    return t if len(t) <= n else t[: n - 1] + "…"


def _vllm_message(exc_message: str) -> str:
    """vLLM's error text without pydantic's wrapper (as compare._same_error reads it)."""
    v = " ".join(str(exc_message).split())
    v = re.sub(r"^.*?Value error, ", "", v)
    return re.sub(r" \[type=value_error.*$", "", v).strip()


# Rows whose disagreement another branch is fixing right now (class -> branch and fix); the lead
# merges those fixes, then `recheck --only` / `sweep --only` + `write` confirm the rows. e2e-18's
# classes (--trust-remote-code refusals, the float in the max-length refusal, the generic path's
# derived max length, the multimodal wrappers' layer-name prefix, chunked local attention) are
# merged, and confirmed by recheck-18; none is open now.
OWNED_ELSEWHERE: dict[str, str] = {}


# Disagreements found by this sweep that are kvplan's and still open, in words (the class and
# the vLLM code to mirror); tools/confirm_coverage.py writes them into `confirmed`.
OPEN: dict[str, str] = {}  # none now: ownconfig-18 mirrored vLLM's own configuration classes
# (kvplan/models/resolution/vllm_configs.py) for Beam, HYV4 and Alpamayo2Super


def _clean(text: str) -> str:
    """A vLLM message as a reason: pydantic's wrapper and this checkout's path dropped."""
    text = re.sub(r"^\[\w+\] ", "", " ".join(str(text or "").split()))
    text = re.sub(r"^\w*Error: 1 validation error for \w+ Value error, ", "", text)
    text = re.sub(r" \[type=value_error.*$", "", text).replace(f"{ROOT}/", "")
    # a config folder of another checkout (the sweep's work dir may come from one)
    return re.sub(r"(?:/[\w.+-]+)+/(?=(?:tests/data|examples/configs)/)", "", text)


def triage(r: dict) -> str:
    """The reason a row is not confirmed, in words (one line)."""
    v = r["verdict"]
    runs = r.get("runs") or [{}]
    if v == "NO_CONFIG":
        if r.get("model_type") is None:
            return ("no: remote code: no configuration class for it in transformers or vLLM "
                    "0.34.0 (its checkpoints ship their own); vLLM builds it only with "
                    "--trust-remote-code and that code")
        return f"no: no config to build: {_one_line(r.get('reason'))}"
    bad = next((x for x in runs if x["verdict"] == v), runs[-1])
    full = _clean(bad.get("vllm_error") or "")
    err = _one_line(full, 200)
    where = f"the {r['kind']} config {r['config']}"
    at = (f" at --max-model-len {bad['max_model_len']}"
          if bad.get("max_model_len") != runs[0].get("max_model_len") else "")
    rc = bad.get("kvplan_rc")
    # kvplan's plan of a refusal carries vLLM's text without its exception type
    same = bool(bad.get("kvplan_error")) and any(
        _same_refusal(text, bad["kvplan_error"])
        for text in (full, re.sub(r"^\w+(?:Error|Exception): ", "", full)))
    kv = ("kvplan refuses it with the same message" if same else "kvplan plans it"
          if rc in (0, 1) else "kvplan refuses it too" if rc is not None else "")
    if v == "VLLM_CANNOT_BUILD":
        owner = (f" [fix: {OWNED_ELSEWHERE['trust_remote_code']}]"
                 if "trust_remote_code" in OWNED_ELSEWHERE and not same and rc in (0, 1)
                 and re.search(r"custom code|trust_remote_code", full) else "")
        return f"no: vLLM refuses {where}{at}: {err} ({kv}){owner}"
    if v == "VLLM_MODEL_INIT_ERROR":
        return f"no: vLLM's model constructor raises on {where}{at}: {err} ({kv})"
    if v == "HARNESS_ERROR":
        return f"no: the CPU harness cannot build {where}{at}: {err}"
    if r["architecture"] in OPEN:
        return f"no: kvplan disagrees with vLLM on {where}: {OPEN[r['architecture']]}"
    cls = classify_disagreement(bad)
    owner = f" [fix: {OWNED_ELSEWHERE[cls]}]" if cls in OWNED_ELSEWHERE else ""
    m = _DERIVED.search(bad.get("vllm_error") or "")
    if cls == "max_len_wording" and m:
        what = (f"both refuse --max-model-len {bad['max_model_len']}, but vLLM's message prints "
                f"{m.group(1)}={m.group(2)} where kvplan's prints {m.group(1)}="
                f"{m.group(2).removesuffix('.0')}")
    elif cls == "generic_max_len" and m:
        what = (f"vLLM refuses --max-model-len {bad['max_model_len']} (derived max_model_len "
                f"{m.group(1)}={m.group(2)}), kvplan plans it")
    else:
        what = f"{_one_line(_clean('; '.join(bad.get('diffs') or [])), 240)}{at}"
    agree = [x["max_model_len"] for x in runs if x["verdict"] == "MATCH"]
    also = (f"; the plans agree at --max-model-len {agree[-1]}" if agree else "")
    return f"no: kvplan disagrees with vLLM on {where}: {what}{owner}{also}"


def _same_refusal(vllm_message: str, kvplan_message: str) -> bool:
    """compare.py's rule for one refusal (its first 200 characters), with each side's checkout
    path dropped (the sweep may have run vLLM from another worktree)."""
    return _clean(vllm_message)[:200] == _clean(kvplan_message)[:200]


def classify_disagreement(run: dict) -> str:
    d = " ".join(run.get("diffs") or [])
    if re.search(r"=\d+\.0 or model_max_length", d) and "both refuse, different message" in d:
        return "max_len_wording"
    if "vLLM refuses at start-up" in d and "but kvplan plans it" in d:
        return "generic_max_len"
    if "differ only by the prefix 'language_model.'" in d:
        return "lm_prefix"
    if "ChunkedLocalAttentionSpec" in d:
        return "chunked_local"
    return "other"


def golden_run(out: Path) -> dict:
    """One harness output file (<ARCH>.<max_model_len>.vllm.json) as a golden run."""
    return trimmed_run(json.loads(out.read_text()), int(out.name.split(".")[1]))


def trimmed_run(v: dict, mml: int) -> dict:
    """What a golden keeps of one harness run at `mml` tokens: vLLM's refusal, or its groups,
    blocks, concurrency and length."""
    if v.get("status") != "ok":
        exc = v.get("exception") or {}
        return {"max_model_len": mml, "status": "vllm_error", "stage": v.get("stage"),
                "error": _vllm_message(exc.get("message", ""))}
    run = {"max_model_len": mml, "status": "ok", "fits": bool(v.get("fits")),
           "groups": [{k: g.get(k) for k in ("spec_type", "block_size", "num_layers",
                                             "page_size_bytes", "layer_names")}
                      for g in v.get("groups") or []]}
    if v.get("fits"):
        run.update(num_blocks=v.get("num_blocks"), max_concurrency=v.get("max_concurrency"),
                   max_model_len_after_planning=v.get("max_model_len_after_planning"))
    else:
        run["error"] = (v.get("error") or {}).get("message")
    return run


def write(a: argparse.Namespace) -> int:
    s = Sweep(a)
    c = s.compare
    results = s.results()
    with TABLE.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    cache = s.work / "choices.json"
    choices = json.loads(cache.read_text()) if cache.exists() else {}
    confirmed_built: dict[str, dict] = {}
    only = set(a.only or [])
    for row in rows:
        arch = row["architecture"]
        r = results.get(arch)
        if only and arch not in only:  # `write --only`: the other rows stay as they are
            if row["confirmed"].startswith("defaults:"):
                confirmed_built[arch] = {}
            continue
        if not confirmable(row):
            row["confirmed"] = ""
            continue
        if r is None:
            row["confirmed"] = "no: not run yet (tools/confirm_coverage.py sweep)"
            continue
        if r["verdict"] != "MATCH":
            row["confirmed"] = triage(r)
            (BUILT / arch / GOLDEN).unlink(missing_ok=True)
            continue
        row["confirmed"] = f"{r['kind']}:{r['config']}"
        golden = {
            "architecture": arch, "kind": r["kind"], "config": r["config"],
            "vllm": c.VLLM_VERSION,
            "made_by": "tools/confirm_coverage.py: /work/shared/vllm-e2e/vllm_e2e.py (vLLM "
                       "0.34.0's start-up code on a faked H100, CPU), trimmed",
            "flags": {"tensor_parallel_size": 1, "max_num_batched_tokens": c.MNBT,
                      "kv_cache_memory": c.KV_MEM, "vllm": c.VLLM_VERSION, "gpu": c.GPU},
            "runs": [golden_run(s.work / "out" / f"{arch}.{x['max_model_len']}.vllm.json")
                     for x in r["runs"]],
        }
        folder = BUILT / arch
        folder.mkdir(parents=True, exist_ok=True)
        (folder / GOLDEN).write_text(json.dumps(golden, indent=1) + "\n")
        if r["kind"] == "defaults":
            confirmed_built[arch] = choices[arch]
        elif only:  # now confirmed on a real config: its built config goes
            (folder / "config.json").unlink(missing_ok=True)
    # built configs and goldens of rows that are not (or no longer) confirmed go (--prune;
    # `recheck` writes a missing built config again from WORK/choices.json)
    for folder in sorted(BUILT.iterdir()) if BUILT.is_dir() and a.prune and not a.only else []:
        if folder.is_dir() and not any(
                rw["architecture"] == folder.name and rw["confirmed"].startswith(("real:",
                                                                                  "defaults:"))
                for rw in rows):
            shutil.rmtree(folder)
        elif folder.is_dir() and folder.name not in confirmed_built:
            (folder / "config.json").unlink(missing_ok=True)
    with TABLE.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()) if "confirmed" in rows[0]
                           else [*rows[0].keys(), "confirmed"], lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    write_provenance(confirmed_built)
    counts: dict[str, int] = {}
    for row in rows:
        if confirmable(row):
            k = row["confirmed"].split(":", 1)[0]
            counts[k] = counts.get(k, 0) + 1
    print(counts)
    return 0


def write_provenance(built: dict[str, dict]) -> None:
    """PROVENANCE.md of the built configs; an entry `{}` (a row `write --only` did not touch)
    keeps its block from the file as it is."""
    old: dict[str, list[str]] = {}
    if (BUILT / "PROVENANCE.md").exists():
        for block in (BUILT / "PROVENANCE.md").read_text().split("\n### ")[1:]:
            name, *body = block.rstrip("\n").split("\n")
            old[name] = body
    lines = [
        "# Provenance of the configs in this folder",
        "",
        "HAND-MADE/DEFAULTS: none of these is a published config. Each `<ARCH>/config.json` was",
        "built by `tools/coverage_config_builder.py` (run in the vLLM 0.34.0 e2e venv: vllm 0.34.0,",
        "transformers 5.20.2) as `ConfigClass().to_dict()` — every field the class's default —",
        "with `architectures: [ARCH]` set and `transformers_version` dropped; nothing else was",
        "edited or shrunk. The class is the one vLLM 0.34.0 uses for the model type: its own",
        "(`vllm/transformers_utils/configs/`, registered in `_CONFIG_REGISTRY`) first, else",
        "transformers'. `how` says how the model type was found for the architecture.",
        "",
        "Each `<ARCH>/vllm-0.34.0.json` is the golden: vLLM 0.34.0's own start-up code run by",
        "`/work/shared/vllm-e2e/vllm_e2e.py` on that config (or on the real config it names), with",
        "compare.py's flags, trimmed to what compare.py compares. `tools/confirm_coverage.py`",
        "regenerates both; `tests/models/test_coverage_confirmed.py` replays kvplan on them.",
        "",
    ]
    for arch in sorted(built):
        ch = built[arch]
        if not ch:
            lines += [f"### {arch}", *old[arch], ""]
            continue
        lines += [f"### {arch}", f"- model type: `{ch['model_type']}`",
                  f"- class: `{ch['config_class']}`", f"- how: {ch['how']}",
                  "- status: DEFAULTS (class defaults + architectures)", ""]
    (BUILT / "PROVENANCE.md").write_text("\n".join(lines))



# ---------------------------------------------------------------------------------------------
# write --retired: goldens of the retired architectures the Transformers backend serves

def _agrees(x: dict) -> bool:
    """A run on which kvplan equals vLLM: compare.py's MATCH, or vLLM's model constructor
    refusing and kvplan refusing with the same message (compare.py has no verdict for it)."""
    if x["verdict"] == "MATCH":
        return True
    return (x["verdict"] == "VLLM_MODEL_INIT_ERROR" and bool(x.get("kvplan_error"))
            and _same_refusal(re.sub(r"^\[model\] \w+: ", "", x.get("vllm_error") or ""),
                              x["kvplan_error"]))


def write_retired(a: argparse.Namespace) -> int:
    """tests/data/retired-configs/<ARCH>/vllm-0.34.0.json for every retired architecture whose
    runs all agree (replayed by tests/models/test_retired_backend.py), STATUS.md for all, and
    the built configs of the others removed."""
    s = Sweep(a)
    c = s.compare
    results = s.results()
    choices = json.loads((s.work / "choices.json").read_text())
    lines = ["# Retired architectures vLLM 0.34.0 serves on its Transformers backend", "",
             "`tools/confirm_coverage.py sweep --retired` + `write --retired`: each architecture "
             "of vLLM's `_PREVIOUSLY_SUPPORTED_MODELS` whose transformers class the backend "
             "takes (kvplan/data/vllm_arch_resolution.json), run by the e2e harness and "
             "`kvplan check` with compare.py's flags.", ""]
    built: dict[str, dict] = {}
    for row in retired_rows():
        arch = row["architecture"]
        r = results.get(arch)
        folder = RETIRED / arch
        if r is None or not r.get("runs"):
            why = "not run" if r is None else _one_line(r.get("reason"), 300)
            lines.append(f"- {arch}: no: {why}")
            continue
        if not all(_agrees(x) for x in r["runs"]):
            lines.append(f"- {arch}: no: {triage(r).removeprefix('no: ')}")
            (folder / GOLDEN).unlink(missing_ok=True)
            continue
        proc = s.work / "processor" / Path(r["config"]).name
        golden = {
            "architecture": arch, "kind": r["kind"], "config": r["config"], "vllm": c.VLLM_VERSION,
            "made_by": "tools/confirm_coverage.py --retired: /work/shared/vllm-e2e/vllm_e2e.py "
                       "(vLLM 0.34.0's start-up code on a faked H100, CPU), trimmed",
            "flags": {"tensor_parallel_size": 1, "max_num_batched_tokens": c.MNBT,
                      "kv_cache_memory": c.KV_MEM, "vllm": c.VLLM_VERSION, "gpu": c.GPU},
            "runs": [golden_run(s.work / "out" / f"{arch}.{x['max_model_len']}.vllm.json")
                     for x in r["runs"]],
        }
        if (proc / "config.json").is_file():
            golden["processor"] = ("vLLM ran on a copy of the config with processor files built "
                                   "by tools/retired_processor.py (class defaults, a word-level "
                                   "tokenizer) and --no-skip-tokenizer-init")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / GOLDEN).write_text(json.dumps(golden, indent=1) + "\n")
        if r["kind"] == "defaults":
            built[arch] = choices[arch]
        what = ("vLLM refuses it while building the model, kvplan with the same message"
                if golden["runs"][-1]["status"] != "ok" else "kvplan's plan equals vLLM's")
        lines.append(f"- {arch}: confirmed ({r['kind']}:{r['config']}): {what}")
    for folder in sorted(RETIRED.iterdir()) if RETIRED.is_dir() else []:
        if folder.is_dir() and not (folder / GOLDEN).exists():
            shutil.rmtree(folder)
    prov = ["", "## Provenance", "",
            "HAND-MADE/DEFAULTS: the `<ARCH>/config.json` files here are not published configs. "
            "Each was built by `tools/coverage_config_builder.py` (vLLM 0.34.0 e2e venv, "
            "transformers 5.20.2) as `ConfigClass().to_dict()` with `architectures: [ARCH]` set "
            "and `transformers_version` dropped (unless its line below says what else). A `real` "
            "golden names its published config "
            "(tests/data/heldout-configs, PROVENANCE.md there).", ""]
    for arch in sorted(built):
        ch = built[arch]
        status = "HAND-MADE (class defaults, the fields named above set)" if "HAND-MADE" in \
            ch["how"] else "DEFAULTS"
        prov += [f"- {arch}: model type `{ch['model_type']}`, class `{ch['config_class']}` "
                 f"({ch['how']}); {status}"]
    (RETIRED / "STATUS.md").write_text("\n".join(lines + prov) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
