"""The LLM stage behind one interface: ideas, question texts and distractors for a template.

- ``template`` (embedded default): deterministic; picks the new value among the values the edit backends
  can render (the idea stage passes them) with the unit's seeded generator and fills the template's wording.
- ``openai``: any OpenAI-compatible endpoint with the paper's prompts (``prompts/idea``, ``prompts/questions``);
  the new value is constrained to the renderable values (an enum in the reply's JSON schema).
  Replies are asked as JSON (a JSON-schema response format), validated with pydantic; a malformed reply
  is sent back with the validation error, and after the retries the unit is quarantined with the raw
  text. Replies are cached on disk by (model, prompt hash, text, seed).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, Field, ValidationError, create_model, field_validator

from perceptforge.backends.chat import ChatClient, DiskCache, EndpointSettings
from perceptforge.backends.registry import BackendSettings, Runtime, register
from perceptforge.data.schema import CodisContent, Grounding, Idea, MMERealWorldContent, Rendering
from perceptforge.logic import authored, context
from perceptforge.logic.templates import Template
from perceptforge.prompts.library import Prompt, load_prompt
from perceptforge.settings import state_dir


class LLMReplyError(ValueError):
    """The model's reply could not be validated; carries the raw text for the quarantine."""

    def __init__(self, reason: str, raw: str = ""):
        super().__init__(reason)
        self.raw = raw


# --- embedded default ----------------------------------------------------------------------------------


class TemplateSettings(BackendSettings):
    backend: Literal["template"]


class OpenAIWriterSettings(EndpointSettings, BackendSettings):
    backend: Literal["openai"]
    temperature: float = Field(0.0, ge=0, le=2)
    seed: int | None = 0
    max_validation_retries: int = Field(2, ge=0)
    response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema", description="json_schema (OpenAI, vLLM) or json_object with a schema (llama.cpp's server)"
    )


@register("llm", "template", TemplateSettings)
class TemplateWriter:
    name, model_id = "template", ""

    @classmethod
    def from_settings(cls, settings: TemplateSettings, runtime: Runtime) -> TemplateWriter:
        return cls()

    def load(self) -> TemplateWriter:
        return self

    def idea(
        self, template: Template, grounding: Grounding, choices: list[Rendering], rng: np.random.Generator
    ) -> Idea:
        pick = choices[int(rng.integers(0, len(choices)))]
        subject = context.subject_name(grounding)
        caption = f"{grounding.caption.rstrip('.')}; the {subject}'s {template.attribute_name} is now {pick.value}."
        return Idea(
            category=template.id,
            subject=subject,
            attribute=template.attribute,
            old=context.original_value(template, grounding),
            new=pick.value,
            new_caption=caption,
            high_level_value=pick.high,
            rendering=pick,
        )

    def yes_no(self, template: Template, ctx: dict, level: str, high: str) -> str:
        wording = template.writer.yes_no_low if level == "low" else template.writer.yes_no_high
        return wording.format(subject=ctx["main_subject"], value=ctx["new_value"], high=high)

    def mcq_question(self, template: Template, ctx: dict) -> str:
        return template.writer.mcq.format(subject=ctx["main_subject"], value="", high="")

    def distractors(self, template: Template, ctx: dict, rng: np.random.Generator) -> list[str]:
        """Three other values of the same attribute, from the template's list."""
        # and never a value a careful annotator could also call the new one (an oil painting for a watercolour)
        taken = {ctx["new_value"].lower(), ctx["original_value"].lower()} | template.confusable(ctx["new_value"])
        pool = [a.value for a in template.writer.alternatives if a.value.lower() not in taken]
        if len(pool) < 3:
            raise ValueError(f"template {template.id}: fewer than 3 alternatives left for distractors")
        return [pool[i] for i in sorted(rng.choice(len(pool), size=3, replace=False))]

    def draft_codis(self, category: str, facts: dict, rng: np.random.Generator) -> tuple[CodisContent, Prompt]:
        """The category's wording file (``prompts/draft/codis_<category>``) filled with the source's object."""
        prompt = load_prompt("draft/codis_" + "_".join(authored.words(category)))
        return authored.codis_draft(prompt, category, facts["object"], facts["side"]), prompt

    def draft_mme_realworld(self, facts: dict, rng: np.random.Generator) -> tuple[MMERealWorldContent, Prompt]:
        """Where is the target? The right quadrant from its box, the options in a seeded order; only about a
        target that lies in one quarter of the image (one straddling a middle line has no one answer)."""
        prompt = load_prompt("draft/mme_realworld_position")
        region = authored.unambiguous_position(facts["targets"], facts["width"], facts["height"])
        if region is None:
            raise ValueError("no small labelled object lies in one quarter of the image: its position is ambiguous")
        content = authored.mme_position_draft(prompt, region, facts["width"], facts["height"], facts["domain"], rng)
        return content, prompt


