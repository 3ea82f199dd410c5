#!/usr/bin/env bash
# make demo: the deployment of vLLM PR #53499, offline, from a bundled layer-spec file.
set -uo pipefail
KVPLAN="${1:-kvplan}"
SPECS="$(dirname "$0")/pr53499-qwen35-27b-dflash.specs.json"
export COLUMNS="${COLUMNS:-100}"
echo "== 1. vLLM 0.33.0 as released: Qwen3.5-27B (nvfp4 KV) + 5-layer bf16 DFlash draft, 262k context, 32 GiB"
"$KVPLAN" check --specs "$SPECS" --vllm 0.33.0
echo "   exit code $? (1 = does not fit)"
echo
echo "== 2. The same deployment with the PR #53499 fix (scale block size before padding)"
"$KVPLAN" check --specs "$SPECS" --vllm 0.33.0 --with-fix
echo "   exit code $? (0 = fits)"
echo
echo "== 3. Released vLLM, max_num_batched_tokens 4096 (the draft's sliding window holds less in flight)"
"$KVPLAN" check --specs "$SPECS" --vllm 0.33.0 --max-num-batched-tokens 4096 --format markdown
echo "   exit code $?"
exit 0
