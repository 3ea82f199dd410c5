#!/usr/bin/env bash
# make demo: the deployment of vLLM PR #53499, offline, from the real configs in examples/configs.
set -uo pipefail
KVPLAN="${1:-kvplan}"
HERE="$(cd "$(dirname "$0")" && pwd)"
export COLUMNS="${COLUMNS:-100}"
ARGS=("$HERE/configs/Qwen--Qwen3.5-27B/config.json"
      --draft "$HERE/configs/z-lab--Qwen3.8-27B-DFlash2/config.json"
      --kv-cache-dtype nvfp4 --draft-kv-cache-dtype bfloat16 --num-speculative-tokens 7
      --max-model-len 262144 --max-num-batched-tokens 16384 --kv-cache-memory 32GiB
      --gpu A100-80GB --draft-block-size 16 --vllm 0.33.0)
echo "== 1. As reported in vLLM PR #53499: Qwen3.5-27B (nvfp4 KV) + a 5-layer bf16 DFlash draft on"
echo "==    its own 16-token sliding-window block, 262k context, 32 GiB of KV memory, vLLM 0.33.0"
"$KVPLAN" check "${ARGS[@]}" --explain
echo "   exit code $? (1 = does not fit: vLLM refuses to start)"
echo
echo "== 2. The same deployment with the PR #53499 fix (scale the block size before padding)"
"$KVPLAN" check "${ARGS[@]}" --with-fix
echo "   exit code $? (0 = fits)"
echo
echo "== 3. What released vLLM 0.34.0 itself picks (64-token default block, draft on the primary block)"
"$KVPLAN" check "${ARGS[@]:0:${#ARGS[@]}-4}" --gpu A100-80GB --vllm 0.34.0 --format markdown
echo "   exit code $?"
exit 0
