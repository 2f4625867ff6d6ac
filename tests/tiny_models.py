"""Tiny, randomly initialised models built and saved by tests, loaded back through the users' code path."""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}{% endfor %}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def byte_level_tokenizer():
    """A byte-level BPE (no merges) wrapped for transformers, with an <image> token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    for special in ("<s>", "</s>", "<pad>", "<image>"):
        vocab[special] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   extra_special_tokens={"image_token": "<image>"})


def save_tiny_llava(folder: Path) -> Path:
    """A ~60k-parameter LLaVA (tiny CLIP vision tower + tiny Llama) with processor, saved to ``folder``."""
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    torch.manual_seed(0)
    tokenizer = byte_level_tokenizer()
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                              image_size=32, patch_size=16, projection_dim=16)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
                         vision_feature_layer=-1, vision_feature_select_strategy="full")
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=16,
                               vision_feature_select_strategy="full", num_additional_image_tokens=1, chat_template=CHAT_TEMPLATE)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


class ForceText:
    """A LogitsProcessor that makes generate() write ``text`` then stop: random weights, real decoding loop."""

    def __init__(self, tokenizer, text: str):
        self.target = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        self.start = self.last = -1

    def __call__(self, input_ids, scores):
        import torch

        length = input_ids.shape[1]
        if length != self.last + 1:  # a new generate() call
            self.start = length
        self.last = length
        step = min(input_ids.shape[1] - self.start, len(self.target) - 1)
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.target[step]] = 0.0
        return forced
