"""Where a profile's model lives, and getting it there: a local path (as written), a Hugging Face Hub repository at
a pinned revision (``org/name@<commit>``, the form diffusers' and transformers' users name weights by), or a
published file with its digest (``https://…/sam_vit_h_4b8939.pth#sha256=<hex>``, pip's form, for checkpoints that
live outside the hub, as segment-anything's do).

``perceptforge models pull`` fetches hub repositories into the Hugging Face cache with ``huggingface_hub`` (resumable,
the revision pinned) and published files beside it (``$HF_HOME/perceptforge/sha256-<hex>/``, resumable, the digest
checked); a run only ever reads that cache (:func:`locate`), so it works offline and a missing model is one line that
names the pull command. Every item's lineage records what was loaded: ``org/name@<commit>`` or the file's URL with its
digest.

A profile field that names a model says which kind it is by ``json_schema_extra={"model": KIND}`` (:data:`KINDS`);
:func:`profile_models` walks a profile for them.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from perceptforge.errors import PerceptforgeError

# What a profile field names: a diffusers pipeline folder, a transformers model folder, or one file.
Kind = Literal["diffusers", "transformers", "file"]
KINDS: tuple[Kind, ...] = ("diffusers", "transformers", "file")
HUB_ID = re.compile(r"^(?:hf://)?(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
SHA256_FRAGMENT = re.compile(r"^(?P<url>https?://[^#\s]+)#sha256=(?P<sha256>[0-9a-f]{64})$")
PULL = "perceptforge models pull {profile}"

# The files a pipeline or model loads, and not the single-file checkpoints, other frameworks' weights, half-precision
# variants or the safety checker (every diffusers backend here loads without it) that its repository also holds:
# SD 2 inpainting's repository is 16 GB, the files the pipeline reads 5.2 GB.
ALLOW: dict[str, list[str]] = {
    "diffusers": ["model_index.json", "*/*.json", "*/*.txt", "*/*.safetensors"],
    "transformers": ["*.json", "*.txt", "*.model", "*.safetensors", "*.tiktoken"],
}
IGNORE = ["*.fp16.*", "*.non_ema.*", "*.ema.*", "safety_checker/*", "*.ckpt", "*.bin", "*.msgpack", "*.h5", "*.onnx"]


@dataclass(frozen=True)
class ModelRef:
    """A model as a profile names it."""

    text: str
    kind: Kind
    where: Literal["local", "hub", "url"]
    repo_id: str = ""
    revision: str = ""  # hub: as written; "" means the default branch
    url: str = ""
    sha256: str = ""

    @property
    def pinned(self) -> bool:
        return self.where != "hub" or bool(COMMIT.match(self.revision))

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


def parse_ref(text: str, kind: Kind) -> ModelRef:
    """``text`` as a local path (when it exists, or starts with ``/``, ``.`` or ``~``), a published file
    (``https://…#sha256=<hex>``) or a hub repository (``org/name[@revision]``, ``hf://`` optional)."""
    if (found := SHA256_FRAGMENT.match(text)) is not None:
        return ModelRef(text, kind, "url", url=found["url"], sha256=found["sha256"])
    if text.startswith(("http://", "https://")):
        raise PerceptforgeError(f"{text}: a published file needs its digest: add #sha256=<64 hex digits> to the URL")
    local = text.startswith(("/", ".", "~")) or Path(text).expanduser().exists()
    if not local and (found := HUB_ID.match(text)) is not None:
        if kind == "file":
            raise PerceptforgeError(f"{text}: this field names one file: a local path or https://…#sha256=<hex>")
        return ModelRef(text, kind, "hub", repo_id=found["repo"], revision=found["revision"] or "")
    return ModelRef(text, kind, "local")


def hf_home() -> Path:
    """The Hugging Face cache's root (``HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``), as huggingface_hub
    reads it."""
    if home := os.environ.get("HF_HOME"):
        return Path(home).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "huggingface"


def hub_cache() -> Path:
    """Where huggingface_hub keeps repositories (``HF_HUB_CACHE``, else ``$HF_HOME/hub``), read when asked: the
    library reads it once, at import."""
    if cache := os.environ.get("HF_HUB_CACHE"):
        return Path(cache).expanduser()
    return hf_home() / "hub"


def file_path(ref: ModelRef) -> Path:
    """Where a published file is kept once pulled: by its digest, so two profiles share it."""
    return hf_home() / "perceptforge" / f"sha256-{ref.sha256}" / ref.filename


@dataclass(frozen=True)
class Located:
    path: Path  # what the loader reads
    label: str  # what lineage records: the path as written, org/name@<commit>, or url#sha256=<hex>


def locate(text: str, kind: Kind, profile: str = "PROFILE", what: str = "") -> Located:
    """The model ``text`` names, in the local file system or the cache, without touching the network: one line
    naming the pull command when it is not there (``what`` the model is, for a local path's error)."""
    ref = parse_ref(text, kind)
    if ref.where == "local":
        path = Path(text).expanduser()
        if not (path.is_file() if kind == "file" else path.is_dir()):
            raise PerceptforgeError(f"{text}: {what or ('model file' if kind == 'file' else 'model folder')} not found")
        return Located(path, text)
    if ref.where == "url":
        path = file_path(ref)
        if not path.is_file():
            raise PerceptforgeError(f"{ref.filename} (sha256 {ref.sha256[:12]}…) is not in {path.parent.parent}: "
                                    f"run `{PULL.format(profile=profile)}`")  # fmt: skip
        return Located(path, text)
    return _locate_snapshot(ref, profile)


def _snapshot(snapshot_download: Callable[..., str], ref: ModelRef, offline: bool) -> str:
    """``ref``'s snapshot folder: the files its kind loads, from the cache alone (``offline``) or fetched. The cache
    and the endpoint are read now: huggingface_hub reads their variables once, at import."""
    return snapshot_download(
        ref.repo_id,
        revision=ref.revision or None,
        allow_patterns=ALLOW[ref.kind],
        ignore_patterns=IGNORE,
        local_files_only=offline,
        cache_dir=hub_cache(),
        endpoint=os.environ.get("HF_ENDPOINT") or None,
    )


def _locate_snapshot(ref: ModelRef, profile: str) -> Located:
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise PerceptforgeError(
            f"{ref.text}: a hub model needs huggingface_hub: pip install 'perceptforge[models]'"
        ) from None
    try:
        folder = _snapshot(snapshot_download, ref, offline=True)
    except (LocalEntryNotFoundError, OSError) as exc:
        # huggingface_hub 2.x says "incomplete" when an interrupted pull left part of a snapshot
        state = "incomplete" if "incomplete" in str(exc).lower() else "missing"
        raise PerceptforgeError(
            f"{ref.text}: {state} in the Hugging Face cache ({hub_cache()}): run `{PULL.format(profile=profile)}`"
        ) from None
    commit = Path(folder).name
    return Located(Path(folder), f"{ref.repo_id}@{commit}")


# --- what a profile names -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileModel:
    where: str  # the profile field, e.g. "inpainter[0].model"
    ref: ModelRef


def model_kind(model: BaseModel, field: str) -> Kind | None:
    extra = type(model).model_fields[field].json_schema_extra
    kind = extra.get("model") if isinstance(extra, dict) else None
    return kind if kind in KINDS else None


def _walk(value: Any, where: str) -> Iterator[ProfileModel]:
    if isinstance(value, list):
        for k, item in enumerate(value):
            yield from _walk(item, f"{where}[{k}]")
    elif isinstance(value, BaseModel):
        for field in type(value).model_fields:
            inner, here = getattr(value, field), f"{where}.{field}" if where else field
            kind = model_kind(value, field)
            if kind is not None and isinstance(inner, str):
                yield ProfileModel(here, parse_ref(inner, kind))
            else:
                yield from _walk(inner, here)


def profile_models(profile: BaseModel) -> list[ProfileModel]:
    """Every model a profile names, in the profile's order, each once (by its text and kind)."""
    seen: set[tuple[str, str]] = set()
    found = []
    for item in _walk(profile, ""):
        if (item.ref.text, item.ref.kind) not in seen:
            seen.add((item.ref.text, item.ref.kind))
            found.append(item)
    return found


def missing(profile: BaseModel, name: str) -> list[str]:
    """One line per model the profile names that is not where a run reads it."""
    lines = []
    for item in profile_models(profile):
        try:
            locate(item.ref.text, item.ref.kind, name)
        except PerceptforgeError as exc:
            lines.append(f"{item.where}: {exc}")
    return lines


def require_present(profile: BaseModel, name: str) -> None:
    """Before a run: every model the profile names is there, or one line saying how many are not, the first of
    them, and the command that lists them all."""
    absent = missing(profile, name)
    if absent:
        more = f" (and {len(absent) - 1} more: `perceptforge models list {name}`)" if len(absent) > 1 else ""
        raise PerceptforgeError(f"profile {name}: {absent[0]}{more}")


# --- pulling ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PullPlan:
    ref: ModelRef
    commit: str  # hub: the revision resolved; url: ""
    files: tuple[tuple[str, int], ...]  # (name in the repository, bytes)

    @property
    def size(self) -> int:
        return sum(n for _, n in self.files)


def _hub_error(ref: ModelRef, exc: Exception) -> PerceptforgeError:
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    if isinstance(exc, RevisionNotFoundError):
        return PerceptforgeError(
            f"{ref.text}: revision {ref.revision or 'main'} not found in {ref.repo_id} on {endpoint}"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return PerceptforgeError(
            f"{ref.text}: no repository {ref.repo_id} on {endpoint} (or it needs a token: HF_TOKEN)"
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return PerceptforgeError(f"{ref.text}: {first}")


def plan_pull(ref: ModelRef) -> PullPlan:
    """What pulling ``ref`` fetches (files and sizes), asked of the hub without downloading."""
    if ref.where == "url":
        return PullPlan(ref, "", ((ref.filename, _content_length(ref.url)),))
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile
    from huggingface_hub.utils import filter_repo_objects

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
    try:
        commit = (
            ref.revision
            if COMMIT.match(ref.revision)
            else api.model_info(ref.repo_id, revision=ref.revision or None).sha
        )
        tree = [f for f in api.list_repo_tree(ref.repo_id, revision=commit, recursive=True) if isinstance(f, RepoFile)]
    except Exception as exc:  # noqa: BLE001 — every hub failure is one line naming the model
        raise _hub_error(ref, exc) from None
    names = set(filter_repo_objects([f.path for f in tree], allow_patterns=ALLOW[ref.kind], ignore_patterns=IGNORE))
    files = tuple(sorted((f.path, int(f.size)) for f in tree if f.path in names))
    if not files:
        raise PerceptforgeError(f"{ref.text}: no {ref.kind} model files in {ref.repo_id}@{commit}")
    return PullPlan(ref, str(commit), files)


def pull(plan: PullPlan, progress: Callable[[int, int], None] | None = None) -> Located:
    """Fetch what ``plan`` lists into the cache (resuming a partial download), then locate it. ``progress``
    (bytes so far, total) is called for a published file; huggingface_hub draws its own bars."""
    ref = plan.ref
    if ref.where == "url":
        fetch_file(ref.url, ref.sha256, file_path(ref), progress)
        return locate(ref.text, ref.kind)
    from huggingface_hub import snapshot_download

    try:
        folder = _snapshot(snapshot_download, ref, offline=False)
    except Exception as exc:  # noqa: BLE001
        raise _hub_error(ref, exc) from None
    if ref.pinned and Path(folder).name != ref.revision:
        raise PerceptforgeError(f"{ref.text}: the hub gave commit {Path(folder).name}, not the pinned {ref.revision}")
    return locate(ref.text, ref.kind)


def _content_length(url: str) -> int:
    import httpx

    try:
        head = httpx.head(url, follow_redirects=True, timeout=30)
        head.raise_for_status()
    except httpx.HTTPError as exc:
        raise PerceptforgeError(f"{url}: {exc}") from None
    return int(head.headers.get("Content-Length", 0))


def fetch_file(
    url: str, sha256: str, dest: Path, progress: Callable[[int, int], None] | None = None, chunk: int = 1 << 20
) -> Path:
    """Download ``url`` to ``dest``, resuming ``dest``'s ``.incomplete`` file with a Range request; the file is
    renamed into place only when its SHA-256 is ``sha256``."""
    import httpx

    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".incomplete")
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        with httpx.stream("GET", url, headers=headers, follow_redirects=True, timeout=60) as response:
            if response.status_code == 416:  # the partial file is already whole
                pass
            else:
                response.raise_for_status()
                if have and response.status_code != 206:  # the server ignored the Range: start again
                    have = 0
                total = have + int(response.headers.get("Content-Length", 0))
                with open(part, "ab" if have else "wb") as out:
                    for block in response.iter_bytes(chunk):
                        out.write(block)
                        have += len(block)
                        if progress:
                            progress(have, total)
    except httpx.HTTPError as exc:
        raise PerceptforgeError(f"{url}: {exc} ({have} bytes kept: the same command resumes)") from None
    digest = _sha256(part)
    if digest != sha256:
        part.unlink()
        raise PerceptforgeError(f"{url}: sha256 {digest} is not the expected {sha256}; the download was removed")
    os.replace(part, dest)
    return dest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
