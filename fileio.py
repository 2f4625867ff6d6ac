"""Atomic writes, hashing and line-numbered JSON Lines reading."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from perceptforge.errors import InputError


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, which would race with threads writing files.
_UMASK = _read_umask()


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO[Any]]:
    """A file to write a large output into bit by bit (a Parquet file row group by row group): a temporary file
    beside ``path``, fsynced and renamed onto it when the block ends, removed if it fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600; a run or split is shared, so give the file what open() would (the umask's).
        os.fchmod(fd, 0o666 & ~_UMASK)
        text = "b" not in mode
        with os.fdopen(fd, mode, encoding="utf-8" if text else None, newline="" if text else None) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a full disk fails write() or fsync(), which name no file: name the one written
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def exclusive(lock_path: str | os.PathLike) -> Iterator[None]:
    """Holds the lock file ``lock_path`` (made, with its folder, if missing) for the ``with`` block: a second
    process asking for it waits. The lock goes with the file's close, also when the process dies."""
    path = Path(lock_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write to a temporary file beside ``path``, fsync, then rename: readers never see half a file."""
    with atomic_file(path) as f:
        f.write(data)
    return Path(path)


def refuse_overwrite(outputs: dict[str, str | os.PathLike | None], inputs: dict[str, list[Path]]) -> None:
    """An output option naming a file the command reads (the same file by its resolved path) stops the command in
    one line before anything is written: no command writes over its own input."""
    read = {Path(p).resolve(): option for option, paths in inputs.items() for p in paths}
    for option, out in outputs.items():
        if out is not None and Path(out).resolve() in read:
            raise InputError(option, f"{out} is also read as {read[Path(out).resolve()]}: write it to another file")


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def dumps_canonical(obj: Any) -> str:
    """Stable JSON: sorted keys, no spaces to vary, UTF-8 kept; the same object gives the same bytes."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def write_jsonl(path: str | os.PathLike, records: list[Any]) -> Path:
    return atomic_write_text(path, "".join(dumps_canonical(r) + "\n" for r in records))


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=2) + "\n")


def read_utf8(path: str | os.PathLike) -> str:
    """A text file that must be UTF-8; one that is not is an error naming the file, the line and the byte."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{path}:{line}", f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None


def read_yaml(path: str | os.PathLike) -> Any:
    """A YAML file, strictly: a key given twice in one mapping is an error naming its line (YAML's loaders keep
    the last silently), as is a file that does not parse."""
    import yaml

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader: Strict, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise InputError(f"{path}:{key_node.start_mark.line + 1}", f"key {key!r} is given twice")
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(read_utf8(path), Loader=Strict)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(where, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None


class _KeyTwice(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json``'s object hook: a key given twice in one object is an error (``json`` keeps the last silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyTwice(key)
            seen.add(key)
    return out


# One decoder for every line: ``json.loads`` would build one per call (and guess the encoding of bytes)
_LINE_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)
_PAIRS_DECODER = json.JSONDecoder(object_pairs_hook=list)


def _is_pairs(value: Any) -> bool:
    """Whether a value read with ``pairs`` is an object (a list of pairs; an empty list is ``{}`` or ``[]``)."""
    return isinstance(value, list) and (not value or isinstance(value[0], tuple))


def _json_type(value: Any) -> str:
    return "array" if isinstance(value, list) else type(value).__name__


def pairs_object(value: Any, where: str, name: str) -> dict[str, Any]:
    """An object read with ``iter_jsonl(pairs=True)`` as a dict (its values stay as read); one line naming
    ``where`` and the field ``name`` when it is not an object or gives a key twice."""
    if not _is_pairs(value):
        raise InputError(where, f"{name} must be a JSON object, got {_json_type(value)}")
    out = dict(value)
    if len(out) != len(value):
        try:
            _unique_keys(value)
        except _KeyTwice as exc:
            raise InputError(where, f"{name}: key {exc.args[0]!r} is given twice") from None
    return out


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file; an error naming the file (and line) when it is missing, empty, not JSON, or gives a key twice
    in one object."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "file not found") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(str(path), "file is empty")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _KeyTwice as exc:
        raise InputError(str(path), f"key {exc.args[0]!r} is given twice in one object") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}", f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise InputError(str(path), "JSON nested too deeply to read") from None


def iter_jsonl(path: str | os.PathLike, pairs: bool = False) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each non-blank line; a bad line raises naming file and line.

    With ``pairs``, every object comes as its list of ``(key, value)`` pairs (``json``'s object_pairs_hook
    ``list``, which runs in C): a reader of a few fields of large records then builds dicts, and checks for
    keys given twice (``pairs_object``), only where it reads."""
    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "file not found")
    empty = True
    decode = (_PAIRS_DECODER if pairs else _LINE_DECODER).raw_decode
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw or raw.isspace():  # (isspace stops at the first other byte; strip would copy the line)
                continue
            try:
                text = raw.decode("utf-8-sig" if empty else "utf-8")  # a byte-order mark may open the file
                obj, end = decode(text, 0 if text[0] == "{" else len(text) - len(text.lstrip()))
                rest = len(text) - end  # most lines end with the object and a newline
                if rest and not (rest == 1 and text[-1] == "\n") and not text[end:].isspace():
                    raise json.JSONDecodeError("Extra data", text, end)
            except _KeyTwice as exc:
                raise InputError(f"{path}:{lineno}", f"key {exc.args[0]!r} is given twice") from None
            except RecursionError:
                raise InputError(f"{path}:{lineno}", "JSON nested too deeply to read") from None
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                hint = ""
                if lineno == 1 and b"," in raw and not raw.lstrip().startswith((b"{", b"[")):
                    hint = " (this looks like CSV, expected JSON Lines: one JSON object per line)"
                raise InputError(f"{path}:{lineno}", f"not a JSON object: {exc}{hint}") from None
            if not (type(obj) is list and (not obj or type(obj[0]) is tuple) if pairs else type(obj) is dict):
                raise InputError(f"{path}:{lineno}", f"expected a JSON object, got {_json_type(obj)}")
            empty = False
            yield lineno, obj
    if empty:
        raise InputError(str(path), "file is empty")
