"""Tiny, randomly initialised models built and saved by tests, loaded back through the users' code path."""

from __future__ import annotations

import json
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
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
    )


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
    vision = CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=16,
        projection_dim=16,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
    )
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=16,
        vision_feature_select_strategy="full",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    )
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


def write_byte_clip_tokenizer(folder: Path) -> None:
    """vocab.json with start/end tokens and the 256 byte characters, plain and with </w>; no merges."""
    from tokenizers import pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in alphabet:
        vocab[ch] = len(vocab)
    for ch in alphabet:
        vocab[ch + "</w>"] = len(vocab)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")


def byte_clip_tokenizer(folder: Path):
    """The byte-level CLIP tokenizer, written to ``folder`` and loaded back."""
    from transformers import CLIPTokenizer

    write_byte_clip_tokenizer(folder)
    return CLIPTokenizer.from_pretrained(folder, model_max_length=77)


def tiny_clip_text_config(vocab_size: int, hidden_size: int = 32, layers: int = 2, heads: int = 4, **extra):
    from transformers import CLIPTextConfig

    return CLIPTextConfig(
        hidden_size=hidden_size,
        intermediate_size=hidden_size + 5,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        vocab_size=vocab_size,
        max_position_embeddings=77,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
        **extra,
    )


def save_tiny_clip(folder: Path) -> Path:
    """A random CLIP (tiny text and vision towers) with the byte-level tokenizer and its processor."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPVisionConfig

    torch.manual_seed(0)
    tokenizer = byte_clip_tokenizer(folder / "_tokenizer")
    text = tiny_clip_text_config(len(tokenizer), hidden_size=16, layers=1, heads=2)
    vision = CLIPVisionConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8
    )
    config = CLIPConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=8)
    CLIPModel(config).save_pretrained(folder)
    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=processor, tokenizer=tokenizer).save_pretrained(folder)
    return folder


def sd_pipeline(kind: str, **parts):
    """An inpainting ("inpaint"), InstructPix2Pix ("ip2p") or text-to-image ("t2i") pipeline from its vae, text
    encoder, tokenizer and UNet, with the scheduler each uses and no safety checker."""
    from diffusers import (
        DDIMScheduler,
        EulerAncestralDiscreteScheduler,
        StableDiffusionInpaintPipeline,
        StableDiffusionInstructPix2PixPipeline,
        StableDiffusionPipeline,
    )

    common = dict(safety_checker=None, feature_extractor=None, requires_safety_checker=False, **parts)
    if kind == "inpaint":
        return StableDiffusionInpaintPipeline(scheduler=DDIMScheduler(steps_offset=1), **common)
    if kind == "t2i":
        return StableDiffusionPipeline(scheduler=DDIMScheduler(steps_offset=1), **common)
    return StableDiffusionInstructPix2PixPipeline(scheduler=EulerAncestralDiscreteScheduler(), **common)


def save_tiny_sd(folder: Path, kind: str) -> Path:
    """A tiny random Stable Diffusion pipeline: ``kind`` is "inpaint" (UNet in_channels 9), "ip2p" (8) or "t2i" (4)."""
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextModel

    torch.manual_seed(0)
    tokenizer = byte_clip_tokenizer(folder / "_tokenizer")
    text_encoder = CLIPTextModel(tiny_clip_text_config(len(tokenizer), projection_dim=32))
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64),
        layers_per_block=1,
        sample_size=8,
        in_channels={"inpaint": 9, "ip2p": 8, "t2i": 4}[kind],
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
    )
    vae = AutoencoderKL(
        block_out_channels=[32, 64],
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
    )
    pipe = sd_pipeline(kind, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet)
    pipe.save_pretrained(folder / kind)
    return folder / kind


def build_tiny_sam(checkpoint=None):
    """A ~100k-parameter SAM (the builder registered as model type ``tiny_test``)."""
    from functools import partial

    import torch
    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    img_size, prompt_dim = 128, 32
    sam = Sam(
        image_encoder=ImageEncoderViT(
            depth=2,
            embed_dim=32,
            img_size=img_size,
            mlp_ratio=2,
            norm_layer=partial(torch.nn.LayerNorm, eps=1e-6),
            num_heads=2,
            patch_size=16,
            qkv_bias=True,
            use_rel_pos=True,
            global_attn_indexes=[1],
            window_size=4,
            out_chans=prompt_dim,
        ),
        prompt_encoder=PromptEncoder(
            embed_dim=prompt_dim,
            image_embedding_size=(img_size // 16, img_size // 16),
            input_image_size=(img_size, img_size),
            mask_in_chans=4,
        ),
        mask_decoder=MaskDecoder(
            num_multimask_outputs=3,
            transformer=TwoWayTransformer(depth=2, embedding_dim=prompt_dim, mlp_dim=64, num_heads=2),
            transformer_dim=prompt_dim,
            iou_head_depth=2,
            iou_head_hidden_dim=32,
        ),
    )
    if checkpoint is not None:
        sam.load_state_dict(torch.load(checkpoint, map_location="cpu"))
    return sam.eval()


def register_tiny_sam() -> str:
    """Register the tiny builder with segment-anything in this process (a Dask worker runs this too)."""
    from segment_anything import sam_model_registry

    sam_model_registry["tiny_test"] = build_tiny_sam
    return "tiny_test"


def save_tiny_sam(folder: Path) -> tuple[str, Path]:
    """A ~100k-parameter SAM registered as an extra builder; returns (model type, checkpoint path)."""
    import torch

    register_tiny_sam()
    torch.manual_seed(0)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sam_tiny.pth"
    torch.save(build_tiny_sam().state_dict(), path)
    return "tiny_test", path


def save_tiny_dpt(folder: Path) -> Path:
    """A tiny random DPT depth-estimation model with its image processor, loadable by transformers'
    ``pipeline("depth-estimation", model=folder)``: the real code path, no download."""
    from transformers import DPTConfig, DPTForDepthEstimation, DPTImageProcessor, set_seed

    set_seed(0)
    config = DPTConfig(
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=37,
        image_size=32,
        patch_size=8,
        neck_hidden_sizes=[8, 16, 32, 32],
        fusion_hidden_size=16,
        backbone_out_indices=[0, 1, 2, 3],
        reassemble_factors=[4, 2, 1, 0.5],
        is_hybrid=False,
    )
    DPTForDepthEstimation(config).save_pretrained(folder)
    DPTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def save_tiny_dinov2(folder: Path) -> Path:
    """A tiny random DINOv2 with its image processor (``AutoModel`` / ``AutoImageProcessor`` load it): the
    ``transformers-embedding`` backend's real code path, no download."""
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model, set_seed

    set_seed(0)
    config = Dinov2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, image_size=32, patch_size=8
    )
    Dinov2Model(config).save_pretrained(folder)
    BitImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder
