"""SGLang's DeepSeek-V4 pools (pool_configurator.DSV4PoolConfigurator), ratio mode: the paged
SWA pool (swa_full_tokens_ratio × full tokens), the c4 / c128 compressed KV pools and their
indexer, the c4 compress state priced per SWA slot, the c128 compress state as fixed bytes per
request slot. Modelled: the default V4 KV layout (SGLANG_DSV4_KV_LAYOUT=v4), no unified KV, no
trtllm backend, no speculative decoding, no HiSparse, no encoder replay."""

from __future__ import annotations

from kvplan.engines.sglang.model import SglangModel
from kvplan.engines.sglang.pools import PoolConfig, Stage, _pool_config, ceil_div
from kvplan.engines.sglang.profiles import SglangProfile
from kvplan.engines.sglang.result import PoolRow, SglangError
from kvplan.engines.sglang.server_args import ResolvedArgs, StartupError

# kernels/ops/attention/dsv4/kv_layout.KVLayout.V4: 448 fp8 nope + 64 bf16 rope + 8 scale bytes
V4_BYTES_PER_TOKEN = 576 + 8
V4_PAGE_ALIGN = 576
COMPRESS_STATE_BYTES = 4  # envs.SGLANG_DSV4_COMPRESS_STATE_DTYPE default float32
INDEX_QUANT_BLOCK = 128


