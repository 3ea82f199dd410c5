#!/usr/bin/env bash
# The pure-Python packages tools/sglang_oracle_ext.py needs to import SGLang's model classes (for
# their get_attention_sliding_window_size), which the shared oracle venv lacks. Installed with
# --no-deps into their own folder, appended to sys.path by the oracle: nothing in the venv is
# replaced or shadowed. Idempotent.
set -euo pipefail
VENV_PY="${SGLANG_ORACLE_VENVS:-$HOME/.cache/sglang-oracle}/.venv-0.5.23/bin/python"
EXTRA="${SGLANG_ORACLE_EXTRA:-$HOME/.cache/kvplan-sglang-oracle-extra}"
"$VENV_PY" -m pip install -q --no-deps --target "$EXTRA" \
    einops==0.8.2 openai==3.60.0 distro==1.9.0 jiter==0.19.0 sniffio==1.3.1 \
    partial-json-parser==0.2.1.1.post7
echo "$EXTRA"
