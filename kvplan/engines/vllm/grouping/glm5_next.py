"""vLLM 0.31's GLM-5.3 grouping (kv_cache_utils._get_kv_cache_groups_glm5_next)."""

from __future__ import annotations

from kvplan.engines.vllm.grouping.merge import (
    KVCacheGroup,
    Specs,
    make_group,
    uniform_type_specs,
)
from kvplan.engines.vllm.specs import (
    KpoolTailSpec,
    MambaSpec,
    MLAAttentionSpec,
)
from kvplan.units import cdiv


def glm5_next_groups(specs: Specs, strict: bool = True) -> list[KVCacheGroup] | None:
    """vLLM 0.31: kv_cache_utils._get_kv_cache_groups_glm5_next (one pipeline stage).

    Mamba next to plain MLA layers, some of which hold compressed index pages
    (tokens_per_state > 1): all MLA in one uniform-type group, the kpool tails padded to the
    index page in a second, the Mamba states padded to the MLA page and dealt round-robin
    into cdiv(#mamba, #mla) groups.
    """
    mamba = {n: s for n, s in specs.items() if isinstance(s, MambaSpec)}
    tails = {n: s for n, s in specs.items() if isinstance(s, KpoolTailSpec)}
    attn = {n: s for n, s in specs.items() if not isinstance(s, MambaSpec | KpoolTailSpec)}
    if not mamba or not all(type(s) is MLAAttentionSpec for s in attn.values()):
        return None
    mla = {n: s for n, s in attn.items() if isinstance(s, MLAAttentionSpec)}
    idx_pages = {s.page_size_bytes for s in mla.values() if s.tokens_per_state > 1}
    if not idx_pages:
        return None
    if any(s.page_size_padded is not None for s in mla.values()) or len(idx_pages) != 1:
        raise AssertionError()  # vLLM: bare asserts
    mla_names = [n for n, s in mla.items() if s.tokens_per_state == 1]
    mla_pages = {mla[n].page_size_bytes for n in mla_names}
    if len(mla_pages) != 1:
        raise AssertionError()
    mla_page = mla_pages.pop()
    uniform = uniform_type_specs(attn)
    if uniform is None:
        raise AssertionError()
    groups = [KVCacheGroup(tuple(attn), uniform)]
    if tails:
        idx_page = next(iter(idx_pages))
        tail_uniform = uniform_type_specs({n: s.with_changes(page_size_padded=idx_page)
                                           for n, s in tails.items()})
        if tail_uniform is None:
            raise AssertionError()
        groups.append(KVCacheGroup(tuple(tails), tail_uniform))
    first = next(iter(mamba.values()))
    if any(s != first for s in mamba.values()):
        raise AssertionError()
    if first.unpadded_page_size_bytes > mla_page:
        raise ValueError(
            f"the mamba state page ({first.unpadded_page_size_bytes} bytes) does not fit the MLA "
            f"page ({mla_page} bytes); increase tensor parallelism or use a wider KV cache dtype")
    padded = {n: first.with_changes(page_size_padded=mla_page) for n in mamba}
    num_groups = cdiv(len(mamba), len(mla_names))
    dealt: list[list[str]] = [[] for _ in range(num_groups)]
    for i, name in enumerate(mamba):
        dealt[i % num_groups].append(name)
    return groups + [make_group(padded, names, strict) for names in dealt]