# --- OpenAI-compatible endpoint ------------------------------------------------------------------------


R = TypeVar("R", bound=BaseModel)


class IdeaReply(BaseModel):
    new_value: str = Field(min_length=1, description="the subject's new attribute value")
    new_high: str = Field("", description="what it means at the high level (new behaviour, emotion, …)")
    new_caption: str = Field(min_length=1)


class QuestionReply(BaseModel):
    question: str = Field(min_length=3)

    @field_validator("question")
    @classmethod
    def _is_question(cls, q: str) -> str:
        if not q.strip().endswith("?"):
            raise ValueError("must be a question ending with '?'")
        return q.strip()


class DistractorsReply(BaseModel):
    distractors: list[Annotated[str, Field(min_length=1, max_length=60)]] = Field(min_length=3, max_length=3)


# The paper's prompts ask for labelled lines; these are their labels (the attribute's, then the high-level one's).
_LABELS = {
    "new_value": r"New (?:Object|Background|Facial Expression|Value)",
    "new_high": r"New (?:Behaviour|Behavior|Emotion)",
    "new_caption": r"New Caption",
    "question": r"Question",
    "distractors": r"Distractors",
}


class CodisDraftReply(BaseModel):
    question: str = Field(min_length=1)
    context_1: str = Field(min_length=1)
    context_2: str = Field(min_length=1)
    answer_1: str = Field(min_length=1)
    answer_2: str = Field(min_length=1)


class MMEDraftReply(BaseModel):
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=4, max_length=4)
    answer: Literal["A", "B", "C", "D"]


def parse_reply(raw: str, model: type[R]) -> R:
    """JSON first; else the paper's labelled lines ("New Background: …", "Question: …")."""
    text = raw.strip()
    fenced = re.search(r"\{.*\}", text, re.S)
    if fenced:
        try:
            return model.model_validate(json.loads(fenced.group(0), strict=False))  # tolerate raw control characters
        except json.JSONDecodeError:
            pass
    fields: dict[str, object] = {}
    for name in model.model_fields:
        label = _LABELS.get(name)
        m = (
            re.search(rf"(?:^|\n)\W*(?:{label})\W*[:：]\s*(.+?)(?=\n\W*[A-Z][A-Za-z ]+[:：]|\Z)", text, re.S)
            if label
            else None
        )
        if m:
            value = m.group(1).strip().strip("\"'")
            fields[name] = (
                [v.strip(" -*•\t") for v in value.splitlines() if v.strip(" -*•\t")] if name == "distractors" else value
            )
    return model.model_validate(fields)


