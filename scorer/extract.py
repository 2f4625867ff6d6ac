"""Answer extraction: from a model's raw output to a choice letter, a yes/no, or *unparsed*.

Rules, in order (``CHOICE_RULES``: the first that decides wins, and its name is the item's ``method``):

1. ``empty`` / ``refusal``: nothing to read, or a refusal ("I cannot determine …") → unparsed.
2. ``declaration``: the *last* explicit answer declaration — "the answer is (B)", "Answer: B",
   "correct choice is:\n(D) Point D", "**B**" — naming a valid letter.
3. ``leading``: the output opens with a letter: "B", "(B)", "B.", "B)", "B:", "**B**", "(B) Point B".
4. ``sole_paren``: exactly one distinct valid letter appears in parentheses anywhere: "… so (C) it is".
5. ``lead_subject``: the first sentence is about one letter: "Point A is closer to the camera.",
   "Box B more accurately localizes …".
6. ``option_text_lead``: the first sentence contains exactly one option's text (options known).
7. ``conclusion``: the last sentence with a conclusion cue ("therefore", "most similar", "I would
   choose") that names letters names exactly one.
8. ``option_text``: exactly one option's text appears in the output (when the options are known).
9. ``named_letter``: exactly one distinct valid letter is named anywhere ("Point C", "Box B", "(D)").

Anything else is *unparsed*: never a guess, never a random letter. Only the item's valid letters count
("E" on a four-option item is not an answer).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Generic, TypeVar

LETTERS = "ABCDEFGH"


@dataclass(frozen=True)
class Extraction:
    value: str | None  # a letter, "yes"/"no", or None when unparsed
    method: str


UNPARSED_EMPTY = Extraction(None, "empty")

_REFUSAL = re.compile(
    r"^\W*(i\s*(?:'m| am)\s*(?:sorry|unable)|i\s+(?:can(?:not|'t)|am not able to)|sorry\b|unable to|"
    r"as an ai\b|there is no (?:correct )?(?:answer|option)|none of the (?:options|above|choices))",
    re.I,
)
_MD = re.compile(r"[*_`]+")
_WORD_AFTER = re.compile(r"\s+[a-z]")
_CONTRAST = re.compile(r"\b(?:differs?|different|less|unlike|not)\b", re.I)
_HEDGED_VERB = re.compile(r"\b(?:could|might|may)\s+be\b", re.I)
_HEDGE = re.compile(r"\b(?:could be|might|it's possible|it is possible|if we consider|depending on)\b", re.I)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
_LONE_CAPITAL = re.compile(r"\b([A-H])\b")
_ARTICLE = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = re.compile(r"[^\w\s]")


def _letter_class(valid: str) -> str:
    return "[" + valid + "]"


_NAMED = r"(?:point|box|option|choice|picture|image|figure)"
_CONCLUSION = re.compile(
    r"\b(therefore|thus|hence|so the|so,|in conclusion|"
    r"based on (?:these|this|the|my) (?:observations?|analysis|comparisons?)|"
    r"overall|correct|closest|most similar|most likely|best|"
    r"i would (?:choose|say|select|pick)|lean towards)\b",
    re.I,
)


_NEGATION = re.compile(r"\b(not|no|neither|nor|least|unlikely|incorrect|wrong)\b", re.I)


def _at_word(text: str, at: int) -> tuple[int, ...]:
    return (at,)


def _verb_before_colon(text: str, at: int) -> tuple[int, ...]:
    """Where "is", "are" or "be" would start before the colon at ``at`` (spaces between allowed)."""
    window = max(0, at - 32)
    end = window + len(text[window:at].rstrip())
    return (end - 2, end - 3)


def _i_before_verb(text: str, at: int) -> tuple[int, ...]:
    """Where "i ", "i'd ", "i'll ", "i will " or "i would " would start before the verb at ``at``."""
    return tuple(at - k for k in (2, 4, 5, 7, 8))


# Words each declaration pattern needs, in order, and where a match may start given such a word: each
# candidate start is tried with one anchored match, far cheaper than a case-insensitive scan of a long
# output. A text without the words cannot match the pattern.
_DECLARATION_WORDS: tuple[tuple[tuple[str, ...], Callable[[str, int], tuple[int, ...]]], ...] = (
    (("therefore", "thus", "hence"), _at_word),
    (("answer", "choice", "option", "response", "selection"), _at_word),
    ((":",), _verb_before_colon),
    (("choose", "pick", "select", "go with"), _i_before_verb),
)


@cache
def _declarations(valid: str) -> tuple[re.Pattern[str], ...]:
    L = _letter_class(valid)
    end = r"(?=[\)\]\.:,;!?]|\s|$)"
    return (
        # "Therefore:\n\n(B) B is darker"
        re.compile(r"\b(?:therefore|thus|hence)\s*[:,]?\s*[\(\[](" + L + r")[\)\]]", re.I),
        # "the answer is (B)", "Answer: B", "correct option would be: C", "the answer is:\n\n(D) Point D"
        re.compile(
            r"\b(?:answer|choice|option|response|selection)\s*(?:is|would be|will be|should be|must be|=|:)"
            r"(?:\s+(?:most likely|likely|probably|therefore|thus|clearly))?\s*:?\s*"
            r"(?:option\s+|choice\s+)?[\(\[]?\s*(" + L + r")" + end,
            re.I,
        ),
        # "… the correct corresponding point is: (A) Point A"
        re.compile(r"\b(?:is|are|be)\s*:\s*[\(\[](" + L + r")[\)\]]", re.I),
        # "I would choose (C)", "I'll go with B"
        re.compile(
            r"\bi(?: would|'d| will|'ll)? (?:choose|pick|select|go with)\s*:?\s*(?:option\s+)?[\(\[]?("
            + L
            + r")"
            + end,
            re.I,
        ),
    )


@cache
def _leading_pattern(valid: str) -> re.Pattern[str]:
    L = _letter_class(valid)
    return re.compile(r"^\s*(?:option\s+|choice\s+)?[\(\[]?(" + L + r")(?:[\)\]\.:,]|\s*$|\s+(?=\S))")


@cache
def _lead_subject(valid: str) -> re.Pattern[str]:
    """ "Point A is closer …", "Box B more accurately localizes …", "A is closer to the camera." """
    L = _letter_class(valid)
    return re.compile(
        r"^\s*(?:the\s+)?(?:" + _NAMED + r"\s*)?[\"'“(]?(" + L + r")[\"'”)]?\s*(?:\([^)]*\)\s*)?"
        r"(?:is|more|appears|fits|would|corresponds|better|seems|has|shares|matches)\b",
        re.I,
    )


@cache
def _naming_patterns(valid: str) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """ "(B)" or "[B]"; "Point B", "box B"; and "(B)" alone."""
    L = _letter_class(valid)
    return (
        re.compile(r"[\(\[](" + L + r")[\)\]]"),
        re.compile(r"\b" + _NAMED + r"\s*[\"'“(]?(" + L + r")\b", re.I),
        re.compile(r"\((" + L + r")\)"),
    )


def _letters_named(text: str, valid: str) -> set[str]:
    """Valid letters the text names as "(B)", "Point B", "box B"."""
    bracketed, named, _ = _naming_patterns(valid)
    found = {m.group(1) for m in bracketed.finditer(text)}
    found |= {m.group(1) for m in named.finditer(text) if m.group(1).isupper()}
    return found


# "the third image (C)": a letter in brackets, then the ordinal image before it (looked for only before
# such a letter, in the lower-cased text: a case-insensitive scan of the whole output costs far more).
_BRACKETED_LETTER = re.compile(r"\(([A-Za-z])\)")
_ORDINAL_IMAGE_BEFORE = re.compile(r"\b(first|second|third|fourth)\s+(?:image|picture|photo)\s*\Z")


def _sentences(text: str) -> list[str]:
    return [p for p in _SENTENCE_BREAK.split(text) if p.strip()]


def _norm_text(text: str) -> str:
    # A lone capital letter is a label ("Point A"), not the article "a": keep it distinct.
    text = _LONE_CAPITAL.sub(r"letter\1", text)
    text = text.lower()
    text = _ARTICLE.sub(" ", text)
    text = _PUNCTUATION.sub(" ", text)
    return " ".join(text.split())


@lru_cache(maxsize=4096)
def _norm_options(options: tuple[str, ...]) -> tuple[str, ...]:
    """A task's option texts are the same for all its items: normalised once."""
    return tuple(_norm_text(o) for o in options)


