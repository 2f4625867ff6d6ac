"""Grounders: caption with boxes, the main subject and its box, and attribute answers for one image.

- ``annotations`` (embedded default): everything from the source's COCO-style annotation file.
- ``openai-vlm``: any OpenAI-compatible chat endpoint that takes images (a Qwen-VL or Shikra served
  locally, a hosted model), asked with the paper's prompts (``prompts/grounding``, ``prompts/idea/extract_subject``).
- ``transformers``: a local vision-language model folder (``AutoProcessor`` + ``AutoModelForImageTextToText``),
  loaded lazily, never downloaded.
Boxes in replies are parsed once here (``logic.boxes``) into pixel xyxy.
"""

from __future__ import annotations

import io
import re
from typing import Any, Literal

from PIL import Image
from pydantic import Field

from perceptforge.backends.chat import ChatClient, EndpointSettings
from perceptforge.backends.devices import release
from perceptforge.backends.hub import locate
from perceptforge.backends.registry import BackendSettings, Runtime, register
from perceptforge.data.schema import Box, Grounding, Region
from perceptforge.errors import PerceptforgeError
from perceptforge.logic.boxes import BoxFormat, parse_boxes, parse_subject_reply
from perceptforge.logic.templates import Template
from perceptforge.prompts.library import load_prompt
from perceptforge.store.sources import SourceEntry, grounding_from_entry

# Attribute answers that carry boxes become regions with these roles.
_REGION_ROLE = {"held_object": "object", "content": "object", "facial_expression": "face"}
# Attributes with a prompt of their own; others go through grounding/attribute.
_OWN_PROMPT = {
    "behaviour": "grounding/behaviour",
    "background": "grounding/background",
    "held_object": "grounding/held_object",
    "emotion": "grounding/emotion",
    "facial_expression": "grounding/facial_expression",
}


class AnnotationsSettings(BackendSettings):
    backend: Literal["annotations"]
    file: str = Field("annotations.json", description="COCO-style annotation file inside the source directory")


class OpenAIVLMSettings(EndpointSettings, BackendSettings):
    backend: Literal["openai-vlm"]
    box_format: Literal["auto", "norm", "grid1000", "pixel"] = "auto"


class TransformersSettings(BackendSettings):
    backend: Literal["transformers"]
    model_path: str = Field(
        description="an image-text-to-text model: local folder, or hub id at a revision (org/name@<commit>)",
        json_schema_extra={"model": "transformers"},
    )
    max_new_tokens: int = Field(256, gt=0)


@register("grounder", "annotations", AnnotationsSettings)
class AnnotationsGrounder:
    name, model_id = "annotations", ""

    @classmethod
    def from_settings(cls, settings: AnnotationsSettings, runtime: Runtime) -> AnnotationsGrounder:
        return cls()

    def load(self) -> AnnotationsGrounder:
        return self

    def ground(self, image: Image.Image, entry: SourceEntry, templates: list[Template]) -> Grounding:
        return grounding_from_entry(entry)


