"""SGLang's pool configurators (model_executor/pool_configurator.py): bytes per token of each
pool and the token counts a byte budget buys. One class per SGLang configurator, same names.

`calculate_pool_sizes(available_bytes, page_size)` and
`calculate_pool_sizes_from_max_tokens(tokens, page_size)` return a `PoolConfig`, or raise
`StartupError` with SGLang's own text.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.sglang.model import AttentionArch, SglangModel
from kvplan.engines.sglang.profiles import SglangProfile
from kvplan.engines.sglang.result import PoolRow, SglangError
from kvplan.engines.sglang.server_args import ResolvedArgs, StartupError
from kvplan.errors import UnsupportedError


@dataclass(frozen=True)
class PoolConfig:
    """pool_configurator.MemoryPoolConfig."""

    max_total_num_tokens: int
    full_max_total_num_tokens: int | None = None
    swa_max_total_num_tokens: int | None = None
    c4_max_total_num_tokens: int = 0
    c128_max_total_num_tokens: int = 0
    c4_state_pool_size: int = 0
    c128_state_pool_size: int = 0


@dataclass(frozen=True)
class Stage:
    """The layers one runner owns (ModelLayerInfo): [start_layer, end_layer)."""

    start_layer: int
    end_layer: int

    def owns(self, layer_id: int) -> bool:
        return self.start_layer <= layer_id < self.end_layer


def _not_enough_memory(profile: SglangProfile) -> StartupError:
    # MemoryPoolConfig.__post_init__ (mem_fraction_static is not set yet on this path)
    return StartupError(SglangError(type="RuntimeError", stage="pool_sizing",
                                    message=profile.messages["not_enough_memory"]))


def _pool_config(profile: SglangProfile, **kw: int | None) -> PoolConfig:
    config = PoolConfig(**kw)  # type: ignore[arg-type]
    if config.max_total_num_tokens <= 0:
        raise _not_enough_memory(profile)
    return config


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def ceil_align(x: int, a: int) -> int:
    return ceil_div(x, a) * a


@dataclass(frozen=True)
class DraftLayers:
    """What the draft adds to the target's pools (KVCacheConfigurator.spec_aux_config)."""

    eagle_num_layers: int = 0  # EAGLE / STANDALONE private draft pool, target geometry
    eagle_swa_num_layers: int = 0
    dflash_cell_size: int = 0  # DFLASH: exact bytes/token of the draft pool


