"""Typed profiles: which backend serves each stage, with its settings.

A profile is a YAML file validated once at load. Unknown keys and bad values fail with one line that
names the file and the dotted key. Secrets never live in a profile: an endpoint names the environment
variable that holds its key (``api_key_env``), read only when a client is built.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from perceptforge.errors import InputError, describe_validation_error
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Endpoint(Section):
    base_url: str = Field(description="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    model: str
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the key")
    timeout_s: float = Field(60, gt=0)
    max_retries: int = Field(4, ge=0)
    concurrency: int = Field(4, ge=1, description="requests in flight at once to this endpoint (per process)")

    def api_key(self) -> str:
        # Local servers accept any key; the client library refuses an empty one.
        return os.environ.get(self.api_key_env, "") or "not-needed"


# --- grounding ---------------------------------------------------------------------------------------
class AnnotationsGrounder(Section):
    backend: Literal["annotations"]
    file: str = Field("annotations.json", description="COCO-style annotation file inside the source directory")


class OpenAIVLMGrounder(Endpoint):
    backend: Literal["openai-vlm"]
    box_format: Literal["auto", "norm", "grid1000", "pixel"] = "auto"


class TransformersGrounder(Section):
    backend: Literal["transformers"]
    model_path: str
    max_new_tokens: int = Field(256, gt=0)


# --- segmentation ------------------------------------------------------------------------------------
class GrabCutSegmenter(Section):
    backend: Literal["grabcut"]
    iterations: int = Field(5, ge=1, le=50)
    max_side: int = Field(512, ge=32, description="images are downscaled to this side for GrabCut")


class SamSegmenter(Section):
    backend: Literal["sam"]
    checkpoint: str
    model_type: str = Field("vit_h", description="a key of segment_anything.sam_model_registry")
    mode: Literal["box", "automatic"] = "box"
    pred_iou_thresh: float = Field(0.88, ge=0, le=1)
    stability_score_thresh: float = Field(0.95, ge=0, le=1)
    points_per_side: int = Field(32, ge=1)


# --- editing -----------------------------------------------------------------------------------------
class CompositeInpainter(Section):
    backend: Literal["composite"]
    feather_px: int = Field(7, ge=0, le=64)
    colour_match: bool = True
    batch_size: int = Field(8, ge=1, description="units per edit task: no model to fill, but fewer tasks to orchestrate")


class SDInpainter(Section):
    backend: Literal["sd-inpaint"]
    model: str = Field(description="local folder or model id (already in the local cache)")
    steps: int = Field(50, ge=1)
    guidance_scale: float = Field(7.5, ge=0)
    strength: float = Field(1.0, gt=0, le=1)
    negative_prompt: str = ""
    batch_size: int = Field(4, ge=1)


class InstructPix2PixEditor(Section):
    backend: Literal["instruct-pix2pix"]
    model: str
    steps: int = Field(50, ge=1)
    image_guidance_scale: float = Field(1.5, ge=0)
    guidance_scale: float = Field(7.5, ge=0)
    batch_size: int = Field(4, ge=1)


# --- LLM ---------------------------------------------------------------------------------------------
class TemplateLLM(Section):
    backend: Literal["template"]


class OpenAILLM(Endpoint):
    backend: Literal["openai"]
    temperature: float = Field(0.0, ge=0, le=2)
    seed: int | None = 0
    max_validation_retries: int = Field(2, ge=0)
    response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema", description="json_schema (OpenAI, vLLM) or json_object with a schema (llama.cpp's server)")


class Gates(Section):
    """Quality gates applied before annotators see a pair."""

    min_inside_change: float = Field(12.0, ge=0, description="mean absolute pixel change (0-255) inside the edit region")
    max_outside_change: float = Field(6.0, ge=0, description="mean absolute pixel change outside the edit region")
    min_phash_distance: int = Field(4, ge=0, le=64, description="pairs closer than this (Hamming) are near-duplicates")


class Runner(Section):
    kind: Literal["threads", "dask"] = "threads"
    max_workers: int = Field(2, ge=1)
    dask_address: str | None = None


Grounder = Annotated[Union[AnnotationsGrounder, OpenAIVLMGrounder, TransformersGrounder], Field(discriminator="backend")]
Segmenter = Annotated[Union[GrabCutSegmenter, SamSegmenter], Field(discriminator="backend")]
Inpainter = Annotated[Union[CompositeInpainter, SDInpainter], Field(discriminator="backend")]
LLM = Annotated[Union[TemplateLLM, OpenAILLM], Field(discriminator="backend")]


class Profile(Section):
    name: str
    description: str = ""
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    release_models_between_stages: bool = False
    seed: int = 0
    grounder: Grounder
    segmenter: Segmenter
    inpainter: Inpainter
    editor: InstructPix2PixEditor | None = Field(None, description="None: direct-alteration categories are skipped")
    llm: LLM
    gates: Gates = Gates()
    runner: Runner = Runner()

    def backend_names(self) -> dict[str, str]:
        return {
            "grounder": self.grounder.backend,
            "segmenter": self.segmenter.backend,
            "inpainter": self.inpainter.backend,
            "editor": self.editor.backend if self.editor else "none",
            "llm": self.llm.backend,
        }

    def thread_workers(self) -> int:
        """Threads for the threads runner: enough for every endpoint's allowed requests in flight (each
        client enforces its own limit); model stages take the device's lock, so extra threads cost no memory."""
        endpoints = [s.concurrency for s in (self.grounder, self.llm) if isinstance(s, Endpoint)]
        return max([self.runner.max_workers, *endpoints])


BUNDLED = ("local", "gpu")


def resolve_profile_path(name_or_path: str | os.PathLike) -> Path:
    """A bundled profile name (``local``) or a path to a YAML file."""
    text = str(name_or_path)
    if text in BUNDLED:
        return Path(str(resources.files("perceptforge.configs").joinpath(f"{text}.yaml")))
    return Path(text)


def load_profile(name_or_path: str | os.PathLike) -> Profile:
    path = resolve_profile_path(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(str(path), f"profile not found (bundled profiles: {', '.join(BUNDLED)})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(where, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise InputError(str(path), "a profile is a YAML mapping of settings")
    try:
        return Profile.model_validate(raw)
    except ValidationError as exc:
        raise InputError(str(path), "; ".join(describe_validation_error(exc))) from None
