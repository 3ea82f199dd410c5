import json
import os
import random
import sys

os.environ["VLLM_TARGET_DEVICE"]="cpu"
import inspect

import vllm
from vllm.model_executor.layers.attention import attention as A
from vllm.v1.attention.backend import MultipleOf

sizesets = [[MultipleOf(16)], [16, 32, 64], [64], [128], [32, 64],
            [16, 32, 64, 128, 256, 512, 1024], [MultipleOf(32)], [MultipleOf(64)]]
out = []
rng = random.Random(1)
sig = inspect.signature(A._largest_kernel_block_within)
for _ in range(3000):
    sizes = rng.choice(sizesets)
    per_tok = rng.choice([1152, 2048, 4096, 1024, 576, 288, 8192])
    block = rng.choice([16, 32, 64, 128, 528, 1040, 2784, 2816, 2912, 2944, 8832])
    class B:
        @staticmethod
        def get_supported_kernel_block_sizes(spec=None, sizes=sizes):
            return sizes
    budget = per_tok * block
    kw = {}
    if "divisor_of" in sig.parameters:
        kw["divisor_of"] = block
    if "kv_cache_spec" in sig.parameters:
        kw["kv_cache_spec"] = None
    got = A._largest_kernel_block_within(B, per_tok, budget, block, **kw)
    out.append({"sizes": [s.base if isinstance(s, MultipleOf) else s for s in sizes],
                "multiple_of": [isinstance(s, MultipleOf) for s in sizes], "per_tok": per_tok,
                "block": block, "result": got})
json.dump({"version": vllm.__version__, "rows": out}, sys.stdout)