def v4_page_bytes(page_size: int) -> int:
    """KVLayout.page_bytes: the page stride padded to the reader's TMA row stride."""
    raw = page_size * V4_BYTES_PER_TOKEN
    return -(-raw // V4_PAGE_ALIGN) * V4_PAGE_ALIGN


def ring_size(compress_ratio: int) -> int:
    """deepseek_v4_memory_pool.get_compress_state_ring_size without speculative decoding."""
    return 8 if compress_ratio == 4 else 128


class DSV4PoolConfigurator:
    name = "DSV4PoolConfigurator"

    def __init__(self, model: SglangModel, args: ResolvedArgs, stage: Stage,
                 profile: SglangProfile) -> None:
        facts = model.dsv4
        assert facts is not None
        self.profile = profile
        self.page_size = args.page_size
        self.attn_head_dim = facts.head_dim
        self.index_head_dim = facts.index_head_dim
        # get_dsv4_indexer_bytes_per_token (fp8: values + a 4-byte scale per 128)
        self.indexer_bytes_per_token = (facts.index_head_dim
                                        + facts.index_head_dim // INDEX_QUANT_BLOCK * 4)
        ratios = facts.compress_ratios[stage.start_layer:stage.end_layer]
        # deepseek_v4_memory_pool.collect_sources_by_ratio: every layer of ratio 4 / 128
        self.owners = {r: [stage.start_layer + i for i, x in enumerate(ratios) if x == r]
                       for r in (4, 128)}
        self.owners = {r: ids for r, ids in self.owners.items() if ids}
        self.num_layers_total = len(ratios)
        self.swa_ratio = args.swa_full_tokens_ratio
        self.sliding_window_size = model.sliding_window_size
        assert args.max_running_requests is not None
        self.max_running_requests_per_worker = max(1, args.max_running_requests
                                                   // args.attn_dp_size)
        self.bytes_per_swa_token = self._bytes_per_swa_token()
        self.bytes_per_full_token = self._bytes_per_full_token()

    def num_layers(self, ratio: int) -> int:
        return len(self.owners.get(ratio, ()))

    def _paged_kv_bytes_per_token(self, compress_ratio: int = 0) -> float:
        """_get_paged_kv_bytes_per_token: the V4 page of page_size (/ ratio) tokens, per token."""
        page = self.page_size // compress_ratio if compress_ratio else self.page_size
        return v4_page_bytes(page) / page

    def _bytes_per_swa_token(self) -> float:
        """_get_bytes_per_swa_token: the paged SWA row on every layer, plus the c4 compress
        state (kv + score, and the indexer's) of ring_size(4) rows per SWA page."""
        c4_state = 2 * 2 * self.attn_head_dim * COMPRESS_STATE_BYTES
        c4_indexer_state = 2 * 2 * self.index_head_dim * COMPRESS_STATE_BYTES
        c4_state_ratio = ring_size(4) / self.page_size if 4 in self.owners else 0 / self.page_size
        return (self._paged_kv_bytes_per_token() * self.num_layers_total
                + c4_state_ratio * (c4_state + c4_indexer_state) * self.num_layers(4))

    def _compressed_bytes_per_full_token(self, ratio: int) -> float:
        if ratio == 4:
            return (1 / 4 * self._paged_kv_bytes_per_token(4)
                    + 1 / 4 * self.indexer_bytes_per_token)
        return 1 / 128 * self._paged_kv_bytes_per_token(128)

    def _bytes_per_full_token(self) -> float:
        return self.swa_ratio * self.bytes_per_swa_token + sum(
            self._compressed_bytes_per_full_token(r) * len(ids) for r, ids in self.owners.items())

    def _c128_state_fixed_bytes(self, max_running_requests: int) -> int:
        """_get_c128_state_fixed_bytes: (slots × ring + ring + 1) rows, padded to 128."""
        n = self.num_layers(128)
        if n == 0:
            return 0
        slots = max_running_requests + 1
        ring = ring_size(128)
        rows = ceil_div(slots * ring + ring + 1, 128) * 128
        return rows * 2 * self.attn_head_dim * COMPRESS_STATE_BYTES * n

    def _sizes(self, full_token: int, page_size: int) -> PoolConfig:
        """_compute_dsv4_sizes (ratio mode) + validate_swa_pool_size."""
        full_token = full_token // page_size * page_size
        swa = int(full_token * self.swa_ratio) // page_size * page_size
        window = self.sliding_window_size
        if window is not None and window + page_size >= swa:
            raise StartupError(SglangError(
                type="ValueError", stage="pool_sizing",
                message=self.profile.messages["swa_pool_too_small"].format(
                    swa_tokens=swa, window=window, page_size=page_size)))
        return _pool_config(
            self.profile, max_total_num_tokens=full_token, full_max_total_num_tokens=full_token,
            swa_max_total_num_tokens=swa, c4_max_total_num_tokens=full_token // 4,
            c128_max_total_num_tokens=full_token // 128,
            c4_state_pool_size=swa // page_size * ring_size(4) if 4 in self.owners else 0,
            c128_state_pool_size=0)

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolConfig:
        if page_size % 128:
            raise StartupError(SglangError(
                type="AssertionError", stage="pool_sizing",
                message="page_size must be multiple of 128 for compressed attention"))
        self.fixed_bytes = self._c128_state_fixed_bytes(self.max_running_requests_per_worker)
        available = max(available_bytes - self.fixed_bytes, 0)
        full_token = int(available / self.bytes_per_full_token)
        full_token = full_token // page_size * page_size
        return self._sizes(full_token, page_size)

    def calculate_pool_sizes_from_max_tokens(self, tokens: int, page_size: int) -> PoolConfig:
        return self._sizes(tokens, page_size)

    def finalize(self, config: PoolConfig, max_running_requests: int) -> PoolConfig:
        """finalize_with_max_running_requests: the c128 state pool, one ring per request slot."""
        from dataclasses import replace

        return replace(config, c128_state_pool_size=(max_running_requests + 1)
                       * ring_size(128) if 128 in self.owners else 0)

    @property
    def cell_size(self) -> float:
        return self.bytes_per_full_token

    def rows(self, config: PoolConfig) -> list[PoolRow]:
        out = [PoolRow(pool="swa", layers=self.num_layers_total,
                       bytes_per_token=self.bytes_per_swa_token,
                       tokens=config.swa_max_total_num_tokens,
                       note="paged SWA rows + c4 compress state")]
        for r in self.owners:
            out.append(PoolRow(pool=f"c{r}", layers=self.num_layers(r),
                               bytes_per_token=self._compressed_bytes_per_full_token(r)
                               * self.num_layers(r),
                               tokens=config.c4_max_total_num_tokens if r == 4
                               else config.c128_max_total_num_tokens,
                               note="per full token" + (" (with indexer)" if r == 4 else "")))
        if 128 in self.owners:
            out.append(PoolRow(pool="c128_state", layers=self.num_layers(128),
                               bytes_per_request=2 * self.attn_head_dim * COMPRESS_STATE_BYTES
                               * ring_size(128) * self.num_layers(128),
                               slots=config.c128_state_pool_size, note="fp32 ring per request"))
        return out
