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

Three more read only what every rule above leaves open (so no earlier reading changes; issue 45):

12. ``option_word``: a lone word in another language that is exactly one option's text ("左" where the
    options are "left" and "right"; a short fixed list, no translation by guess).
13. ``compared_subject``: the first sentence says one letter is what the question asks of it compared with
    another ("Point A is closer to the camera than point B", "box B more accurately localizes … than box
    A"), or the last one concludes so ("Therefore, point B is likely closer …"). Only the comparisons
    BLINK asks count (closer, nearer, darker, more accurate): "A is further away than B" answers nothing.
14. ``final_statement``: the last sentence that names letters names one and states it ("… the
    corresponding point is Point A, as …", "… which is labeled C.", "option (D) seems to be the most
    logical choice", "I would lean towards:\n\n(A) the first image"), unhedged up to the statement ("if I
    had to choose" chooses); a last sentence naming a letter the item lacks ("(E)" of four) stops it.

Lists name every option they list: "box (A or B)", "the second or third image". A negation ("not",
"cannot") in a first sentence keeps it from deciding. A refusal that only disclaims what was not asked
("I cannot make assumptions about the identity of the people. However, …") leaves the output to the rules.

Anything else is *unparsed*: never a guess, never a random letter. Only the item's valid letters count
("E" on a four-option item is not an answer).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Generic, NamedTuple, TypeVar

LETTERS = "ABCDEFGH"


@dataclass(frozen=True)
class Extraction:
    value: str | None  # a letter, "yes"/"no", or None when unparsed
    method: str


UNPARSED_EMPTY = Extraction(None, "empty")

# How the rules stay fast on long outputs (a BLINK answer runs to 2,000 characters): a case-insensitive
# pattern that opens with an alternation makes Python's regex engine try every position of the text, so
# the words a pattern needs are found with ``str.find`` on the lower-case text and the pattern is matched
# there, anchored; scans left to the engine open with one character (``\(``, ``:``, a noun), which it finds
# far faster than a character class it tests at every position, or with one class where a break needs it
# (``[.!?\n]``); a capital standing alone is found with ``str.find`` per letter.

_REFUSAL = re.compile(
    r"^\W*+(i\s*(?:'m| am)\s*(?:sorry|unable)|i\s+(?:can(?:not|'t)|am not able to)|sorry\b|unable to|"
    r"as an ai\b|there is no (?:correct )?(?:answer|option)|none of the (?:options|above|choices))",
    re.I,
)
_MD = re.compile(r"[*_`]+")
_WORD_AFTER = re.compile(r"\s+[a-z]")
# Word patterns applied to lower-case text (``ChoiceText.lower``, or ``.lower()`` of a short piece): a
# case-insensitive scan costs about twice as much.
_CONTRAST = re.compile(r"\b(?:differs?|different|less|unlike|not)\b")
_HEDGED_VERB = re.compile(r"\b(?:could|might|may)\s+be\b")
_HEDGE = re.compile(r"\b(?:could be|might|it's possible|it is possible|if we consider|depending on)\b")
_CONCLUSION = re.compile(
    r"\b(?:therefore|thus|hence|so the|in conclusion|"
    r"based on (?:these|this|the|my) (?:observations?|analysis|comparisons?)|"
    r"overall|correct|closest|most similar|most likely|best|"
    r"i would (?:choose|say|select|pick)|lean towards)\b|\bso,"
)
_NEGATION = re.compile(r"\b(not|no|neither|nor|cannot|can't|unable|least|unlikely|incorrect|wrong)\b")
_LONE_CAPITAL = re.compile(r"\b([A-H])\b")
_ARTICLE = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = re.compile(r"[^\w\s]")
_CAPITAL = re.compile(r"[A-H]")

# --- normalised text (option texts, CODIS answers) ---------------------------------------------------------


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


# --- sentences ----------------------------------------------------------------------------------------------

# A run of newlines, or ".", "!" or "?" and the spaces after it: one scan in C for the character class (far
# faster than "(?<=[.!?])\s+|\n+"; a run of dots is passed over in C rather than visited one by one), the
# break's whole run matched in the same step.
_BREAK = re.compile(r"[.!?\n](?:(?<=\n)\n*|\s+)")


def _breaks(text: str, pos: int = 0, first: bool = False) -> list[tuple[int, int]]:
    """Where sentences break from ``pos`` on: the spaces after ".", "!" or "?", and runs of newlines (spans,
    in order; only the first with ``first``)."""
    if first:
        m = _BREAK.search(text, pos)
        return [] if m is None else [_break_span(text, m)]
    return [_break_span(text, m) for m in _BREAK.finditer(text, pos)]


def _break_span(text: str, m: re.Match[str]) -> tuple[int, int]:
    """The break a ``_BREAK`` match makes: the newlines, or the spaces after the full stop."""
    at, end = m.span()
    return (at, end) if text[at] == "\n" else (at + 1, end)


def _sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """The sentences of ``text`` as spans (the empty ones, only spaces, left out)."""
    spans = []
    pos = 0
    for m in _BREAK.finditer(text):
        at = m.start()
        if text[at] != "\n":
            at += 1
        if text[pos:at].strip():
            spans.append((pos, at))
        pos = m.end()
    if text[pos:].strip():
        spans.append((pos, len(text)))
    return tuple(spans)


def _pieces(text: str, breaks: list[tuple[int, int]], pos: int = 0) -> list[tuple[int, int]]:
    """The spans between the breaks (from ``pos``)."""
    return list(zip([pos, *(e for _, e in breaks)], [*(s for s, _ in breaks), len(text)]))


def _first_sentence(text: str) -> str:
    breaks = _breaks(text, first=True)
    return text[: breaks[0][0]] if breaks else text


# --- letters: declared, leading, named ------------------------------------------------------------------


def _letter_class(valid: str) -> str:
    return "[" + valid + "]"


# what may stand between a declaration and its letter: "the answer is option (B)", "I would select Point C"
_NOUN = r"(?:option|choice|point|box|picture)"
# the nouns a named letter follows: "Point B", "box B", "option (C)"
_NOUNS = ("point", "box", "option", "choice", "picture", "image", "figure")
_NAMED = "(?:" + "|".join(_NOUNS) + ")"
# A noun and the letter after it, on the lower-case text (the letter checked as written there): one pattern
# per noun, opening with the noun itself, which the engine finds in C; no word character before the noun.
_NAMED_LETTERS = tuple((noun, re.compile(noun + r"(?<!\w" + noun + r")\s*[\"'“(]?([a-h])\b")) for noun in _NOUNS)
# the same, all nouns in one pattern (each noun's first letter checked for a word character before it, so that
# the pattern opens with the nouns' first letters, which the engine finds in C)
_NAMED_LETTER = re.compile(
    "(?:" + "|".join(noun[0] + r"(?<!\w" + noun[0] + ")" + noun[1:] for noun in _NOUNS) + r")\s*[\"'“(]?([a-h])\b"
)
# "A or B", "A, B, C, or D" (the capital first, its boundary after it: the engine scans for a character class)
_LETTER_LIST = re.compile(r"[A-H](?<!\w.)\)?(?:\s*(?:,|/|,?\s*or\b|,?\s*and\b)\s*\(?[A-H]\b)+")
_BRACKETED_LETTER = re.compile(r"\(([A-H])\)")


def _verb_before_colon(text: str, at: int) -> tuple[int, ...]:
    """Where "is", "are" or "be" would start before the colon at ``at`` (spaces between allowed)."""
    window = max(0, at - 32)
    end = window + len(text[window:at].rstrip())
    return (end - 2, end - 3)


class _DeclarationPlan(NamedTuple):
    """The patterns a declaration may match, for one set of valid letters, and the words that open them."""

    opening: tuple[tuple[str, re.Pattern[str]], ...]  # a word, and the pattern matched where it starts
    answer: re.Pattern[str]  # "the answer is (B)", also matched where "select" starts ("selection is B")
    chosen: re.Pattern[str]  # "I would choose (C)": matched before "choose", "pick", "select", "go with"
    colon: re.Pattern[str]  # "… is: (A)": matched at the verb before a colon that a bracket follows


@cache
def _declaration_plan(valid: str) -> _DeclarationPlan:
    """Each word a declaration needs and the pattern it opens; the pattern of a chosen letter, matched before
    the words of ``_CHOOSING``; and the pattern matched before a colon that a bracket follows (see
    ``_verb_before_colon``). A text without the words or such a colon declares nothing."""
    L = _letter_class(valid)
    end = r"(?=[\)\]\.:,;!?]|\s|$)"
    # "Therefore:\n\n(B) B is darker"; "Therefore, the corresponding point for the reference point is Point B.",
    # "So, the cube that can be folded is option (B)."
    concluding = re.compile(
        r"\b(?:therefore|thus|hence|so)(?:\s*[:,]?\s*[\(\[](" + L + r")[\)\]]|"
        r",?\s+[^.\n]{0,80}?\b(?:is|would be)\s*:?\s*(?:" + _NOUN + r"\s+)?[\(\[]?(" + L + r")" + end + ")",
        re.I,
    )
    # "the answer is (B)", "Answer: B", "correct option would be: C", "the answer is:\n\n(D) Point D"
    answer = re.compile(
        r"\b(?:answer|choice|option|response|selection)\s*(?:is|would be|will be|should be|must be|=|:)"
        r"(?:\s+(?:most likely|likely|probably|therefore|thus|clearly))?\s*:?\s*"
        r"(?:" + _NOUN + r"\s+)?[\(\[]?\s*(" + L + r")" + end,
        re.I,
    )
    # "… the correct corresponding point is: (A) Point A"
    colon = re.compile(r"\b(?:is|are|be)\s*:\s*[\(\[](" + L + r")[\)\]]", re.I)
    # "I would choose (C)", "I'll go with B", "I would select Point C"
    chosen = re.compile(
        r"\bi(?: would|'d| will|'ll)? (?:choose|pick|select|go with)\s*:?\s*(?:"
        + _NOUN
        + r"\s+)?[\(\[]?("
        + L
        + r")"
        + end,
        re.I,
    )
    opening = (
        *((word, concluding) for word in ("therefore", "thus", "hence", "so,")),
        *((word, answer) for word in ("answer", "choice", "option", "response")),
    )
    return _DeclarationPlan(opening, answer, chosen, colon)


# the words a chosen letter follows, and where "i" may stand before them: "i ", "i'd ", "i'll ", "i will ", "i
# would " (the pattern has a space right before the word)
_CHOOSING = ("select", "choose", "pick", "go with")
_I_BEFORE = (-2, -4, -5, -7, -8)


_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _standalone(text: str, letters: str, start: int = 0, end: int | None = None) -> int:
    """Where the first of ``letters`` (capitals) with no ASCII letter on either side ("(B)", "is B.", "B")
    stands in ``text[start:end]``, or -1; the text ends at ``end`` (what follows is not looked at), not at
    ``start``. One ``str.find`` per letter: a regex opening with a character class visits every character,
    at about three times the cost."""
    end = len(text) if end is None else end
    first = limit = -1
    for letter in letters:
        at = text.find(letter, start, end if limit < 0 else limit)
        while at >= 0:
            if (at == 0 or text[at - 1] not in _ASCII_LETTERS) and (
                at + 1 == end or text[at + 1] not in _ASCII_LETTERS
            ):
                first = limit = at  # another letter counts only before this one
                break
            at = text.find(letter, at + 1, end if limit < 0 else limit)
    return first


def _last_standalone(text: str, letters: str, end: int) -> int:
    """Where the last of ``letters`` standing alone (no ASCII letter on either side, in the whole text) is
    before ``end``, or -1: one ``str.rfind`` per letter, each after the best so far."""
    last = -1
    for letter in letters:
        at = text.rfind(letter, last + 1, end)
        while at >= 0:
            if (at == 0 or text[at - 1] not in _ASCII_LETTERS) and (
                at + 1 == len(text) or text[at + 1] not in _ASCII_LETTERS
            ):
                last = at
                break
            at = text.rfind(letter, last + 1, at)
    return last


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
def _naming_patterns(valid: str) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """ "(B)" or "(B]"; "[B]" or "[B)"; "Point B", "box B"; and "(B)" alone. A bracketed letter is found with a
    pattern per opening bracket: a regex that opens with one character is scanned for it in C, about three
    times as fast as one that opens with a class of both brackets."""
    L = _letter_class(valid)
    return (
        re.compile(r"\((" + L + r")[\)\]]"),
        re.compile(r"\[(" + L + r")[\)\]]"),
        re.compile(r"\b" + _NAMED + r"\s*[\"'“(]?(" + L + r")\b", re.I),
        re.compile(r"\((" + L + r")\)"),
    )


def _find_mentions(text: str, lower: str, valid: str, start: int, end: int) -> list[tuple[int, int, str]]:
    """Where ``text[start:end]`` names a valid letter — "(B)", "[B]", "Point B", "box B" — as (start, end,
    letter) of the letter, in order (the third of ``_naming_patterns``, found from its nouns)."""
    paren, square, _, _ = _naming_patterns(valid)
    found = [(m.start(1), m.end(1), m.group(1)) for m in paren.finditer(text, start, end)]
    if "[" in text:
        found += [(m.start(1), m.end(1), m.group(1)) for m in square.finditer(text, start, end)]
    if end - start < 200:
        # a short range: one scan for all the nouns costs less than a str.find per noun (the same matches: no
        # noun opens another's match, nor is one the start of another)
        for m in _NAMED_LETTER.finditer(lower, start, end):
            if text[m.start(1)] in valid:
                found.append((m.start(1), m.end(1), text[m.start(1)]))
        return sorted(set(found))
    whole = start == 0 and end == len(lower)
    for noun, named in _NAMED_LETTERS:
        # a noun absent from the range names nothing there: one str.find costs far less than a finditer
        if (noun not in lower) if whole else lower.find(noun, start, end) < 0:
            continue
        for m in named.finditer(lower, start, end):
            if text[m.start(1)] in valid:
                found.append((m.start(1), m.end(1), text[m.start(1)]))
    return sorted(set(found))


# --- option texts ------------------------------------------------------------------------------------------

_WORD_GAP = r"[^\w]+(?:(?:a|an|the)[^\w]+)*"  # what normalising turns into one space: punctuation, articles
_ORDINAL = r"(?:first|second|third|fourth|fifth)"
# "A, B", "A or B", "(A), (B) and (C)"
_LIST_GAP = r"\)?(?:[ \t]*[,/&][ \t]*(?:(?:or|and)[ \t]+)?|[ \t]+(?:or|and)[ \t]+)"
_ORDINAL_IMAGE = re.compile(r"\b" + _ORDINAL + r" image\b")
_LABEL = re.compile(r"\b(?:point|box|picture|image|option|choice) letter[a-h]\b")
_LABEL_WORD = re.compile(r"letter([a-h])")


def _phrase_pattern(normalised: str, gap: str = r"[ \t]+") -> str:
    """A normalised option text as a pattern over the text as written: "point lettera" → "Point A" (the
    label's capital kept, the words in any case), ``gap`` between the words."""
    words = []
    for word in normalised.split():
        label = _LABEL_WORD.fullmatch(word)
        words.append("(?-i:" + label.group(1).upper() + ")" if label else "(?i:" + re.escape(word) + ")")
    return gap.join(words)


class _OptionTexts:
    """An item's option texts as one pattern over outputs as written, so that no output is normalised:
    "point lettera" matches "Point A" (the label's capital kept, the words in any case, punctuation and
    articles between them). Lists name every option they list: "the second or third image", "the second
    and third images", "box (A or B)", "points A, B, C and D"."""

    def __init__(self, options: tuple[str, ...]) -> None:
        self.options = options
        alternatives, starts = [], set()
        if any(_ORDINAL_IMAGE.search(o) for o in options):
            alternatives.append(
                f"(?P<first>{_ORDINAL})" + r"[ \t,]+(?:or|and)[ \t]+(?:the[ \t]+)?" + f"(?P<then>{_ORDINAL})"
                r"[ \t]+images?(?!\w)"
            )
            starts |= {"first", "second", "third", "fourth", "fifth"}
        if any(_LABEL.search(o) for o in options):
            alternatives.append(
                r"(?P<noun>point|box|picture|image|option|choice)s?[ \t,:]*\(?"
                r"(?P<listed>(?-i:[A-H])(?:" + _LIST_GAP + r"\(?(?-i:[A-H]))+)(?!\w)"
            )
            starts |= {"point", "box", "picture", "image", "option", "choice"}
        for k, option in sorted(enumerate(options), key=lambda x: -len(x[1])):
            if option:
                alternatives.append(f"(?P<o{k}>{_phrase_pattern(option, _WORD_GAP)}(?!\\w))")
                first = option.split()[0]
                label = _LABEL_WORD.fullmatch(first)
                starts.add(label.group(1) if label else first)
        self.pattern = re.compile("|".join(f"(?:{a})" for a in alternatives), re.I)
        self.starts = tuple(sorted(starts))  # every match opens with one of these words

    def hits(self, text: str, lower: str | None = None, most: int = 0) -> set[str]:
        """The letters of the options the text names. ``lower``: the text's lower case, where the caller has it
        (ASCII text); with ``most``, the reading stops once it has found more letters than that (a caller that
        needs exactly one learns no more from the rest of a long output)."""
        lower = text.lower() if lower is None else lower
        if len(lower) != len(text):  # the rare characters whose lower case is longer: scan it whole
            return self._read(self.pattern.finditer(text))
        matches = []
        found: set[str] = set()
        for word in self.starts:
            at = lower.find(word)
            while at >= 0:
                if at == 0 or not (lower[at - 1].isalnum() or lower[at - 1] == "_"):
                    m = self.pattern.match(text, at)
                    if m and most:
                        found |= self._read((m,))
                        if len(found) > most:
                            return found
                    elif m:
                        matches.append(m)
                at = lower.find(word, at + 1)
        return found if most else self._read(matches)

    def _read(self, matches: Iterable[re.Match[str]]) -> set[str]:
        found = set()
        for m in matches:
            kind = str(m.lastgroup)
            if kind == "then":  # "the second or third image"
                named = {f"{m.group('first').lower()} image", f"{m.group('then').lower()} image"}
            elif kind == "listed":  # "box (A or B)"
                noun = m.group("noun").lower()
                named = {f"{noun} letter{x.lower()}" for x in _CAPITAL.findall(m.group("listed"))}
            else:
                found.add(LETTERS[int(kind[1:])])
                continue
            found |= {LETTERS[k] for k, o in enumerate(self.options) if o in named}
        return found


@lru_cache(maxsize=256)
def _option_texts(options: tuple[str, ...]) -> _OptionTexts | None:
    return _OptionTexts(options) if any(options) else None


# what may stand between a label and the bracketed letter after it: a quote, spaces, a comma, colon or dash
_LABEL_TAIL = "\"'”’ \t,:-–—"


class _Labels:
    """What a bracketed letter may label, for a set of normalised options: an option's text (group ``o<k>``)
    or an ordinal image (group ``image``, where the options are images), right after the letter ("(B) the
    third image") or right before it ("the third image (C)")."""

    def __init__(self, options: tuple[str, ...]) -> None:
        self.options = options
        self.phrases = {f"o{k}": o for k, o in enumerate(options) if o}  # an option's group: its text
        phrases = [f"(?P<o{k}>{_phrase_pattern(o)})" for k, o in enumerate(options) if o]
        # the word each label ends with, for a test before the search for one before a letter: the words in any
        # case (lower-cased here), a label's capital as written
        last = [o.split()[-1] for o in options if o]
        if any("image" in o for o in options):
            phrases.append(r"(?P<image>(?i:first|second|third|fourth|fifth)[ \t]+(?i:image))")
            last.append("image")
        either = "|".join(phrases)
        self.after = re.compile(r"[ \t]*[:\-–—]?[ \t]*[\"'“‘]?(?:(?i:the|an?)[ \t]+)?(?:" + either + r")(?!\w)")
        self.before = re.compile(r"(?<!\w)(?:" + either + r")[\"'”’]?[ \t]*[,:\-–—]?[ \t]*\Z")
        labels = [_LABEL_WORD.fullmatch(word) for word in last]
        self.capitals = tuple(label.group(1).upper() for label in labels if label)
        self.words = tuple(word for word, label in zip(last, labels) if not label)
        # On ASCII text an ASCII word matches case-insensitively exactly where its lower case does (the engine's
        # case folding also pairs "s" with "ſ", "k" with "K"): only then is the test exact.
        self.ascii = all(word.isascii() for word in self.words)

    def label_before(self, text: str, at: int, ascii: bool) -> re.Match[str] | None:
        """The label ending right before the bracket at ``at`` (within 40 characters), if any."""
        start = max(0, at - 40)
        if ascii and self.ascii:
            # A label ends with a word character and only _LABEL_TAIL follows it: without one of the words
            # (or capitals) it ends with right before that tail, there is none (the regex search tries every
            # position of the window).
            head = text[start:at].rstrip(_LABEL_TAIL)
            if not (head.lower().endswith(self.words) or head.endswith(self.capitals)):
                return None
        return self.before.search(text, start, at)

    def labelled(self, label: re.Match[str]) -> str:
        """The normalised text a label match names (an option's, or "third image")."""
        if label.lastgroup == "image":
            return " ".join(label.group("image").lower().split())
        return self.options[int(str(label.lastgroup)[1:])]


@lru_cache(maxsize=256)
def _labels(options: tuple[str, ...]) -> _Labels | None:
    return _Labels(options) if any(options) else None


# --- one output, prepared once ------------------------------------------------------------------------------

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
    what only some rules need (sentences, lower case, the letters named) is computed on first use."""

    text: str
    valid: str
    options: tuple[str, ...]  # normalised option texts ("" where unknown)

    @_computed_once
    def lower(self) -> str:
        """Lower case at the same offsets as ``text`` (a match found here is read there): the rare characters
        whose lower case is longer ("İ") keep their case."""
        lower = self.text.lower()
        if len(lower) != len(self.text):
            lower = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in self.text)
        return lower

    @_computed_once
    def spans(self) -> tuple[tuple[int, int], ...]:
        """The sentences, as spans of ``text`` (the empty ones left out)."""
        return _sentence_spans(self.text)

    @_computed_once
    def first_sentence(self) -> str:
        """The first sentence, without splitting the whole output (the text is stripped: never empty)."""
        return _first_sentence(self.text)

    @_computed_once
    def mentions(self) -> tuple[tuple[int, int, str], ...]:
        """Every valid letter the output names (``_find_mentions``)."""
        return tuple(_find_mentions(self.text, self.lower, self.valid, 0, len(self.text)))

    def mentions_between(self, start: int, end: int) -> list[tuple[int, int, str]]:
        if "mentions" in self.__dict__:
            return [m for m in self.mentions if start <= m[0] < end]
        return _find_mentions(self.text, self.lower, self.valid, start, end)

    def named(self, start: int = 0, end: int | None = None) -> set[str]:
        """Valid letters named between ``start`` and ``end``; a list names each letter it lists ("box (A or
        B)", "options (A, B, C, D)")."""
        end = len(self.text) if end is None else end
        found = {letter for _, _, letter in self.mentions_between(start, end)}
        if found:
            for listed in _LETTER_LIST.finditer(self.text, start, end):
                found |= set(listed.group(0)) & set(self.valid)
        return found

    @_computed_once
    def letters_conflict(self) -> bool:
        """The output letters things its own way: a bracketed letter beside a text that is not that letter's
        option, "the second image (B)" or "(B) the second image" where the option "the second image" is A
        (models often letter the images themselves, the first image A). Then a valid letter may be the
        output's own label, not the option: neither says which option was meant. A label only with letters
        the item does not have ("the third image (C)" of two options) leaves the valid letters meaning the
        options, but only where the output also pairs a letter with its own option text ("(B) the third
        image")."""
        text = self.text
        if "(" not in text:
            return False
        labels = _labels(self.options)
        if labels is None:
            return False
        after, valid, ascii = labels.after, self.valid, text.isascii()
        paired = own_letters = False
        for m in _BRACKETED_LETTER.finditer(text):
            label = after.match(text, m.end()) or labels.label_before(text, m.start(), ascii)
            if label is None:
                continue
            letter = m.group(1)
            phrase = labels.phrases.get(str(label.lastgroup)) or labels.labelled(label)
            if letter in valid and self.options[valid.index(letter)] == phrase:
                paired = True
            elif letter in valid:
                return True
            else:
                own_letters = True
        return own_letters and not paired

    @_computed_once
    def first_capital(self) -> int:
        """Where the first valid capital standing alone is (-1: none). Every letter a rule reads is one, so
        without any only the option texts can decide."""
        return _standalone(self.text, self.valid)

    @_computed_once
    def lead(self) -> tuple[str, str] | None:
        """The letter the output opens with, and the text after it (``_find_lead``)."""
        return _find_lead(self)

    @_computed_once
    def option_texts(self) -> _OptionTexts | None:
        return _option_texts(self.options)

    def option_hits(self, sentence: str, most: int = 0) -> set[str]:
        return self.option_texts.hits(sentence, most=most) if self.option_texts else set()


# ``ChoiceText.letters_conflict`` itself: only ``conflicting_letters`` reads it, once, without the descriptor's call
_letters_conflict = ChoiceText.__dict__["letters_conflict"].compute


# --- the rules ----------------------------------------------------------------------------------------------


# A refusal of something the question did not ask, then an answer: BLINK's prompts carry a disclaimer about
# the people shown, and models open with "I cannot make assumptions about the identity of the people in the
# images. However, … Therefore, my answer is (A)". Such an opening leaves the rest to the other rules.
_SCOPED_REFUSAL = re.compile(
    r"\b(?:assumptions?|judgments?|judgements?|identity|identify|personal opinions?|authenticate)\b"
)
_TURN = re.compile(r"\b(?:however|but)\b")


# What an output opening with a letter or digit must open with to refuse ("I", "Sorry", "Unable", "As an AI",
# "There is no", "None of"): ASCII letters fold only to each other, so any other opens no refusal.
_REFUSAL_OPENING = frozenset("iIsSuUaAtTnN")
_WORD_OPENING = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def refusal(c: ChoiceText) -> bool | str | None:
    opening = c.text[0]
    if opening in _WORD_OPENING and opening not in _REFUSAL_OPENING:
        return None  # "Based on …" (a bracket or space opening goes to the regex: "\W*+" passes over it)
    if not _REFUSAL.match(c.text):  # anchored: "search" would try every position
        return None
    return None if disclaims_only(c.first_sentence.lower(), c.lower[len(c.first_sentence) :]) else False


def disclaims_only(first: str, rest: str) -> bool:
    """Whether a refusing first sentence only disclaims (the people's identity, personal opinions) and the
    output turns to an answer after it ("However, based on …")."""
    return bool(_SCOPED_REFUSAL.search(first) and (_TURN.search(first) or _TURN.search(rest, 0, 200)))


def conflicting_letters(c: ChoiceText) -> bool | None:
    return False if _letters_conflict(c) else None


def declaration(c: ChoiceText) -> bool | str | None:
    # Letters must be capitals in the text: "the answer is a pen" does not read as "A".
    if c.first_capital < 0:
        return None
    found = _declarations(c)
    if not found:
        return None
    at, letter = max(found)
    declared = {x for _, x in found}
    if len(declared) > 2:
        return False  # "the answer is (A) … the answer is (B) … the answer is (C)": one per option, none chosen
    # "… might be (A)": without "be" in the window (one str.find) the pattern cannot match there
    hedged = c.lower.find("be", max(0, at - 24), at + 8) >= 0 and _HEDGED_VERB.search(c.lower, max(0, at - 24), at + 8)
    if (hedged or len(declared) > 1 and _HEDGE.search(c.lower)) and len(c.named()) > 1:
        return False  # "it might be (A) … but the answer could be (C)": two answers, hedged: never guess
    if _concludes_several(c, at, letter):
        return False  # "… the answer is (B). So, the corresponding points are (B) and (C).": no one answer
    return letter


def _declarations(c: ChoiceText) -> list[tuple[int, str]]:
    """Every declaration in the output, as (where it starts, its letter), in no order."""
    text, lower, valid = c.text, c.lower, c.valid
    plan = _declaration_plan(valid)
    found = _opening_declarations(text, lower, valid, plan.opening)
    for word in _CHOOSING:
        if word in lower:  # rare words: most outputs hold none
            found += _chosen_declarations(text, lower, valid, word, plan)
    if ":" in lower:
        found += _colon_declarations(text, lower, valid, plan.colon)
    return found


def _opening_declarations(
    text: str, lower: str, valid: str, opening: tuple[tuple[str, re.Pattern[str]], ...]
) -> list[tuple[int, str]]:
    """The declarations that open with a word ("therefore", "answer", …); ``_declares`` written out, as this
    runs for most long outputs."""
    found = []
    find = lower.find
    for word, pattern in opening:
        if word not in lower:  # most words are absent: "in" costs less than a call of find
            continue
        at = find(word)
        while at >= 0:
            m = pattern.match(text, at)
            if m is not None:
                group = m.lastindex or 1
                letter = m.group(group)
                if letter.isupper() and not _opens_list(text, m.end(group), letter, valid):
                    found.append((at, letter))
            at = find(word, at + 1)
    return found


def _chosen_declarations(text: str, lower: str, valid: str, word: str, plan: _DeclarationPlan) -> list[tuple[int, str]]:
    """ "I would choose (C)" at each ``word`` of ``_CHOOSING``; "the selection is B" at each "select"."""
    found = []
    at = lower.find(word)
    while at >= 0:
        if word == "select":
            m = plan.answer.match(text, at)
            if m is not None and _declares(m, text, valid):
                found.append((at, m.group(1)))
        if at >= 2 and text[at - 1] == " ":  # the pattern's space before the word
            for k in _I_BEFORE:
                if at + k >= 0:
                    m = plan.chosen.match(text, at + k)
                    if m is not None and _declares(m, text, valid):
                        found.append((m.start(), m.group(1)))
        at = lower.find(word, at + 1)
    return found


def _colon_declarations(text: str, lower: str, valid: str, colon: re.Pattern[str]) -> list[tuple[int, str]]:
    """A colon is a declaration only when a bracketed letter follows it (up to six spaces on): "… is: (A)"; the
    letter right after the bracket, a valid capital, or none is declared there."""
    found = []
    for bracket in _COLON_BRACKET.finditer(lower):
        after = bracket.end()
        if after == len(text) or text[after] not in valid:
            continue
        for start in _verb_before_colon(text, bracket.start()):
            m = colon.match(text, start) if start >= 0 else None
            if m and _declares(m, text, valid):
                found.append((m.start(), m.group(1)))
    return found


# a colon with a bracket among the next seven characters, after spaces only: "is: (A)", "is:\n\n(D)"
_COLON_BRACKET = re.compile(r":\s{0,6}[(\[]")


def _declares(m: re.Match[str], text: str, valid: str) -> bool:
    """Whether a declaration pattern's match declares: its letter a capital, not opening a list of the
    options."""
    group = m.lastindex or 1
    letter = m.group(group)
    return letter.isupper() and not _opens_list(text, m.end(group), letter, valid)


def _opens_list(text: str, end: int, letter: str, valid: str) -> bool:
    """Whether the letter at ``end`` opens a list of the options ("The choices are:\n(A) Point A\n(B) Point B"):
    the next line starts with another letter."""
    line_end = text.find("\n", end)
    if line_end < 0:
        return False
    following = _LIST_ITEM.match(text, line_end)
    return following is not None and following.group(1) != letter and following.group(1) in valid


_LIST_ITEM = re.compile(r"\s*[-*]?\s*(?:option\s+)?[\(\[]?([A-H])[\)\]\.:]", re.I)


def _two_capitals(text: str, letters: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds two different ``letters``."""
    seen = False
    for letter in letters:
        if text.find(letter, start, end) >= 0:
            if seen:
                return True
            seen = True
    return False


def _concludes_several(c: ChoiceText, after: int, letter: str) -> bool:
    """Whether a concluding sentence after the one at ``after`` (declaring ``letter``) names several options
    together as its answer: "So, the corresponding points are (B) Point B and (C) Point C."."""
    text = c.text
    for other in c.valid:  # one str.find per letter, in C
        if other != letter and text.find(other, after) >= 0:
            break
    else:
        return False  # most declarations come last: nothing after them names another letter
    breaks = _breaks(text, after)
    for start, end in _pieces(text, breaks[1:], breaks[0][1]) if breaks else ():
        if not _two_capitals(text, c.valid, start, end):
            continue  # a sentence names two letters only where it holds two (str.find, in C)
        mentions = c.mentions_between(start, end)
        if len({letter for _, _, letter in mentions}) < 2:
            continue
        sentence = c.lower[start:end]
        if _CONCLUSION.search(sentence) and not _CONTRAST.search(sentence) and _several_together(text, mentions):
            return True
    return False


_JOINED = re.compile(r"(?:\s|,|&|\band\b|\bor\b|\bpoints?\b|\bpictures?\b|\bboxe?s?\b|\boptions?\b|[A-H]|[()])*", re.I)
_JOINING = re.compile(r",|&|\band\b|\bor\b", re.I)


def _several_together(text: str, mentions: list[tuple[int, int, str]]) -> bool:
    """Two different letters with only "and", "or", commas and their own labels between them: "(A) and (B)",
    "Point A and Point B", "(B) Point B and (C) Point C"."""
    for (_, end, first), (start, _, second) in zip(mentions, mentions[1:]):
        gap = text[end:start]
        if first != second and _JOINED.fullmatch(gap) and _JOINING.search(gap):
            return True
    return False


def _lead_letter(c: ChoiceText) -> tuple[str, str] | None:
    """The letter the output opens with, and the text after it ("B\nThe second image …")."""
    return c.lead


def _find_lead(c: ChoiceText) -> tuple[str, str] | None:
    opening = c.text[0]
    if opening in _WORD_OPENING and opening not in "oc" and opening not in c.valid:
        return None  # "Based on …": the pattern opens with spaces, "option", "choice", a bracket or the letter
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
    statement = _first_sentence(rest.lstrip(" )].:,\n"))
    hits = c.option_hits(statement, most=1)  # one option or not: two letters are enough to know
    return False if len(hits) == 1 and letter not in hits and not _NEGATION.search(statement.lower()) else None


def leading(c: ChoiceText) -> str | None:
    lead = _lead_letter(c)
    return lead[0] if lead else None


def sole_paren(c: ChoiceText) -> str | None:
    if c.first_capital < 0:
        return None  # a valid letter in brackets is a capital standing alone
    parens = {m.group(1) for m in _naming_patterns(c.valid)[3].finditer(c.text)}
    return parens.pop() if len(parens) == 1 else None


def lead_subject(c: ChoiceText) -> str | None:
    if c.first_capital < 0:
        return None  # no capital standing alone: the first sentence names no letter (and is not looked for)
    first_sentence = c.first_sentence
    if c.first_capital >= len(first_sentence):
        return None
    first = _lead_subject(c.valid).match(first_sentence)
    named = c.named(0, len(first_sentence))
    if first and first.group(1).isupper() and named <= {first.group(1)}:
        return first.group(1)
    if len(named) == 1 and not first_sentence.rstrip().endswith(":") and not _NEGATION.search(first_sentence.lower()):
        return named.pop()
    return None


def option_text_lead(c: ChoiceText) -> bool | str | None:
    if not any(c.options):
        return None
    hits = c.option_hits(c.first_sentence, most=1)  # one option or not: two letters are enough to know
    if len(hits) != 1 or _NEGATION.search(c.lower, 0, len(c.first_sentence)):
        return None
    # "The first image shows a wok, while the second image is empty. … Therefore, the third image is most
    # similar": the opening sentence describes; a concluding one naming another option contradicts it.
    concluded = _concluded_options(c)
    return False if concluded and concluded != hits else hits.pop()


def _concluded_options(c: ChoiceText) -> set[str]:
    """The options the last concluding sentence that names any option names by text."""
    for start, end in reversed(c.spans[1:]):
        hits = c.option_hits(c.text[start:end])
        if hits and _CONCLUSION.search(c.lower, start, end) and not _CONTRAST.search(c.lower, start, end):
            return hits
    return set()


def conclusion(c: ChoiceText) -> bool | str | None:
    if c.first_capital < 0:
        return None
    mentions = c.mentions
    if not mentions:
        return None
    spans = c.spans
    # the sentences that name a letter, last first (each mention falls in one sentence)
    k = len(spans) - 1
    for at, _, _ in reversed(mentions):
        while k >= 0 and spans[k][0] > at:
            k -= 1
        if k < 0:
            break
        start, end = spans[k]
        if at >= end:
            continue
        # "The third image (B) is an illustration and thus differs …" concludes against B, not for it.
        if _CONCLUSION.search(c.lower, start, end) and not _CONTRAST.search(c.lower, start, end):
            named = c.named(start, end)  # only for the sentence that concludes
            return named.pop() if len(named) == 1 else None
        k -= 1
    return None


def option_text(c: ChoiceText) -> str | None:
    if not any(c.options) or c.option_texts is None:
        return None
    # the whole output's lower case is at hand where it is ASCII; two letters found are enough to say "not one"
    hits = c.option_texts.hits(c.text, c.lower if c.text.isascii() else None, most=1)
    return hits.pop() if len(hits) == 1 else None


def named_letter(c: ChoiceText) -> str | None:
    if c.first_capital < 0:
        return None
    named = c.named()
    return named.pop() if len(named) == 1 else None


# A lone word in another language that names one option's text: "左" where the options are "left" and
# "right". BLINK's released outputs hold 266 "左" (official: "left"); only these exact words are read, and
# only when exactly one option is that text, so nothing is translated by guess.
_OPTION_WORDS = {
    "左": "left",
    "右": "right",
    "左边": "left",
    "右边": "right",
    "是": "yes",
    "否": "no",
    "是的": "yes",
    "不是": "no",
    "はい": "yes",
    "いいえ": "no",
}


def option_word(c: ChoiceText) -> str | None:
    """ "左" where one option is "left": a lone foreign word whose translation is exactly one option's text."""
    word = _OPTION_WORDS.get(c.text.rstrip("。.!！ "))
    if word is None or not any(c.options):
        return None
    hits = [c.valid[k] for k, option in enumerate(c.options) if option == word]
    return hits[0] if len(hits) == 1 else None


_HEDGED = re.compile(r"\b(?:not|no|neither|nor|cannot|can't|unable|if|could|might|may)\b")


# The comparisons BLINK's questions ask ("Which point is closer to the camera?", "Which point has darker
# surface color?", "Which bounding box more accurately localizes …?"): only these read as the answer, so "A
# is further away than B" answers nothing.
_ASKED = r"(?:closer|nearer|darker|more\s+accurate(?:ly)?)"
_ASKED_WORDS = ("closer", "nearer", "darker", "accurate")
# what may follow the letter: "(circled on the cup)", ", which is on the cup,", " which is circled on the cup"
_ASIDE = r"(?:\s*\([^)]*\)|,[^,.]*,|\s+(?:which|that)\s+[^,.]*?(?=\s+(?:is|appears|seems|has)\b))?"
# "is closer", "appears to be slightly closer", "has a darker", "more accurately localizes"
_IS_ASKED = r"(?:\s+(?:is|appears|seems|has)\b(?:\s+to\s+be)?\s+(?:\w+\s+){0,2}?" + _ASKED + r"|\s+more\s+accurately)\b"


@cache
def _compared_pattern(valid: str) -> re.Pattern[str]:
    """ "Point A is closer to the camera than point B", "point B appears darker than at point A", "… closer
    to the camera compared to the man on the right (point B)", "box B more accurately localizes … than box A",
    "that B is closer to the camera than A" (the letters are capitals: "than a" is not "than A")."""
    L = "(?-i:[" + valid + "])"
    return re.compile(
        r"(?:\b(?:point|box)\s+|\b)(" + L + r")\b" + _ASIDE + _IS_ASKED + r"[^.]*?\b"
        r"(?:than|compared\s+to|compared\s+with)\s+(?:at\s+|of\s+)?(?:(?:the\s+)?\w+\s+(?:on\s+the\s+\w+\s+)?\(\s*)?"
        r"(?:(?:point|box)\s+)?(" + L + r")\b",
        re.I,
    )


@cache
def _opening_comparison(valid: str) -> re.Pattern[str]:
    """ "Box A more accurately localizes …", "Point B is closer to the camera." opening the output."""
    L = "(?-i:[" + valid + "])"
    return re.compile(r"\s*(?:the\s+)?(?:bounding\s+)?(?:point|box)\s+(" + L + r")\b" + _ASIDE + _IS_ASKED, re.I)


@cache
def _concluded_comparison(valid: str) -> re.Pattern[str]:
    """ "Therefore, point B is likely closer to the camera than point A", "So A is closer to the camera"."""
    L = "(?-i:[" + valid + "])"
    return re.compile(
        r"(?:therefore|thus|hence|so|in conclusion),?\s+(?:the\s+)?(?:point\s+|box\s+)?("
        + L
        + r")\b"
        + _ASIDE
        + _IS_ASKED
        + r"(?![^.]*\bthan\s+(?:at\s+)?(?:point|box)\s+\1\b)",
        re.I,
    )


def _compares(sentence: str, valid: str) -> str | None:
    """The letter a sentence says is more so than another ("Point A is closer … than point B"), unhedged."""
    m = _compared_pattern(valid).search(sentence)
    if m and m.group(1) != m.group(2) and not _HEDGED.search(sentence.lower()):
        return m.group(1)
    return None


def compared_subject(c: ChoiceText) -> str | None:
    """The first sentence compares one letter with another and the first is its subject: "Point A is closer
    to the camera than point B." answers A (BLINK's relative depth and reflectance questions ask just that);
    else the last sentence, when it concludes so ("Therefore, point B is likely closer to the camera than
    point A."). A hedge or negation in the sentence ("if", "not", "might") keeps it from deciding."""
    if c.first_capital < 0 or not _holds_any(c.lower, _ASKED_WORDS):
        return None  # most outputs: no letter, or none of the words compared
    first = _compares(c.first_sentence, c.valid)
    if first or not c.spans:
        return first
    # "Box A more accurately localizes and encloses the bench because …": the question's own words, said
    # of the letter the answer opens with
    opening = _opening_comparison(c.valid).match(c.first_sentence)
    if opening and not _HEDGED.search(c.first_sentence.lower()):
        return opening.group(1)
    start, end = c.spans[-1]
    last = c.text[start:end]
    m = _concluded_comparison(c.valid).match(last.lstrip())
    if m and (_compares(last, c.valid) == m.group(1) or c.named(start, end) <= {m.group(1)}):
        return None if _HEDGED.search(last.lower()) else m.group(1)
    return None


@cache
def _final_patterns(
    valid: str,
) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """ "… is Point B", "… is (B)"; "… is A." or "…, which is labeled C." closing the sentence; "option (B) is
    the most consistent"; "… is labeled A on the second image"; a sentence opening with the letter
    ("**(A) the first image**, as …", "- Option (C) - the clover") after a line ending in a colon."""
    L = "(?-i:[" + valid + "])"
    return (
        re.compile(
            r"\b(?:is|would be|be|lean towards|go with|choose|select|pick)\s*:?\s*(?:the\s+)?"
            r"(?:point|box|picture|option|choice|image)?\s*[\"'“(]?(" + L + r")\b",
            re.I,
        ),
        re.compile(
            r"\b(?:is|would be|labell?ed|marked|labell?ed (?:with|as)|circled with|marked with)\s*:?\s*"
            r"(?:the\s+letter\s+)?[\"'“]?(" + L + r")[\"'”]?\s*[.!]?[\"'”]?\s*\Z"
        ),
        re.compile(
            r"(?:\b(?:point|box|picture|option|choice|image)\s*|[(\[])(" + L + r")\b[)\]]?\s+"
            r"(?:the\s+\w+\s+image\s+)?(?:is|would be|seems to be|appears to be)\s+(?:the\s+)?"
            r"(?:(?:slightly|much|somewhat)\s+)?(?:most|best|correct|right|only|closer|more\s+similar)\b",
            re.I,
        ),
        re.compile(
            r"\b(?:is|would be)\s+(?:labell?ed|marked|circled)\s+(?:as\s+|with\s+)?(?:the\s+letter\s+)?[\"'“]?("
            + L
            + r")[\"'”]?(?![\w'’])",
            re.I,
        ),
        re.compile(r"\s*(?:[-*•]\s*)?(?:option\s+|choice\s+)?[(\[](" + L + r")[)\]]", re.I),
    )


_COMPARING = re.compile(r"\b(?:than|compared)\b")
# a line that announces the answer on the next: "So, the answer is:", "I would lean towards:"
_ANNOUNCING = re.compile(
    r"\b(?:answer|choice|option|match|would be|is|lean towards|choose|select|pick|go with)\s*:\s*$|"
    r"\b(?:answer|choice|option|match)\b[^:]*:\s*$"
)
# "if I had to choose", "if forced to pick": a model asked to choose, choosing; not a hedge on what it chose
_FORCED = re.compile(
    r"\bif (?:i|we|one|you) (?:had|have|must|were|was|are)(?: to)? (?:choose|pick|select)|"
    r"\bif forced to (?:choose|pick)|\b(?:might|may|could) (?=lean towards)"
)


def _hedged(lower: str, start: int, end: int) -> bool:
    """Whether ``lower[start:end]`` hedges or negates (``_HEDGED``), "if I had to choose" aside."""
    if not _HEDGED.search(lower, start, end):
        return False
    return bool(_HEDGED.search(_FORCED.sub(" ", lower[start:end])))


def _ends_with_letter(text: str, start: int, end: int, valid: str) -> bool:
    """Whether ``text[start:end]`` ends as the second of ``_final_patterns`` must: a valid capital, then at most
    a quote, spaces, "." or "!", a quote and spaces (peeled from the end, in the pattern's order)."""
    k = end
    while k > start and text[k - 1].isspace():  # ``\s`` is what str.isspace() holds
        k -= 1
    if k > start and text[k - 1] in "\"'”":
        k -= 1
    if k > start and text[k - 1] in ".!":
        k -= 1
    while k > start and text[k - 1].isspace():
        k -= 1
    if k > start and text[k - 1] in "\"'”":
        k -= 1
    return k > start and text[k - 1] in valid


def _holds_label_word(lower: str, start: int, end: int) -> bool:
    """Whether ``lower[start:end]`` holds a word the fourth of ``_final_patterns`` needs ("labeled", "marked",
    "circled"); exact on ASCII text, where the pattern's case folding is the lower case."""
    return (
        lower.find("label", start, end) >= 0
        or lower.find("marked", start, end) >= 0
        or (lower.find("circled", start, end) >= 0)
    )


def _names_another_letter(c: ChoiceText, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` names a letter the item does not have ("(E)", "point E" of four)."""
    if c.valid == LETTERS:
        return False
    for letter in LETTERS[len(c.valid) :]:
        if c.text.find(letter, start, end) >= 0:
            break
    else:
        return False  # such a letter is a capital in the sentence
    return any(letter not in c.valid for _, _, letter in _find_mentions(c.text, c.lower, LETTERS, start, end))


def final_statement(c: ChoiceText) -> str | None:
    """The last sentence that names letters names one, and states it: "… the corresponding point in the
    second image is Point A, as it is also on the face of the hammer.", "The corresponding point for the
    reference point is A.", "Based on the pattern, option (B) is the most consistent choice." A hedge or
    negation in that sentence ("either", "not", "could") keeps it from deciding; so does an earlier rule
    that found the output ambiguous (this one comes last)."""
    if c.first_capital < 0:
        return None  # every letter this rule reads is a capital standing alone
    said, closing, subject, labelled, after_colon = _final_patterns(c.valid)
    text, spans = c.text, c.spans
    ascii = text.isascii()
    # the last capital standing alone before the sentence's end: a sentence without one names nothing, and
    # those are passed over without a look (a capital's neighbours are read in the whole text: a sentence
    # ends before a space or a line break)
    capital = _last_standalone(text, LETTERS, len(text))
    for k in range(len(spans) - 1, -1, -1):
        start, end = spans[k]
        if capital < start:
            continue
        capital = _last_standalone(text, LETTERS, start)
        named = c.named(start, end)
        if _names_another_letter(c, start, end):
            return None  # "Therefore, the answer is (E)." on four options: the last word is no valid answer
        # "… is A.": a bare capital ending the sentence, not the other side of a comparison ("… closer to the
        # camera than the boy labeled "B"."). Each pattern is searched only where the sentence can hold it (the
        # search tries every position): one that ends with a valid capital, one with the word labelled by.
        closed = closing.search(text, start, end) if _ends_with_letter(text, start, end, c.valid) else None
        if closed is None and (not ascii or _holds_label_word(c.lower, start, end)):
            closed = labelled.search(text, start, end)
        if closed and named <= {closed.group(1)} and not _COMPARING.search(c.lower, start, end):
            return None if _hedged(c.lower, start, end) else closed.group(1)
        if not named:
            continue
        if len(named) != 1:
            return None
        letter = named.pop()
        last = None
        for found in said.finditer(text, start, end):
            last = found  # the last statement in the sentence
        stated = last if last and last.group(1) == letter else subject.search(text, start, end)
        # a hedge up to the statement undoes it; after it ("… because it shares more, though not …") it
        # qualifies a reason, and another option named there would have stopped us above
        if stated and stated.group(1) == letter and not _hedged(c.lower, start, stated.end()):
            return letter
        # "… I would lean towards:\n\n(A) the first image, as it …": the answer opens the sentence after a
        # line that announces it
        opening = after_colon.match(text, start, end)
        if opening and opening.group(1) == letter and k and text[:start].rstrip().endswith(":"):
            before = c.spans[k - 1]
            if _ANNOUNCING.search(c.lower, *before) and not _hedged(c.lower, before[0], opening.end()):
                return letter
        return None
    return None


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
    # Last, so that they read only what every rule above left open (issue 45: no earlier reading changes).
    option_word,
    compared_subject,
    final_statement,
)

# "B", "(B)", "B.", "(B) the third image", "B) the third image." (the text is stripped)
_BARE_LETTER = re.compile(r"[\(\[]?([A-H])(?:[\)\]]?\.?\Z|[\)\]\.:]\s*(.*?)\.?\Z)", re.S)
# "b", "(e)", "b.", "[c]": a lone lower-case letter, which every official script reads as that letter (MVP-Bench
# compares case-insensitively, BLINK's judge and MME-RealWorld's option match land on it)
_BARE_LOWER = re.compile(r"[\(\[]?([a-h])[\)\]]?\.?\Z")
_DECLARATION_WORDS = (*(word for word, _ in _declaration_plan(LETTERS).opening), *_CHOOSING, ":", "i ")


def _holds_any(text: str, words: tuple[str, ...]) -> bool:
    for word in words:  # a plain loop: any() over a generator costs half as much again here
        if word in text:
            return True
    return False


@cache
def _result(value: str | None, method: str) -> Extraction:
    """One shared (immutable) Extraction per answer and rule: creating a frozen dataclass costs more than
    reading most outputs."""
    return Extraction(value, method)


_BARE_FORMS = {
    form.format(x): Extraction(x, "leading") for x in LETTERS for form in ("{}", "({})", "{}.", "({}).", "{})", "[{}]")
}


def extract_choice(output: str | None, n_options: int = 4, options: Sequence[str] | None = None) -> Extraction:
    """The chosen letter among the first ``n_options`` letters, or unparsed."""
    if output is None:
        return UNPARSED_EMPTY
    text = output if isinstance(output, str) else str(output)
    if len(text) < 100:
        if len(text) <= 4:
            known = _BARE_FORMS.get(text)  # "A", "(B)", "C.": a third of all outputs
            if known is not None and str(known.value) in LETTERS[:n_options]:
                return known
        # Models repeat their short answers ("(A) Point A", "(A) A is closer to the camera."): each is read
        # once per process
        key = (text, n_options, tuple(options) if options else None)
        known = _SHORT.get(key)
        if known is None:
            if len(_SHORT) >= _SHORT_MAX:
                _SHORT.clear()
            known = _SHORT[key] = _extract_text(text, n_options, options)
        return known
    return _extract_text(text, n_options, options)


def _extract_text(text: str, n_options: int, options: Sequence[str] | None) -> Extraction:
    if "*" in text or "_" in text or "`" in text:  # markdown emphasis, rare: removed as _MD.sub("", text) would
        text = text.replace("*", "").replace("_", "").replace("`", "")  # a regex visits every character
    if "（" in text:  # full-width brackets: "（C）Point C"
        text = text.replace("（", "(").replace("）", ")")
    text = text.strip()
    if text.startswith("<s>"):  # the tokenizer's markers some released outputs keep
        text = text[3:].lstrip()
    if text.endswith("</s>"):
        text = text[:-4].rstrip()
    if not text:
        return UNPARSED_EMPTY
    valid = LETTERS[:n_options]
    if len(text) < 48:
        return _extract_short(text, valid, options)
    return _extract(text, valid, options)


# short outputs already read: (output, n_options, options) → Extraction; cleared when full, so bounded
_SHORT: dict[tuple, Extraction] = {}
_SHORT_MAX = 20_000


def _remembered(key: tuple, read: Callable[[], Extraction]) -> Extraction:
    """What ``read`` gives for a short output, read once per process (bounded)."""
    remembered = _SHORT.get(key)
    if remembered is None:
        if len(_SHORT) >= _SHORT_MAX:
            _SHORT.clear()
        remembered = _SHORT[key] = read()
    return remembered


def forget_short_outputs() -> None:
    """Forget the short outputs read (a benchmark clears them before each pass it times)."""
    _SHORT.clear()


def _extract_short(text: str, valid: str, options: Sequence[str] | None) -> Extraction:
    # Most outputs are a letter, or a letter and its option's text (or, options unknown, a short phrase
    # without a declaration's words): no other rule could decide them otherwise.
    bare = _BARE_LETTER.match(text)
    if bare and bare.group(1) in valid:
        rest = bare.group(2)
        if (
            not rest
            or options
            and rest.lower() == str(options[valid.index(bare.group(1))]).lower()
            or not options
            and not _holds_any(text.lower(), _DECLARATION_WORDS)
        ):
            return _result(bare.group(1), "leading")
    lower = _BARE_LOWER.match(text)
    if lower and lower.group(1).upper() in valid and not _is_an_option(lower.group(1), options):
        return _result(lower.group(1).upper(), "leading")
    return _extract(text, valid, options)


def _is_an_option(word: str, options: Sequence[str] | None) -> bool:
    """Whether a lone word is itself an option's text (then it answers by text, not by letter)."""
    return bool(options) and any(str(o).strip().lower() == word for o in options or ())


def _extract(text: str, valid: str, options: Sequence[str] | None) -> Extraction:
    """The rules over a prepared output."""
    n_options = len(valid)
    prepared = ChoiceText(text, valid, _norm_options(tuple(options[:n_options])) if options else ())
    known = prepared.__dict__
    lower = text.lower()
    if len(lower) == len(text):  # else ChoiceText.lower keeps the offsets
        known["lower"] = lower
    # every output the first two rules leave reads this: set here rather than through the descriptor's calls
    known["first_capital"] = _standalone(text, valid)
    for rule in CHOICE_RULES:
        decided = rule(prepared)
        if decided is False:
            return _result(None, rule.__name__)
        if decided:
            return _result(str(decided), rule.__name__)
    return _result(None, "unparsed")


_YES = re.compile(r"^\W*(yes|yeah|yep|true|correct)\b", re.I)
_NO = re.compile(r"^\W*(no|nope|false|incorrect)\b", re.I)


def extract_yes_no(output: str | None) -> Extraction:
    """``yes`` / ``no`` from the opening word, else from a lone yes/no word; unparsed otherwise."""
    if output is None or not str(output).strip():
        return UNPARSED_EMPTY
    raw = str(output)
    # models repeat their short answers ("Yes.", "No, it is not."): each is read once per process
    return _remembered(("yes/no", raw), lambda: _read_yes_no(raw)) if len(raw) < 100 else _read_yes_no(raw)


def _read_yes_no(raw: str) -> Extraction:
    text = _MD.sub("", raw).strip()
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
