import json
import os
import random
import sys

os.environ["VLLM_TARGET_DEVICE"]="cpu"
from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator as C

rng = random.Random(2)
rows = []
for _ in range(2000):
    tp = rng.choice([1, 2, 3, 4, 6, 8])
    kind = rng.choice(["mamba1", "mamba2", "gdn", "short", "linear"])
    try:
        if kind == "mamba1":
            a = dict(intermediate_size=rng.choice([4096, 8192, 16384]),
                     state_size=rng.choice([16, 128]), conv_kernel=rng.choice([2, 4]))
            r = C.mamba1_state_shape(tp_world_size=tp, **a)
        elif kind == "mamba2":
            heads = rng.choice([64, 128, 256])
            hd = rng.choice([64, 128])
            a = dict(intermediate_size=heads * hd, n_groups=rng.choice([1, 2, 8]), num_heads=heads,
                     head_dim=hd, state_size=rng.choice([64, 128, 256]), conv_kernel=4,
                     num_spec=rng.choice([0, 1, 3]))
            r = C.mamba2_state_shape(tp_world_size=tp, **a)
        elif kind == "gdn":
            a = dict(num_k_heads=rng.choice([16, 32]), num_v_heads=rng.choice([32, 48, 64]),
                     head_k_dim=128, head_v_dim=128, conv_kernel_size=4,
                     num_spec=rng.choice([0, 1, 7]))
            r = C.gated_delta_net_state_shape(tp, **a)
        elif kind == "short":
            a = dict(intermediate_size=rng.choice([1024, 2048]), conv_kernel=3, num_spec=rng.choice([0, 2]))
            r = C.short_conv_state_shape(tp_world_size=tp, **a)
        else:
            a = dict(num_heads=rng.choice([32, 64]), head_dim=rng.choice([64, 128]))
            r = C.linear_attention_state_shape(tp_size=tp, **a)
        rows.append({"kind": kind, "tp": tp, "args": a, "shapes": [list(s) for s in r]})
    except Exception as e:
        rows.append({"kind": kind, "tp": tp, "args": a, "error": type(e).__name__})
json.dump(rows, sys.stdout)