class DefaultPoolConfigurator:
    """DefaultPoolConfigurator: MHA / GQA, MLA (+ rope), DSA indexer, FP4 / MXFP8 KV scales,
    full-attention layers of Mamba hybrids; draft layers on top. coeff = cell_size, bias 0."""

    name = "DefaultPoolConfigurator"

    def __init__(self, model: SglangModel, args: ResolvedArgs, stage: Stage,
                 draft: DraftLayers, profile: SglangProfile) -> None:
        self.profile = profile
        self.model = model
        if model.linear is not None:
            num_layers = sum(1 for i in model.linear.full_attention_layer_ids if stage.owns(i))
        else:
            num_layers = stage.end_layer - stage.start_layer
        self.num_layers = num_layers
        self.target_cell = self._cell(model, args, stage, num_layers)
        self.indexer_cell = self._indexer_cell(model, stage) if model.is_dsa else 0
        cell = self.target_cell
        self.draft_cell = 0
        if draft.eagle_num_layers > 0 and num_layers > 0:
            d = draft.eagle_num_layers
            if model.is_dsa:
                # the draft's latent rows scale with the target's, its indexer keeps every layer
                target_kv = cell - self.indexer_cell
                draft_kv = int(target_kv * d / num_layers)
                draft_indexer = self._indexer_row(model) * d
                self.draft_cell = draft_kv + draft_indexer
            else:
                self.draft_cell = int(cell * d / num_layers)
        if draft.dflash_cell_size > 0:
            # dflash_utils.scale_kv_cell_size_per_token_for_dflash with the draft's exact bytes
            self.draft_cell = draft.dflash_cell_size
        self.cell_size = cell + self.draft_cell
        self.zero_kv_max_tokens = args.max_total_tokens or args.context_len

    def _cell(self, model: SglangModel, args: ResolvedArgs, stage: Stage, num_layers: int) -> int:
        """DefaultPoolConfigurator._compute_cell_size."""
        kv_size = args.kv_element_size
        fp4 = args.kv_cache_torch_dtype == "float4_e2m1fn_x2"
        if model.attention_arch is AttentionArch.MLA:
            if fp4:
                raise UnsupportedError("an FP4 KV cache on an MLA model is not modelled for "
                                       "SGLang")
            cell = mla_kv_cache_dim(model, args, self.profile) * num_layers * kv_size
            if model.is_dsa:
                cell += self._indexer_cell(model, stage)
            return cell
        n = model.num_kv_heads(args.attn_tp_size)
        if fp4:
            return nvfp4_cell_size(n, model.head_dim, model.v_head_dim, num_layers, kv_size, args,
                                   self.profile)
        cell = n * (model.head_dim + model.v_head_dim) * num_layers * kv_size
        if args.kv_cache_dtype_str == "mxfp8":
            cell += (n * (model.head_dim + model.v_head_dim) * num_layers
                     // self.profile.mxfp8_scale_block_size)
        return cell

    def _indexer_row(self, model: SglangModel) -> int:
        """_compute_dsa_indexer_cell_size per layer: fp8 index K + fp32 scale per 128, uint8."""
        d = model.index_head_dim
        return ceil_div(d + d // self.profile.dsa_quant_block_size * 4, 1)

    def _indexer_cell(self, model: SglangModel, stage: Stage) -> int:
        layers = sum(1 for i in model.indexer_layer_ids if stage.owns(i))
        return self._indexer_row(model) * layers

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolConfig:
        tokens = available_bytes // self.cell_size if self.cell_size else self.zero_kv_max_tokens
        return _pool_config(self.profile, max_total_num_tokens=tokens // page_size * page_size)

    def calculate_pool_sizes_from_max_tokens(self, tokens: int, page_size: int) -> PoolConfig:
        return _pool_config(self.profile, max_total_num_tokens=tokens // page_size * page_size)

    def rows(self, config: PoolConfig) -> list[PoolRow]:
        kind = "kv"
        out = [PoolRow(pool=kind, layers=self.num_layers,
                       bytes_per_token=self.target_cell - self.indexer_cell,
                       tokens=config.max_total_num_tokens,
                       note=("MLA latent + rope" if self.model.attention_arch is AttentionArch.MLA
                             else "K + V"))]
        if self.indexer_cell:
            out.append(PoolRow(pool="indexer", layers=len(self.model.indexer_layer_ids),
                               bytes_per_token=self.indexer_cell,
                               tokens=config.max_total_num_tokens,
                               note="DSA index K (fp8 + scales)"))
        if self.draft_cell:
            out.append(PoolRow(pool="draft", layers=0, bytes_per_token=self.draft_cell,
                               tokens=config.max_total_num_tokens,
                               note="speculative draft KV, priced per target token"))
        return out


def mla_kv_cache_dim(model: SglangModel, args: ResolvedArgs, profile: SglangProfile) -> int:
    """kv_cache_configurator.calculate_mla_kv_cache_dim: kv_lora_rank + qk_rope_head_dim; DSA
    with an FP8 cache on the scaled layouts (FlashMLA / fa3, not trtllm or TileLang): fp8
    latent + a 4-byte scale per 128 + the rope part in bf16."""
    dim = model.kv_lora_rank + model.qk_rope_head_dim
    if not model.is_dsa:
        return dim
    prefill, decode = dsa_backends(args)
    if "trtllm" in (prefill, decode) or (prefill == "tilelang" and decode == "tilelang"):
        return dim
    if args.kv_cache_torch_dtype == "float8_e4m3fn":
        block = profile.dsa_quant_block_size
        return (model.kv_lora_rank + model.kv_lora_rank // block * 4
                + model.qk_rope_head_dim * profile.dsa_rope_storage_bytes)
    return dim


def dsa_backends(args: ResolvedArgs) -> tuple[str, str]:
    """overrides._dsa_split_backend_resolution (CUDA, no HiSparse, no sinks): FP8 → trtllm on
    Blackwell, flashmla_kv on Hopper; bf16 → flashmla_sparse prefill, trtllm / fa3 decode."""
    major = args.platform.major
    if args.kv_cache_dtype == "fp8_e4m3":
        default = "trtllm" if major >= 10 else "flashmla_kv"
        return default, default
    return "flashmla_sparse", "trtllm" if major >= 10 else "fa3"


def nvfp4_cell_size(n: int, head_dim: int, v_head_dim: int, num_layers: int, kv_size: int,
                    args: ResolvedArgs, profile: SglangProfile) -> int:
    """NVFP4KVCacheMethod.compute_cell_size on SM100 trtllm_mha (native NVFP4 access, no
    dequant workspace): packed FP4 K+V + one layout of per-16 FP8 block scales."""
    if args.kv_cache_dtype != "nvfp4" or args.attention_backend != "trtllm_mha" or (
            args.platform.value != "sm100") or head_dim != v_head_dim:
        raise UnsupportedError("an FP4 KV cache is modelled for SGLang only as nvfp4 on B200 "
                               "with the trtllm_mha backend")
    fp4 = n * (head_dim // 2) * num_layers * 2 * kv_size
    scales = n * (head_dim // profile.fp4_scale_block_size) * num_layers * 2 * kv_size
    return fp4 + scales


class HybridSWAPoolConfigurator:
    """HybridSWAPoolConfigurator: full pool + SWA pool (swa_full_tokens_ratio × full tokens)."""

    name = "HybridSWAPoolConfigurator"

    def __init__(self, model: SglangModel, args: ResolvedArgs, stage: Stage,
                 draft: DraftLayers, profile: SglangProfile) -> None:
        if model.attention_arch is not AttentionArch.MHA:
            raise UnsupportedError("hybrid sliding-window MLA is not modelled for SGLang")
        if args.kv_cache_torch_dtype == "float4_e2m1fn_x2":
            raise UnsupportedError("an FP4 KV cache on a hybrid sliding-window model is not "
                                   "modelled for SGLang")
        self.profile = profile
        kv_size = args.kv_element_size
        tp = args.attn_tp_size
        self.full_layers_num = sum(1 for i in model.full_layer_ids if stage.owns(i))
        self.swa_layers_num = sum(1 for i in model.swa_layer_ids if stage.owns(i))
        self.swa_full_tokens_ratio = args.swa_full_tokens_ratio
        self.sliding_window_size = model.sliding_window_size
        self.page_size = args.page_size
        n_full, n_swa = model.num_kv_heads(tp), model.swa_num_kv_heads(tp)
        self.full_per_token = n_full * (model.head_dim + model.v_head_dim) * kv_size
        self.swa_per_token = n_swa * (model.swa_head_dim + model.swa_v_head_dim) * kv_size
        if args.kv_cache_dtype_str == "mxfp8":
            block = profile.mxfp8_scale_block_size
            self.full_per_token += n_full * (model.head_dim + model.v_head_dim) // block
            self.swa_per_token += n_swa * (model.swa_head_dim + model.swa_v_head_dim) // block
        self.draft_full_layers_num = 0
        self.draft_swa_layers_num = 0
        if draft.eagle_num_layers > 0:
            self.draft_swa_layers_num = min(max(draft.eagle_swa_num_layers, 0),
                                            draft.eagle_num_layers)
            self.draft_full_layers_num = draft.eagle_num_layers - self.draft_swa_layers_num
        self.draft_cell_size = draft.dflash_cell_size
        self._recompute_cell_size()

    def _full_cell_bytes(self) -> int:
        return self.full_per_token * (self.full_layers_num + self.draft_full_layers_num)

    def _swa_cell_bytes(self) -> int:
        return self.swa_per_token * (self.swa_layers_num + self.draft_swa_layers_num)

    def _recompute_cell_size(self) -> None:
        """HybridSWAPoolConfigurator._recompute_cell_size (the same float expression)."""
        if self.full_layers_num == 0:
            self.cell_size: float = (self.swa_per_token * self.swa_layers_num
                                     + self.full_per_token * self.draft_full_layers_num
                                     + self.swa_per_token * self.draft_swa_layers_num
                                     + self.swa_per_token * 0 + self.draft_cell_size)
        else:
            self.cell_size = (self._full_cell_bytes() + self.swa_per_token * 0
                              + self.swa_full_tokens_ratio * self._swa_cell_bytes()
                              + self.draft_cell_size)

    def validate_swa_pool_size(self, swa_tokens: int) -> None:
        """MemoryPoolConfigurator.validate_swa_pool_size."""
        window = self.sliding_window_size
        if window is None:
            return
        if window + self.page_size >= swa_tokens:
            raise StartupError(SglangError(
                type="ValueError", stage="pool_sizing",
                message=self.profile.messages["swa_pool_too_small"].format(
                    swa_tokens=swa_tokens, window=window, page_size=self.page_size)))

    def _solve_pool_sizes(self, max_total_num_tokens: int, page_size: int) -> PoolConfig:
        if self.full_layers_num == 0:
            swa = max_total_num_tokens // page_size * page_size
            return _pool_config(self.profile, max_total_num_tokens=swa,
                                full_max_total_num_tokens=0, swa_max_total_num_tokens=swa)
        full = max_total_num_tokens // page_size * page_size
        swa = int(full * self.swa_full_tokens_ratio) // page_size * page_size
        self.validate_swa_pool_size(swa)
        return _pool_config(self.profile, max_total_num_tokens=full,
                            full_max_total_num_tokens=full, swa_max_total_num_tokens=swa)

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolConfig:
        return self._solve_pool_sizes(int(available_bytes // self.cell_size), page_size)

    def calculate_pool_sizes_from_max_tokens(self, tokens: int, page_size: int) -> PoolConfig:
        return self._solve_pool_sizes(tokens, page_size)

    def rows(self, config: PoolConfig) -> list[PoolRow]:
        out = [PoolRow(pool="full", layers=self.full_layers_num,
                       bytes_per_token=self.full_per_token * self.full_layers_num,
                       tokens=config.full_max_total_num_tokens, note="full-attention K + V"),
               PoolRow(pool="swa", layers=self.swa_layers_num,
                       bytes_per_token=self.swa_per_token * self.swa_layers_num,
                       tokens=config.swa_max_total_num_tokens,
                       note=f"sliding window {self.sliding_window_size}")]
        draft = (self.full_per_token * self.draft_full_layers_num
                 + self.swa_per_token * self.draft_swa_layers_num + self.draft_cell_size)
        if draft:
            out.append(PoolRow(pool="draft", layers=self.draft_full_layers_num
                               + self.draft_swa_layers_num, bytes_per_token=draft,
                               tokens=config.full_max_total_num_tokens,
                               note="speculative draft KV"))
        return out


def swa_request_cap(args: ResolvedArgs, window: int, profile: SglangProfile) -> int:
    """pool_configurator.compute_swa_request_cap (no speculative decoding, no PD): the SWA slots
    the scheduler holds live at max_running_requests."""
    eviction = max(1, profile.swa_eviction_interval)
    page = args.page_size
    per_request = window + eviction * 1 + page + page
    assert args.max_running_requests is not None
    num_reqs = max(1, args.max_running_requests // args.attn_dp_size)
    chunks_in_flight = 1 if args.disable_overlap_schedule else 2
    return per_request * num_reqs + chunks_in_flight * args.chunked_prefill_size + page


class SWARequestCapPoolConfigurator(HybridSWAPoolConfigurator):
    """SWARequestCapPoolConfigurator: without the radix cache and with --max-running-requests,
    the SWA pool is sized from the request cap; the rest of the budget goes to the full pool."""

    name = "SWARequestCapPoolConfigurator"

    def __init__(self, model: SglangModel, args: ResolvedArgs, stage: Stage,
                 draft: DraftLayers, profile: SglangProfile) -> None:
        super().__init__(model, args, stage, draft, profile)
        if args.speculative_algorithm is not None:
            raise UnsupportedError("the SWA request cap with speculative decoding is not "
                                   "modelled for SGLang")
        assert model.sliding_window_size is not None
        self.swa_cap = swa_request_cap(args, model.sliding_window_size, profile)

    @staticmethod
    def is_applicable(model: SglangModel, args: ResolvedArgs, stage: Stage) -> bool:
        if args.max_running_requests is None or not args.disable_radix_cache:
            return False
        if args.chunked_prefill_size is None or args.chunked_prefill_size <= 0:
            return False
        if model.sliding_window_size is None:
            return False
        return any(stage.owns(i) for i in model.full_layer_ids)

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolConfig:
        swa_tokens = ceil_align(self.swa_cap, page_size)
        fixed_swa_bytes = swa_tokens * self._swa_cell_bytes()
        full_cell = self._full_cell_bytes() + self.draft_cell_size
        full_tokens = (int((available_bytes - fixed_swa_bytes) // full_cell) // page_size
                       ) * page_size
        if full_tokens <= 0:
            raise StartupError(SglangError(
                type="RuntimeError", stage="pool_sizing",
                message=self.profile.messages["swa_cap_no_room"].format(
                    swa_tokens=swa_tokens, swa_gib=fixed_swa_bytes / (1 << 30),
                    available_gib=available_bytes / (1 << 30))))
        return _pool_config(self.profile, max_total_num_tokens=full_tokens,
                            full_max_total_num_tokens=full_tokens,
                            swa_max_total_num_tokens=swa_tokens)

    def calculate_pool_sizes_from_max_tokens(self, tokens: int, page_size: int) -> PoolConfig:
        swa_tokens = ceil_align(self.swa_cap, page_size)
        full = tokens // page_size * page_size
        return _pool_config(self.profile, max_total_num_tokens=full,
                            full_max_total_num_tokens=full,
                            swa_max_total_num_tokens=min(swa_tokens, tokens))