@register("llm", "openai", OpenAIWriterSettings)
class OpenAIWriter:
    name = "openai"

    @classmethod
    def from_settings(cls, settings: OpenAIWriterSettings, runtime: Runtime) -> OpenAIWriter:
        client = ChatClient.from_endpoint(settings, temperature=settings.temperature, seed=settings.seed)
        return cls(client, settings.max_validation_retries, response_format=settings.response_format)

    def load(self) -> OpenAIWriter:
        self.client.load()
        return self

    def __init__(
        self,
        client: ChatClient,
        max_validation_retries: int = 2,
        cache: DiskCache | None = None,
        response_format: str = "json_schema",
    ):
        self.client = client
        self.response_format = response_format
        self.model_id = client.model
        self.max_validation_retries = max_validation_retries
        self.cache = cache or DiskCache(state_dir() / "llm-cache")

    def ask(self, prompt: Prompt, text: str, reply_model: type[R]) -> R:
        key = DiskCache.key(self.client.model, prompt.sha256, text, self.client.seed, reply_model.__name__)
        cached = self.cache.get(key)
        if cached is not None:
            return reply_model.model_validate(cached["reply"])
        json_schema = reply_model.model_json_schema()
        if self.response_format == "json_object":  # llama.cpp's server: a grammar from the schema
            schema = {"type": "json_object", "schema": json_schema}
        else:
            schema = {"type": "json_schema", "json_schema": {"name": reply_model.__name__, "schema": json_schema}}
        messages = [
            {
                "role": "user",
                "content": text + "\n\nAnswer in JSON with the keys: " + ", ".join(reply_model.model_fields) + ".",
            }
        ]
        for attempt in range(self.max_validation_retries + 1):
            raw = self.client.chat(messages, response_format=schema)
            try:
                reply = parse_reply(raw, reply_model)
            except ValidationError as exc:
                reason = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors())
                if attempt == self.max_validation_retries:
                    raise LLMReplyError(
                        f"{prompt.id}: reply failed validation after {attempt + 1} tries: {reason}", raw
                    ) from None
                messages += [
                    {"role": "assistant", "content": raw},
                    {
                        "role": "user",
                        "content": f"Your answer did not validate: {reason}. "
                        f"Answer again in JSON with the keys: {', '.join(reply_model.model_fields)}.",
                    },
                ]
                continue
            self.cache.put(key, {"model": self.client.model, "prompt": prompt.ref(), "reply": reply.model_dump()})
            return reply
        raise AssertionError("unreachable")

    def idea(
        self, template: Template, grounding: Grounding, choices: list[Rendering], rng: np.random.Generator
    ) -> Idea:
        ctx = context.build(template, grounding)
        prompt, choose = load_prompt(template.idea_prompt), load_prompt("idea/choose_value")
        by_value = {c.value: c for c in choices}
        # The reply's schema admits only the renderable values: the model picks, it cannot invent.
        reply_model = create_model(
            "IdeaReply",
            __base__=IdeaReply,
            new_value=(Literal[tuple(by_value)], ...),  # type: ignore[arg-type]
        )
        text = context.render(prompt, ctx) + "\n" + choose.render(choices="; ".join(by_value))
        reply = self.ask(prompt, text, reply_model)
        pick = by_value[reply.new_value]
        return Idea(
            category=template.id,
            subject=context.subject_name(grounding),
            attribute=template.attribute,
            old=ctx["original_value"],
            new=pick.value,
            new_caption=reply.new_caption,
            high_level_value=pick.high,
            rendering=pick,
        )

    def yes_no(self, template: Template, ctx: dict, level: str, high: str) -> str:
        prompt = load_prompt(template.yes_no_prompt if level == "low" else template.high_prompt)
        return self.ask(prompt, context.render(prompt, ctx), QuestionReply).question

    def mcq_question(self, template: Template, ctx: dict) -> str:
        prompt = load_prompt("questions/mcq_question")
        return self.ask(prompt, context.render(prompt, ctx), QuestionReply).question

    def distractors(self, template: Template, ctx: dict, rng: np.random.Generator) -> list[str]:
        prompt = load_prompt("questions/mcq_distractors")
        question = self.mcq_question(template, ctx)
        text = context.render(prompt, ctx, question=question, correct_answer=ctx["new_value"])
        return self.ask(prompt, text, DistractorsReply).distractors

    def draft_codis(self, category: str, facts: dict, rng: np.random.Generator) -> tuple[CodisContent, Prompt]:
        prompt = load_prompt("draft/codis")
        text = prompt.render(category=category, caption=facts["caption"], objects=facts["objects"])
        reply = self.ask(prompt, text, CodisDraftReply)
        return CodisContent(category=category, **reply.model_dump()), prompt

    def draft_mme_realworld(self, facts: dict, rng: np.random.Generator) -> tuple[MMERealWorldContent, Prompt]:
        prompt = load_prompt("draft/mme_realworld")
        region = facts["region"]
        text = prompt.render(
            object=region["label"], domain=facts["domain"], caption=facts["caption"], objects=facts["objects"]
        )
        reply = self.ask(prompt, text, MMEDraftReply)
        x, y, w, h = region["bbox"]
        return (
            MMERealWorldContent(
                question=reply.question,
                options=reply.options,
                answer=reply.answer,
                absent_object=region["label"],
                domain=facts["domain"],
                subtask="object",
                target={"x0": x, "y0": y, "x1": x + w, "y1": y + h},
            ),
            prompt,
        )