T = TypeVar("T")


class _computed_once(Generic[T]):
    """``functools.cached_property`` without its per-access lock (Python 3.11 takes one), which cost a
    tenth of extraction's time: the value is stored in the instance, and later reads never reach here."""

    def __init__(self, compute: Callable[[ChoiceText], T]) -> None:
        self.compute, self.name = compute, compute.__name__

    def __get__(self, obj: ChoiceText, owner: type | None = None) -> T:
        value = obj.__dict__[self.name] = self.compute(obj)
        return value


@dataclass
class ChoiceText:
    """One output prepared once for the choice rules: markdown stripped, the valid letters, the options;
    what only some rules need (sentences, lower case) is computed on first use."""

    text: str
    valid: str
    options: tuple[str, ...]  # normalised option texts ("" where unknown)

    @_computed_once
    def sentences(self) -> tuple[str, ...]:
        return tuple(_sentences(self.text))

    @_computed_once
    def first_sentence(self) -> str:
        """``sentences[0]`` without splitting the whole output (the text is stripped, so it is never empty)."""
        end = _SENTENCE_BREAK.search(self.text)
        return self.text[: end.start()] if end else self.text

    @_computed_once
    def lower(self) -> str:
        """Lower case at the same offsets as ``text`` (a match found here is read there): the rare characters
        whose lower case is longer ("İ") keep their case."""
        lower = self.text.lower()
        if len(lower) != len(self.text):
            lower = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in self.text)
        return lower

    @_computed_once
    def letters_label_images(self) -> bool:
        """ "The third image (C)" where the option "the third image" is B: the output labels the images
        with letters of its own, so a letter in brackets is not an option; only the option texts can say
        which was chosen."""
        if "(" not in self.text or not any("image" in o for o in self.options):
            return False
        for m in _BRACKETED_LETTER.finditer(self.text):
            label = _ORDINAL_IMAGE_BEFORE.search(self.lower, max(0, m.start() - 40), m.start())
            if not label:
                continue
            phrase = _norm_text(f"{label.group(1)} image")
            if phrase in self.options and self.valid[self.options.index(phrase)] != m.group(1):
                return True
        return False

    def option_hits(self, sentence: str) -> set[str]:
        padded = f" {_norm_text(sentence)} "
        return {self.valid[i] for i, o in enumerate(self.options) if o and f" {o} " in padded}


