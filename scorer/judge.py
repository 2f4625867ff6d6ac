"""The optional LLM judge: decides what extraction rules cannot, with a prompt file, cached on disk.

Spec: ``openai:MODEL@BASE_URL`` (key from ``OPENAI_API_KEY``). Answers are cached under the state
directory keyed by (model, prompt hash, rendered text), so re-scoring is free and gives the same result.
The judge never guesses for the scorer: a reply it cannot read leaves the item unparsed.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import TYPE_CHECKING

from perceptforge.errors import PerceptforgeError
from perceptforge.prompts.library import load_prompt
from perceptforge.settings import state_dir

if TYPE_CHECKING:
    from perceptforge.backends.chat import ChatClient

# backends.chat (the HTTP client) is imported where a judge is made: scoring without --judge never needs it


class Judge:
    def __init__(self, client: ChatClient, cache_dir: Path | None = None):
        from perceptforge.backends.chat import DiskCache

        self.client = client
        self.cache = DiskCache(cache_dir or state_dir() / "judge-cache")
        self._clients: dict[float, ChatClient] = {}

    @classmethod
    def from_spec(cls, spec: str, timeout_s: float = 60.0) -> Judge:
        match = re.fullmatch(r"openai:([^@]+)@(.+)", spec)
        if not match:
            raise PerceptforgeError(f"--judge must look like openai:MODEL@BASE_URL, got {spec!r}")
        from perceptforge.backends.chat import ChatClient

        return cls(ChatClient(base_url=match.group(2), model=match.group(1), seed=0, timeout_s=timeout_s))

    def _ask(self, prompt_id: str, suffix: str = "", temperature: float | None = None, **values: str) -> str:
        prompt = load_prompt(prompt_id)
        text = prompt.render(**values) + suffix
        client = self._at(temperature)
        # a reply at another temperature is another answer: the cache keeps them apart
        keyed = text if temperature is None else f"{text}\x00temperature={temperature}"
        key = self.cache.key(client.model, prompt.sha256, keyed)
        cached = self.cache.get(key)
        if cached is not None:
            return cached["reply"]
        reply = client.complete(text)
        self.cache.put(key, {"model": client.model, "prompt": prompt.ref(), "reply": reply})
        return reply

    def _at(self, temperature: float | None) -> ChatClient:
        """The client, or a copy of it sampling at ``temperature``."""
        if temperature is None or temperature == self.client.temperature:
            return self.client
        if temperature not in self._clients:
            clone = copy.copy(self.client)
            clone.temperature = temperature
            self._clients[temperature] = clone
        return self._clients[temperature]

    def codis(self, question: str, groundtruth: str, output: str) -> bool | None:
        """CODIS Table 12: "right" or "wrong"."""
        reply = self._ask("judge/codis", question=question, groundtruth=groundtruth, output=output).strip().lower()
        if reply.startswith("right"):
            return True
        if reply.startswith("wrong"):
            return False
        return None

    def codis_official(self, question: str, groundtruth: str, output: str) -> bool:
        """CODIS ``data/eval.py``: its prompt, every output; right when "right" is anywhere in the reply."""
        # the script's prompt ends with a newline, which a prompt file cannot keep (the loader strips it)
        reply = self._ask("judge/codis_official", "\n", question=question, groundtruth=groundtruth, output=output)
        return "right" in reply

    def mvp_bench_official(self, question: str, output: str) -> str | None:
        """MVP-Bench ``evaluate.py``'s ``yes_or_no_eval``: its own prompt asked ``MVP_ASKS`` times at
        temperature 0, 0.5, 1, …, every reply read its way, and the last reading kept (the script overwrites
        its answer on each ask, even a decided one with "Unknown"): "yes", "no", or None (Unknown)."""
        answer = None
        for ask in range(MVP_ASKS):
            reply = self._ask("judge/mvp_bench_official", temperature=0.5 * ask, question=question, output=output)
            answer = mvp_official_reading(reply)
        return answer

    def choice(self, question: str, letters: str, output: str) -> str | None:
        reply = self._ask("judge/choice", question=question, letters=", ".join(letters), output=output).strip()
        match = re.fullmatch(r"\(?([A-Z])\)?\.?", reply)
        return match.group(1) if match and match.group(1) in letters else None


MVP_ASKS = 5  # evaluate.py: retry = 5, and no early exit

# evaluate.py's process_punctuation (VLMEvalKit's), kept as it is: these are what its reading depends on
_PUNCT = (";", r"/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!")
_COMMA_STRIP = re.compile(r"(\d)(,)(\d)")
_PERIOD_STRIP = re.compile(r"(?!<=\d)(\.)(?!\d)")


def process_punctuation(text: str) -> str:
    """The official punctuation pass. Its quirks are the script's: a mark is deleted, not spaced, anywhere
    once it touches a space somewhere (or a digit-comma-digit occurs), and ``re.UNICODE`` is passed where
    ``sub`` takes its count, so only the first 32 full stops go."""
    out = text
    for p in _PUNCT:
        if (p + " " in text or " " + p in text) or (re.search(_COMMA_STRIP, text) is not None):
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD_STRIP.sub("", out, int(re.UNICODE))


def mvp_official_reading(reply: str) -> str | None:
    """``extract_yn``: "yes" when the word yes is in the reply and no is not, "no" the other way, else None."""
    words = process_punctuation(reply.lower()).split()
    if "yes" in words and "no" not in words:
        return "yes"
    if "yes" not in words and "no" in words:
        return "no"
    return None


def judge_unparsed(ex, judge: Judge | None, question: str, letters: str, output: str | None):
    """Ask the judge only where rules left an output unparsed; keep the rule's answer otherwise."""
    from perceptforge.scorer.extract import Extraction

    if judge is None or ex.value is not None or not output or ex.method in ("empty", "refusal"):
        return ex
    letter = judge.choice(question, letters, output)
    return Extraction(letter, "judge") if letter else Extraction(None, "judge_unparsed")
