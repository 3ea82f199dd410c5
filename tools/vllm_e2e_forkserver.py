"""Run the vLLM e2e harness (/work/shared/vllm-e2e/vllm_e2e.py) on many configs without paying
its ~17 CPU-seconds of imports (torch, vllm, the serve parser) each time: import once, then fork
one child per config that runs the harness's own `main()` unchanged (a development tool for
tools/confirm_coverage.py; never run by tests). Run it with the e2e venv's Python:

    $VENV/bin/python tools/vllm_e2e_forkserver.py [--e2e-dir DIR]

Protocol: one JSON request per stdin line, {"argv": [harness arguments], "out": FILE,
"err": FILE, "timeout": S}; the child writes the harness's JSON to FILE and its stderr to the
err FILE; the server answers one JSON line {"rc": exit status or null on timeout}.

Why the result is the harness's: the parent applies the harness's own patches in the harness's
order (stub the CUDA extensions, torchvision, Triton, `import vllm`, the H100 platform,
torch.cuda, the in-process registry inspection) and imports modules only; it builds no config
and initialises no distributed state. Each child is a copy of that state and calls
`vllm_e2e.main(argv)`, which applies the patches again (each is idempotent: already defined op
schemas are skipped, the platform object is replaced by an identical one) and does the rest:
its own VLLM_CACHE_ROOT, config, distributed init, model, plan. Children never see each other's
state. tools/confirm_coverage.py's `--check-forkserver` compares it with fresh processes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def prepare(e2e_dir: str):
    sys.path.insert(0, e2e_dir)
    for k, v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"),
                 ("VLLM_TARGET_DEVICE", "cuda"), ("VLLM_LOGGING_LEVEL", "INFO"),
                 ("VLLM_NO_USAGE_STATS", "1"), ("DO_NOT_TRACK", "1")):
        os.environ.setdefault(k, v)
    import vllm_e2e as h

    h.stub_cuda_extensions()
    h.patch_torchvision_ops()
    h.patch_triton_driver()
    import vllm  # noqa: F401

    h.install_h100_platform()
    h.patch_torch_cuda()
    h.patch_registry_subprocess()
    # modules every run imports (no state is created by importing them)
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.entrypoints.common.cli_args  # noqa: F401
    import vllm.model_executor.model_loader.utils  # noqa: F401
    import vllm.v1.core.kv_cache_utils  # noqa: F401
    return h


def serve(h) -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child
            try:
                out = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                err = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(out, 1)
                os.dup2(err, 2)
                sys.stdout = os.fdopen(1, "w")
                sys.stderr = os.fdopen(2, "w")
                rc = h.main(req["argv"])
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001
                rc = 3
            os._exit(rc or 0)
        deadline = time.monotonic() + float(req.get("timeout", 600))
        rc = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                break
            time.sleep(0.2)
        if rc is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        print(json.dumps({"rc": rc}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--e2e-dir", default=os.environ.get("VLLM_E2E_DIR", "/work/shared/vllm-e2e"))
    a = ap.parse_args()
    # vLLM logs to stdout on import: keep the protocol channel clean
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    h = prepare(a.e2e_dir)
    sys.stdout = proto
    print(json.dumps({"ready": True}), flush=True)
    serve(h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
