"""The exported lmms-eval task's ``perceptforge_scorer.py`` (its ``utils.py`` loads it), generated from this
package's own modules so that it runs where perceptforge is not installed (lmms-eval's environment) and judges
with the code ``perceptforge score`` judges with.

``outputs/export`` reads it as text through ``task_utils()``; the generator is here, beside the modules it reads.
"""

from __future__ import annotations

import ast
import pprint
from importlib import resources
from typing import Any

# The modules whose source the generated module carries, in order (each after those it uses); lmms_eval's PROMPTS,
# a value rather than code, it holds as a literal.
BUNDLED = ("extract", "verdicts", "lmms_eval")
HEADER = """\
Answer extraction, scoring rules and lmms-eval task functions of a perceptforge export, written by
`perceptforge export` from perceptforge's own scorer (scorer/extract.py, scorer/verdicts.py,
scorer/lmms_eval.py) and the prompts `perceptforge predict` asks with. It needs the Python standard library
alone (lmms-eval hands it the documents and their images). `utils.py` beside it loads it.
Generated: a new export writes it again, and an edit here is lost."""


def _is_ours(node: ast.stmt) -> bool:
    """An import of perceptforge (what it names comes from an earlier bundled source) or of ``__future__`` (written
    once, first, where Python requires it)."""
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] in ("perceptforge", "__future__")
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == "perceptforge" for a in node.names)


def _assigned(node: ast.stmt, names: dict[str, Any]) -> str | None:
    """The name in ``names`` a top-level assignment binds, if it binds one."""
    targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets if isinstance(node, ast.Assign) else []
    return next((t.id for t in targets if isinstance(t, ast.Name) and t.id in names), None)


def standalone_module(sources: dict[str, str], values: dict[str, Any], header: str = HEADER) -> str:
    """One Python module made of ``sources`` (module name → its source, in the order given) with every
    ``perceptforge`` import taken out and each top-level assignment to a name in ``values`` replaced by that
    value as a literal (``pprint``: sorted, and the same bytes for the same value); ``header`` opens it as
    comment lines. Each source's docstring stays, as a string statement."""
    parts = [*(f"# {line}".rstrip() for line in header.splitlines()), "from __future__ import annotations", ""]
    for name, text in sources.items():
        lines = text.splitlines()
        drop: set[int] = set()
        literal: dict[int, str] = {}
        for node in ast.parse(text).body:
            span = range(node.lineno - 1, node.end_lineno or node.lineno)
            bound = _assigned(node, values)
            if _is_ours(node) or bound:
                drop.update(span)
            if bound:
                literal[span[0]] = f"{bound} = {pprint.pformat(values[bound], width=116)}"
        parts.append(f"# ---- perceptforge/scorer/{name}.py ----")
        parts += [literal.get(n, line) for n, line in enumerate(lines) if n not in drop or n in literal]
        parts.append("")
    return "\n".join(parts).rstrip("\n") + "\n"


def task_utils() -> str:
    """The exported task folder's ``perceptforge_scorer.py``: ``standalone_module`` over this package's files,
    as installed."""
    from perceptforge.scorer.benchmarks.perceptforge import predict_prompts

    package = resources.files("perceptforge.scorer")
    sources = {name: package.joinpath(f"{name}.py").read_text(encoding="utf-8") for name in BUNDLED}
    # the prompts as predict would load them now (a prompt folder registered since import counts)
    return standalone_module(sources, {"PROMPTS": predict_prompts()})