def refusal(c: ChoiceText) -> bool | str | None:
    return False if _REFUSAL.search(c.text) else None


# Most outputs hold none of the words a declaration needs: checking for them first settles those. str's
# substring search is several times faster than a regex alternation of the same words.
_ANY_DECLARATION_WORD = tuple(n for group, _ in _DECLARATION_WORDS for n in group)


def _holds_any(text: str, words: tuple[str, ...]) -> bool:
    for word in words:  # a plain loop: any() over a generator costs half as much again here
        if word in text:
            return True
    return False


def declaration(c: ChoiceText) -> bool | str | None:
    # Letters must be capitals in the text: "the answer is a pen" does not read as "A".
    if not _holds_any(c.lower, _ANY_DECLARATION_WORD):
        return None
    found = set()
    for pattern, (needles, starts) in zip(_declarations(c.valid), _DECLARATION_WORDS):
        for needle in needles:
            at = c.lower.find(needle)
            while at >= 0:
                for start in starts(c.text, at):
                    m = pattern.match(c.text, start) if start >= 0 else None
                    if m and m.group(1).isupper():
                        found.add((start, m.group(1)))
                at = c.lower.find(needle, at + 1)
    if not found:
        return None
    at, letter = max(found)
    hedged = _HEDGED_VERB.search(c.text[max(0, at - 24) : at + 8])
    if (hedged or len({x for _, x in found}) > 1 and _HEDGE.search(c.text)) and len(
        _letters_named(c.text, c.valid)
    ) > 1:
        return False  # "it might be (A) … but the answer could be (C)": two answers, hedged: never guess
    return letter


def leading(c: ChoiceText) -> str | None:
    lead = _leading_pattern(c.valid).match(c.text)
    if not lead or not lead.group(1).isupper():
        return None
    letter, rest = lead.group(1), c.text[lead.end(1) :]
    # "A cat is …" starts with the article A: only a letter followed by punctuation, end, or a bracket
    # counts when the letter is also a word.
    if letter != "A" or not _WORD_AFTER.match(rest) or c.text.lstrip().startswith(("(", "[")):
        return letter
    return None


