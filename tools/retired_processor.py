"""Processor files for a multimodal config folder, for tools/confirm_coverage.py --retired (a
development tool, never run by tests). Run it with the Python of the vLLM e2e venv:

    /tmp/kvplan-e2e/oracle/.venv-0.34.0/bin/python tools/retired_processor.py CONFIG_DIR OUT_DIR

vLLM 0.34.0's Transformers backend serves a multimodal architecture (TransformersMultiModal*)
only with the checkpoint's processor: ModelConfig asks it for the modalities while it is built
(models/transformers/multimodal.py MultiModalProcessingInfo._get_supported_modalities). A
config-only folder has none, so OUT_DIR gets CONFIG_DIR's config.json (copied byte for byte)
plus the files `AutoProcessor` reads: the processor class of the model type
(transformers' PROCESSOR_MAPPING_NAMES) built from its sub-processors' class defaults
(image processor / feature extractor / video processor) and a word-level tokenizer holding the
special tokens those processors look up. None of it reaches the KV-cache plan: vLLM reads the
processor for the modalities and the encoder budget, the KV layout from the model's layers.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys

E2E_DIR = os.environ.get("VLLM_E2E_DIR", "/work/shared/vllm-e2e")

# special tokens the processors of these model types look up in their tokenizer
_SPECIALS = ["<unk>", "<pad>", "<s>", "</s>", "<|image|>", "<image>", "<|begin_of_text|>",
             "<|end_of_text|>", "<|eot_id|>", "|SPEAKER|", "|NEWLINE|", "<sound>",
             "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>",
             "<|python_tag|>", "<|finetune_right_pad_id|>", "<|start_header_id|>",
             "<|end_header_id|>", "<|vision_start|>", "<|vision_end|>", "<audio>",
             "<|sound_bos|>", "<|sound_eos|>", "<|audio_bos|>", "<|audio_eos|>", "<0x0A>",
             "<boa>", "<eoa>", "<image_soft_token>"]

# sub-processors transformers' auto tables do not list for a model type: MusicFlamingo's
# checkpoints ship a Whisper feature extractor (the auto table's entry for audioflamingo3, the
# model it extends)
_NOT_IN_AUTO = {("musicflamingo", "feature_extractor"): "WhisperFeatureExtractor"}

_AUTO = {"image_processor": ("image_processing_auto", "IMAGE_PROCESSOR_MAPPING_NAMES"),
         "feature_extractor": ("feature_extraction_auto", "FEATURE_EXTRACTOR_MAPPING_NAMES"),
         "video_processor": ("video_processing_auto", "VIDEO_PROCESSOR_MAPPING_NAMES")}


def main(src: str, dst: str) -> int:
    sys.path.insert(0, E2E_DIR)
    import vllm_e2e  # the harness's fake for the CPU torchvision wheel

    vllm_e2e.patch_torchvision_ops()
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoConfig, PreTrainedTokenizerFast
    from transformers.models.auto import processing_auto

    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    shutil.copyfile(os.path.join(src, "config.json"), os.path.join(dst, "config.json"))
    model_type = AutoConfig.from_pretrained(dst).model_type
    proc_cls = getattr(transformers, processing_auto.PROCESSOR_MAPPING_NAMES[model_type])
    tok = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(_SPECIALS)},
                                     unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<s>", eos_token="</s>")
    fast.add_special_tokens({"additional_special_tokens": _SPECIALS[4:]})
    kwargs: dict = {}
    for attr in proc_cls.get_attributes():
        if attr == "tokenizer":
            kwargs[attr] = fast
            continue
        if (model_type, attr) in _NOT_IN_AUTO:
            kwargs[attr] = getattr(transformers, _NOT_IN_AUTO[model_type, attr])()
            continue
        module, table = _AUTO[attr]
        names = getattr(importlib.import_module(f"transformers.models.auto.{module}"),
                        table)[model_type]
        if isinstance(names, dict):
            names = names.get("torchvision") or names.get("pil")
        name = names if isinstance(names, str) else next(n for n in names if n)
        kwargs[attr] = getattr(transformers, name)()
    proc_cls(**kwargs).save_pretrained(dst)
    print(f"{dst}: {proc_cls.__name__}({', '.join(sorted(kwargs))}) {sorted(os.listdir(dst))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
