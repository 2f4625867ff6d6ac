"""The labelled donor library a compositing editor pastes from: photos with a label phrase, a kind, what
each means at a high level, and a licence line (``data/donors/donors.yaml`` is the bundled one)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perceptforge.errors import InputError, describe_validation_error

DonorKind = Literal["scene", "object", "group"]
HighLevel = Literal["identity", "emotion", "scenario", "role", "behaviour"]
# times of day only a photo's colours show: behind a black-and-white photo a scene is pasted in black and white
TIMES_OF_DAY = ("dusk", "dawn", "sunset", "sunrise", "twilight", "golden hour")


def colour_only_claim(text: str) -> str | None:
    """The time of day ``text`` names that only colour shows ("a rocket launch pad at dusk" → "dusk"), or None."""
    words = f" {' '.join(text.lower().replace('-', ' ').split())} "
    return next((t for t in TIMES_OF_DAY if f" {t} " in words), None)


class Donor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    file: str = Field(min_length=1)
    kind: DonorKind
    label: str = Field(min_length=1, description="the value as questions name it")
    highs: dict[HighLevel, str] = Field(min_length=1, description="high level → what the entry means there")
    licence: str = Field(min_length=1)
    focus: tuple[int, int, int, int] | None = Field(
        None,
        description="scenes: the x0, y0, x1, y1 box (photo pixels) of what makes the label true; the scene "
        "is placed so that it shows beside the subject",
    )

    @model_validator(mode="after")
    def _seen_in_black_and_white(self) -> Donor:
        # a scene's label and meanings are asked of black-and-white photos too, where its colours are grey
        if self.kind == "scene":
            for text in (self.label, *self.highs.values()):
                claim = colour_only_claim(text)
                if claim:
                    raise ValueError(
                        f"donor {self.id}: {text!r} names {claim!r}, which a black-and-white photo's scene (pasted in "
                        "black and white) cannot show; say only what shows without colour"
                    )
        return self


class _LibraryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = Field(ge=1)
    donors: list[Donor]


def bundled_folder() -> Path:
    return Path(str(resources.files("perceptforge.data").joinpath("donors")))


class DonorLibrary:
    """The entries of one library folder, by id; every file an entry names exists."""

    def __init__(self, folder: Path, donors: list[Donor]):
        self.folder, self.donors = folder, {d.id: d for d in donors}

    @classmethod
    def load(cls, folder: str | Path | None = None) -> DonorLibrary:
        folder = Path(folder).expanduser() if folder else bundled_folder()
        index = folder / "donors.yaml"
        try:
            raw = yaml.safe_load(index.read_text(encoding="utf-8"))
            parsed = _LibraryFile.model_validate(raw)
        except FileNotFoundError:
            raise InputError(str(index), "donor library index not found") from None
        except yaml.YAMLError as exc:
            raise InputError(str(index), f"invalid YAML: {exc}") from None
        except ValidationError as exc:
            raise InputError(str(index), "; ".join(describe_validation_error(exc))) from None
        seen: set[str] = set()
        for d in parsed.donors:
            if d.id in seen:
                raise InputError(str(index), f"donor id {d.id!r} appears twice")
            seen.add(d.id)
            if not (folder / d.file).is_file():
                raise InputError(str(index), f"donor {d.id}: file {d.file!r} not found in {folder}")
            if d.focus is not None:
                with Image.open(folder / d.file) as photo:
                    w, h = photo.size
                x0, y0, x1, y1 = d.focus
                if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
                    raise InputError(
                        str(index), f"donor {d.id}: focus {list(d.focus)} is not a box inside its {w}x{h} photo"
                    )
        return cls(folder, parsed.donors)

    def of_kind(self, kind: str, high: str) -> list[Donor]:
        """The entries of ``kind`` that say what they mean at ``high``, in id order."""
        return [d for _, d in sorted(self.donors.items()) if d.kind == kind and high in d.highs]

    def path(self, donor_id: str) -> Path:
        return self.folder / self.donors[donor_id].file