class PromptingGrounder:
    """The paper's grounding dialogue over any ``ask(image, text) -> reply`` model."""

    name = "prompting"
    model_id = ""
    box_format: BoxFormat = "auto"

    def ask(self, image: Image.Image, text: str) -> str:
        raise NotImplementedError

    def detect(self, image: Image.Image, objects: str) -> list[Box]:
        """Every ``objects`` (a plural noun) the model boxes in the image: the grounder as an open-vocabulary
        detector (BLINK-style Counting on photos without boxes). Boxes it repeats are counted once."""
        w, h = image.size
        found: list[Box] = []
        for parsed in parse_boxes(
            self.ask(image, load_prompt("grounding/detect").render(objects=objects)), w, h, self.box_format
        )[0]:
            if parsed.box not in found:
                found.append(parsed.box)
        return found

    def ground(self, image: Image.Image, entry: SourceEntry, templates: list[Template]) -> Grounding:
        w, h = image.size
        caption = self.ask(image, load_prompt("grounding/caption").render())
        regions = [
            Region(label=p.phrase or "object", box=p.box, role="other")
            for p in parse_boxes(caption, w, h, self.box_format)[0]
        ]
        subject_text = self.ask(image, load_prompt("idea/extract_subject").render(original_caption=caption))
        try:
            subject, box = parse_subject_reply(subject_text, w, h, self.box_format)
        except ValueError as exc:
            raise PerceptforgeError(f"source {entry.source_id}: {exc}") from None
        attributes: dict[str, str] = {}
        for attr, attr_name in sorted(
            {(t.attribute, t.attribute_name) for t in templates} | {("behaviour", "behaviour"), ("emotion", "emotion")}
        ):
            prompt = load_prompt(_OWN_PROMPT.get(attr, "grounding/attribute"))
            values = {"main_subject": subject, "attribute_name": attr_name}
            reply = self.ask(image, prompt.render(**{k: values[k] for k in prompt.placeholders}))
            boxes, _ = parse_boxes(reply, w, h, self.box_format)
            attributes[attr] = _strip_boxes(reply)
            if attr in _REGION_ROLE and boxes:
                regions.append(Region(label=boxes[0].phrase or attr, box=boxes[0].box, role=_REGION_ROLE[attr]))
        return Grounding(
            source_id=entry.source_id,
            caption=_strip_boxes(caption),
            subject=Region(label=subject, box=box, role="subject"),
            regions=regions,
            attributes=attributes,
            backend=self.name,
            model_id=self.model_id,
        )


def _strip_boxes(text: str) -> str:
    """The reply as prose: box tokens and coordinates removed."""
    text = re.sub(r"<\|box_start\|>.*?<\|box_end\|>|<\|object_ref_(?:start|end)\|>", "", text)
    text = " ".join(re.sub(r"\[[\d.,;\s]+\]", "", text).split())
    return re.sub(r"\s+([.,;:!?])", r"\1", text)


@register("grounder", "openai-vlm", OpenAIVLMSettings)
class OpenAIVLMGrounder(PromptingGrounder):
    name = "openai-vlm"

    @classmethod
    def from_settings(cls, settings: OpenAIVLMSettings, runtime: Runtime) -> OpenAIVLMGrounder:
        return cls(ChatClient.from_endpoint(settings, temperature=0.1, seed=0), settings.box_format)

    def __init__(self, client, box_format: BoxFormat = "auto"):
        self.client, self.box_format, self.model_id = client, box_format, client.model

    def load(self) -> OpenAIVLMGrounder:
        self.client.load()
        return self

    def ask(self, image: Image.Image, text: str) -> str:
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return self.client.complete(text, [buf.getvalue()])


@register("grounder", "transformers", TransformersSettings)
class TransformersGrounder(PromptingGrounder):
    name = "transformers"

    @classmethod
    def from_settings(cls, settings: TransformersSettings, runtime: Runtime) -> TransformersGrounder:
        return cls(settings.model_path, settings.max_new_tokens, runtime.device)

    def __init__(self, model_path: str, max_new_tokens: int = 256, device: str = "cpu", box_format: BoxFormat = "auto"):
        self.model_path, self.max_new_tokens, self.device, self.box_format = (
            model_path,
            max_new_tokens,
            device,
            box_format,
        )
        self.model_id = model_path
        self.processor: Any = None
        self.model: Any = None
        self.generate_kwargs: dict = {}  # extra generate() arguments (e.g. logits processors)

    def load(self) -> TransformersGrounder:
        if self.model is None:
            found = locate(self.model_path, "transformers", what="transformers grounder model folder")
            from transformers import AutoModelForImageTextToText, AutoProcessor

            path, self.model_id = str(found.path), found.label
            self.processor = AutoProcessor.from_pretrained(path, local_files_only=True)
            model = AutoModelForImageTextToText.from_pretrained(path, local_files_only=True)
            self.model = model.to(self.device).eval()  # type: ignore[arg-type]
        return self

    def unload(self) -> None:
        model, self.model, self.processor = self.model, None, None
        release(model)

    def ask(self, image: Image.Image, text: str) -> str:
        import torch

        self.load()
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        prompt = self.processor.apply_chat_template(messages, add_generation_prompt=True)
        inputs = self.processor(images=image, text=prompt, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            out = self.model.generate(
                **inputs, max_new_tokens=self.max_new_tokens, do_sample=False, **self.generate_kwargs
            )
        return self.processor.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
