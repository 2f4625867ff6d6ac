"""Answer extraction: from a model's raw output to a choice letter, a yes/no, or *unparsed*.

Rules, in order (``CHOICE_RULES``: the first that decides wins, and its name is the item's ``method``):

1. ``empty`` / ``refusal``: nothing to read, or a refusal ("I cannot determine …") → unparsed.
2. ``conflicting_letters``: the output letters things its own way — a valid letter in brackets beside
   another option's text or another image ("the second image (B)" where "the second image" is A) → unparsed:
   its letters may be its own labels, not the options.
3. ``declaration``: the *last* explicit answer declaration — "the answer is (B)", "Answer: B",
   "correct choice is:\n(D) Point D", "I would select Point C", "Therefore, the corresponding point is
   Point B" — naming a valid letter. A letter that opens a list of the options ("The choices are:\n(A) …\n(B)
   …") is not one; three different declared letters, two hedged ones, or a later conclusion naming several
   options together ("the corresponding points are (B) and (C)") → unparsed.
4. ``lead_contradicted``: the output opens with a letter and the statement after it names another option
   ("B\nThe second image fits best.") → unparsed.
5. ``leading``: the output opens with a letter: "B", "(B)", "B.", "B)", "B:", "**B**", "(B) Point B".
6. ``sole_paren``: exactly one distinct valid letter appears in parentheses anywhere: "… so (C) it is".
7. ``lead_subject``: the first sentence is about one letter: "Point A is closer to the camera.",
   "Box B more accurately localizes …".
8. ``option_text_lead``: the first sentence contains exactly one option's text (options known), unless the
   last concluding sentence names another option's text (then unparsed: the first sentence described).
9. ``conclusion``: the last sentence with a conclusion cue ("therefore", "most similar", "I would
   choose") that names letters names exactly one.
10. ``option_text``: exactly one option's text appears in the output (when the options are known).
11. ``named_letter``: exactly one distinct valid letter is named anywhere ("Point C", "Box B", "(D)").

Lists name every option they list: "box (A or B)", "the second or third image". A negation ("not",
"cannot") in a first sentence keeps it from deciding.

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
    r"\b(?:therefore|thus|hence|so the|in conclusion|"
    r"based on (?:these|this|the|my) (?:observations?|analysis|comparisons?)|"
    r"overall|correct|closest|most similar|most likely|best|"
    r"i would (?:choose|say|select|pick)|lean towards)\b|\bso,",
    re.I,
)


_NEGATION = re.compile(r"\b(not|no|neither|nor|cannot|can't|unable|least|unlikely|incorrect|wrong)\b", re.I)


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
    (("therefore", "thus", "hence", "so,"), _at_word),
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
            r"(?:" + _NOUN + r"\s+)?[\(\[]?\s*(" + L + r")" + end,
            re.I,
        ),
        # "… the correct corresponding point is: (A) Point A"
        re.compile(r"\b(?:is|are|be)\s*:\s*[\(\[](" + L + r")[\)\]]", re.I),
        # "I would choose (C)", "I'll go with B"
        re.compile(
            r"\bi(?: would|'d| will|'ll)? (?:choose|pick|select|go with)\s*:?\s*(?:"
            + _NOUN
            + r"\s+)?[\(\[]?("
            + L
            + r")"
            + end,
            re.I,
        ),
        # "Therefore, the corresponding point for the reference point is Point B.", "So, the cube that can be
        # folded is option (B)."
        re.compile(
            r"\b(?:therefore|thus|hence|so),?\s+[^.\n]{0,80}?\b(?:is|would be)\s*:?\s*(?:"
            + _NOUN
            + r"\s+)?[\(\[]?("
            + L
            + r")"
            + end,
            re.I,
        ),
    )


# what may stand between a declaration and its letter: "the answer is option (B)", "I would select Point C"
_NOUN = r"(?:option|choice|point|box|picture)"


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
    if found:  # "box (A or B)", "options (A, B, C, D)" name every letter listed, not the first alone
        for listed in _LETTER_LIST.finditer(text):
            found |= set(listed.group(0)) & set(valid)
    return found


_LETTER_LIST = re.compile(r"\b[A-H]\)?(?:\s*(?:,|/|,?\s*or\b|,?\s*and\b)\s*\(?[A-H]\b)+")


_BRACKETED_LETTER = re.compile(r"\(([A-H])\)")
_ORDINAL_IMAGE_END = re.compile(r" ((?:first|second|third|fourth|fifth) image) \Z")
_ORDINAL_IMAGE_START = re.compile(r"\A ((?:first|second|third|fourth|fifth) image) ")


# Lists that name several options at once, in normalised text: "the second or third image", "the second
# and third images", "box (A or B)", "points A, B, C and D".
_ORDINALS_ELIDED = re.compile(
    r"\b(first|second|third|fourth|fifth) (?:or|and) (first|second|third|fourth|fifth) images? "
)
_LABELS_LISTED = re.compile(r"\b(point|box|picture|image|option|choice)s? ((?:letter[a-h] (?:or |and )?){2,})")


def _expand_lists(normalised: str) -> str:
    """Each option a list names, written out in full ("box lettera or letterb" → "box lettera box letterb")."""
    if " or " not in normalised and " and " not in normalised:
        return normalised
    normalised = _ORDINALS_ELIDED.sub(r"\1 image and \2 image ", normalised)
    return _LABELS_LISTED.sub(
        lambda m: " ".join(f"{m.group(1)} {x}" for x in re.findall(r"letter[a-h]", m.group(2))) + " ", normalised
    )


def _labelled_phrase(text: str, start: int, end: int, options: tuple[str, ...]) -> str | None:
    """The (normalised) option text or ordinal image that the bracketed letter at ``text[start:end]`` labels:
    the one right after it ("(B) the third image"), else the one right before it in the same sentence
    ("the third image (C)")."""
    tail = text[end : end + 40]
    cut = min((k for k in (tail.find("\n", 1), tail.find(". ")) if k >= 0), default=len(tail))
    after = f" {_norm_text(tail[:cut])} "
    head = text[max(0, start - 40) : start]
    cut = max(head.rfind("\n"), head.rfind(". "))
    before = f" {_norm_text(head[cut + 1 :])} "
    images = any("image" in o for o in options)
    for window, ordinal in ((after, _ORDINAL_IMAGE_START), (before, _ORDINAL_IMAGE_END)):
        for option in options:
            if option and (window.startswith(f" {option} ") if window is after else window.endswith(f" {option} ")):
                return option
        found = ordinal.search(window) if images else None
        if found:
            return found.group(1)
    return None


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
    def letters_conflict(self) -> bool:
        """The output letters things its own way: a bracketed letter beside a text that is not that letter's
        option, "the second image (B)" or "(B) the second image" where the option "the second image" is A
        (models often letter the images themselves, the first image A). Then a valid letter may be the
        output's own label, not the option: neither says which option was meant. A label only with letters
        the item does not have ("the third image (C)" of two options) leaves the valid letters meaning the
        options, but only where the output also pairs a letter with its own option text ("(B) the third
        image")."""
        if "(" not in self.text or not any(self.options):
            return False
        paired = own_letters = False
        for m in _BRACKETED_LETTER.finditer(self.text):
            phrase = _labelled_phrase(self.text, m.start(), m.end(), self.options)
            if phrase is None:
                continue
            letter = m.group(1)
            if letter in self.valid and self.options[self.valid.index(letter)] == phrase:
                paired = True
            elif letter in self.valid:
                return True
            else:
                own_letters = True
        return own_letters and not paired

    def option_hits(self, sentence: str) -> set[str]:
        padded = _expand_lists(f" {_norm_text(sentence)} ")
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


def conflicting_letters(c: ChoiceText) -> bool | None:
    return False if c.letters_conflict else None


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
                    if m and m.group(1).isupper() and not _opens_list(c.text, m.end(1), m.group(1), c.valid):
                        found.add((start, m.group(1)))
                at = c.lower.find(needle, at + 1)
    if not found:
        return None
    declared = {x for _, x in found}
    if len(declared) > 2:
        return False  # "the answer is (A) … the answer is (B) … the answer is (C)": one per option, none chosen
    at, letter = max(found)
    hedged = _HEDGED_VERB.search(c.text[max(0, at - 24) : at + 8])
    if (hedged or len(declared) > 1 and _HEDGE.search(c.text)) and len(_letters_named(c.text, c.valid)) > 1:
        return False  # "it might be (A) … but the answer could be (C)": two answers, hedged: never guess
    if _concludes_several(c, at):
        return False  # "… the answer is (B). So, the corresponding points are (B) and (C).": no one answer
    return letter


def _opens_list(text: str, end: int, letter: str, valid: str) -> bool:
    """Whether the letter at ``end`` opens a list of the options ("The choices are:\n(A) Point A\n(B) Point B"):
    the next line starts with another letter."""
    line_end = text.find("\n", end)
    if line_end < 0:
        return False
    following = _LIST_ITEM.match(text, line_end)
    return following is not None and following.group(1) != letter and following.group(1) in valid


_LIST_ITEM = re.compile(r"\s*[-*]?\s*(?:option\s+)?[\(\[]?([A-H])[\)\]\.:]", re.I)


def _concludes_several(c: ChoiceText, after: int) -> bool:
    """Whether a concluding sentence after ``after`` names several options together as its answer: "So, the
    corresponding points are (B) Point B and (C) Point C."."""
    tail = c.text[after:]
    if not _CONCLUSION.search(tail):
        return False
    return any(
        _CONCLUSION.search(s) and not _CONTRAST.search(s) and _several_together(s, c.valid)
        for s in _sentences(tail)[1:]
    )


_JOINED = re.compile(r"(?:\s|,|&|\band\b|\bor\b|\bpoints?\b|\bpictures?\b|\bboxe?s?\b|\boptions?\b|[A-H]|[()])*", re.I)


def _several_together(sentence: str, valid: str) -> bool:
    """Two different letters with only "and", "or", commas and their own labels between them: "(A) and (B)",
    "Point A and Point B", "(B) Point B and (C) Point C"."""
    mentions = sorted(
        (m.start(1), m.end(1), m.group(1))
        for pattern in _naming_patterns(valid)[:2]
        for m in pattern.finditer(sentence)
        if m.group(1).isupper()
    )
    for (_, end, first), (start, _, second) in zip(mentions, mentions[1:]):
        gap = sentence[end:start]
        if first != second and _JOINED.fullmatch(gap) and re.search(r",|&|\band\b|\bor\b", gap, re.I):
            return True
    return False


def _lead_letter(c: ChoiceText) -> tuple[str, str] | None:
    """The letter the output opens with, and the text after it ("B\nThe second image …")."""
    lead = _leading_pattern(c.valid).match(c.text)
    if not lead or not lead.group(1).isupper():
        return None
    letter, rest = lead.group(1), c.text[lead.end(1) :]
    # "A cat is …" starts with the article A: only a letter followed by punctuation, end, or a bracket
    # counts when the letter is also a word.
    if letter != "A" or not _WORD_AFTER.match(rest) or c.text.lstrip().startswith(("(", "[")):
        return letter, rest
    return None


def lead_contradicted(c: ChoiceText) -> bool | None:
    """ "B\nThe second image fits best." where the option "the second image" is A: the opening letter and
    the statement after it name different options."""
    lead = _lead_letter(c)
    if not lead or not any(c.options):
        return None
    letter, rest = lead
    statement = _SENTENCE_BREAK.split(rest.lstrip(" )].:,\n"), maxsplit=1)[0]
    hits = c.option_hits(statement)
    return False if len(hits) == 1 and letter not in hits and not _NEGATION.search(statement) else None


def leading(c: ChoiceText) -> str | None:
    lead = _lead_letter(c)
    return lead[0] if lead else None


def sole_paren(c: ChoiceText) -> str | None:
    parens = {m.group(1) for m in _naming_patterns(c.valid)[2].finditer(c.text)}
    return parens.pop() if len(parens) == 1 else None


def lead_subject(c: ChoiceText) -> str | None:
    first_sentence = c.first_sentence
    first = _lead_subject(c.valid).match(first_sentence)
    if first and first.group(1).isupper() and _letters_named(first_sentence, c.valid) <= {first.group(1)}:
        return first.group(1)
    if not first_sentence.rstrip().endswith(":"):
        named = _letters_named(first_sentence, c.valid)
        if len(named) == 1 and not _NEGATION.search(first_sentence):
            return named.pop()
    return None


def option_text_lead(c: ChoiceText) -> bool | str | None:
    if not any(c.options):
        return None
    hits = c.option_hits(c.first_sentence)
    if len(hits) != 1 or _NEGATION.search(c.first_sentence):
        return None
    # "The first image shows a wok, while the second image is empty. … Therefore, the third image is most
    # similar": the opening sentence describes; a concluding one naming another option contradicts it.
    concluded = _concluded_options(c)
    return False if concluded and concluded != hits else hits.pop()


def _concluded_options(c: ChoiceText) -> set[str]:
    """The options the last concluding sentence that names any option names by text."""
    for sentence in reversed(c.sentences[1:]):
        if _CONCLUSION.search(sentence) and not _CONTRAST.search(sentence):
            hits = c.option_hits(sentence)
            if hits:
                return hits
    return set()


def conclusion(c: ChoiceText) -> bool | str | None:
    for sentence in reversed(c.sentences):
        # "The third image (B) is an illustration and thus differs …" concludes against B, not for it.
        if _CONCLUSION.search(sentence) and not _CONTRAST.search(sentence):
            named = _letters_named(sentence, c.valid)
            if named:
                return named.pop() if len(named) == 1 else None
    return None


def option_text(c: ChoiceText) -> str | None:
    hits = c.option_hits(c.text) if any(c.options) else set()
    return hits.pop() if len(hits) == 1 else None


def named_letter(c: ChoiceText) -> str | None:
    named = _letters_named(c.text, c.valid)
    return named.pop() if len(named) == 1 else None


# The rules in order: the first that decides wins and its name is recorded as the item's ``method``.
# A rule returns a letter (decided), False (decided: unparsed, e.g. a refusal) or None (not mine).
CHOICE_RULES = (
    refusal,
    conflicting_letters,
    declaration,
    lead_contradicted,
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