def sole_paren(c: ChoiceText) -> str | None:
    if c.letters_label_images:
        return None
    parens = {m.group(1) for m in _naming_patterns(c.valid)[2].finditer(c.text)}
    return parens.pop() if len(parens) == 1 else None


def lead_subject(c: ChoiceText) -> str | None:
    if c.letters_label_images:
        return None
    first_sentence = c.first_sentence
    first = _lead_subject(c.valid).match(first_sentence)
    if first and first.group(1).isupper() and _letters_named(first_sentence, c.valid) <= {first.group(1)}:
        return first.group(1)
    if not first_sentence.rstrip().endswith(":"):
        named = _letters_named(first_sentence, c.valid)
        if len(named) == 1 and not _NEGATION.search(first_sentence):
            return named.pop()
    return None


def option_text_lead(c: ChoiceText) -> str | None:
    if not any(c.options):
        return None
    hits = c.option_hits(c.first_sentence)
    return hits.pop() if len(hits) == 1 and not _NEGATION.search(c.first_sentence) else None


def conclusion(c: ChoiceText) -> bool | str | None:
    for sentence in reversed(c.sentences):
        # "The third image (B) is an illustration and thus differs …" concludes against B, not for it.
        if _CONCLUSION.search(sentence) and not _CONTRAST.search(sentence):
            named = _letters_named(sentence, c.valid) or c.option_hits(sentence)
            if named:
                return named.pop() if len(named) == 1 else None
    return None


def option_text(c: ChoiceText) -> str | None:
    hits = c.option_hits(c.text) if any(c.options) else set()
    return hits.pop() if len(hits) == 1 else None


def named_letter(c: ChoiceText) -> str | None:
    if c.letters_label_images:
        return None
    named = _letters_named(c.text, c.valid)
    return named.pop() if len(named) == 1 else None


# The rules in order: the first that decides wins and its name is recorded as the item's ``method``.
# A rule returns a letter (decided), False (decided: unparsed, e.g. a refusal) or None (not mine).
CHOICE_RULES = (
    refusal,
    declaration,
    leading,
    sole_paren,
    lead_subject,
    option_text_lead,
    conclusion,
    option_text,
    named_letter,
)


def extract_choice(output: str | None, n_options: int = 4, options: Sequence[str] | None = None) -> Extraction:
    """The chosen letter among the first ``n_options`` letters, or unparsed."""
    if output is None or not str(output).strip():
        return UNPARSED_EMPTY
    text = str(output)
    if "*" in text or "_" in text or "`" in text:  # markdown emphasis is rare: skip the regex without it
        text = _MD.sub("", text)
    text = text.strip()
    if text.startswith("<s>"):
        text = text[3:].lstrip()
    valid = LETTERS[:n_options]
    prepared = ChoiceText(text, valid, _norm_options(tuple((options or [])[:n_options])))
    for rule in CHOICE_RULES:
        decided = rule(prepared)
        if decided is False:
            return Extraction(None, rule.__name__)
        if decided:
            return Extraction(str(decided), rule.__name__)
    return Extraction(None, "unparsed")


_YES = re.compile(r"^\W*(yes|yeah|yep|true|correct)\b", re.I)
_NO = re.compile(r"^\W*(no|nope|false|incorrect)\b", re.I)


def extract_yes_no(output: str | None) -> Extraction:
    """``yes`` / ``no`` from the opening word, else from a lone yes/no word; unparsed otherwise."""
    if output is None or not str(output).strip():
        return UNPARSED_EMPTY
    text = _MD.sub("", str(output)).strip()
    if _YES.match(text):
        return Extraction("yes", "leading")
    if _NO.match(text):
        return Extraction("no", "leading")
    if _REFUSAL.search(text):
        return Extraction(None, "refusal")
    decl = re.findall(r"answer(?:\s+is)?\s*[:：]?\s*(yes|no)\b(?!\s+(?:and|or)\s+(?:yes|no)\b)", text, re.I)
    if decl:
        return Extraction(decl[-1].lower(), "declaration")
    words = {w.lower() for w in re.findall(r"\b(yes|no)\b", text, re.I)}
    if len(words) == 1:
        return Extraction(words.pop(), "sole_word")
    return Extraction(None, "unparsed")


def normalise_answer(text: str) -> str:
    """Lower case, punctuation and articles removed, spaces collapsed (CODIS rule-based matching)."""
    return _norm_text(text)
