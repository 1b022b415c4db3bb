"""The examples in README.md and docs/*.md run, and print what the docs say they print.

What counts as an example (docs/derivations/ and docs/notes/ are not scanned):

- A fenced ``python`` block. The blocks of one document run in order in one namespace, as a
  doctest file does, so a later block may use what an earlier one defined. When the block is
  followed by a line ``prints`` (blank lines around it allowed) and a fenced block without a
  language (or ``text``), what the block writes to stdout must equal that block.
- A fenced ``console`` block. Each ``$ qmodel ...`` line (continued by a trailing ``\\``) runs
  ``qmodel.cli.main`` with those arguments; the lines up to the next ``$`` line are its
  expected stdout and stderr. Every command in a ``console`` block must be ``qmodel``; commands
  shown but not run (``make``, scripts) go in ``sh`` blocks.

Comparison is exact after one normalisation: trailing whitespace is dropped from every line,
and blank lines at the start and end of an output are ignored. A line that is just ``...`` in
an expected output stands for any number of lines (zero included), so a doc may show the head
and tail of a long output.

Regenerate the outputs after a change (never type them by hand)::

    PYTHONPATH=$PWD python tests/test_docs.py --update     # rewrite what differs
    PYTHONPATH=$PWD python tests/test_docs.py              # check only; exit 1 on a difference

An updated output keeps its ``...`` line with as many lines before and after it as it had.

The same module checks the house rules that keep the docs in order: README.md is at most 200
lines, relative links point to files that exist, the ``<!-- BEGIN GENERATED: name -->`` /
``<!-- END GENERATED: name -->`` markers around generated tables come in matching pairs, and
every generated table equals what :mod:`qmodel.campaign.doc_tables` makes of the stored
campaign results (``python -m qmodel.campaign.doc_tables --write`` rewrites them).
"""

from __future__ import annotations

import contextlib
import difflib
import io
import re
import shlex
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from qmodel.campaign import doc_tables

__all__ = ["Example", "doc_files", "examples_in", "run_document", "update", "main"]

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 200

FENCE = re.compile(r"^(`{3,})\s*([\w-]*)")
PRINTS = re.compile(r"^prints:?\s*$")
ELLIPSIS = "..."
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def doc_files() -> list[Path]:
    """README.md and docs/*.md (not the derivations, not the notes)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass
class Example:
    """One runnable example and where its expected output sits in the document.

    ``expected`` is None for a python block that shows no output (it runs, unchecked);
    ``span`` is the (start, stop) range of the expected output's lines in the document.
    """

    doc: Path
    line: int                 # 1-based line of the code in the document
    kind: str                 # "python" or "console"
    source: str               # python code, or the qmodel arguments as one string
    expected: list | None
    span: tuple | None


def _fences(lines: list[str]):
    """(language, opening index, closing index) of every fenced block."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and lines[j].strip() != ticks:
            j += 1
        if j == len(lines):
            raise ValueError(f"line {i + 1}: fenced block never closed")
        yield lang, i, j
        i = j + 1


def _output_after(lines: list[str], close: int, fences: dict):
    """The output block introduced by ``prints`` after the block closing at ``close``."""
    k = close + 1
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k == len(lines) or not PRINTS.match(lines[k]):
        return None
    k += 1
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k not in fences or fences[k][0] not in ("", "text"):
        raise ValueError(f"line {k + 1}: 'prints' must be followed by a fenced output block")
    return k + 1, fences[k][1]


def _console(doc: Path, lines: list[str], start: int, stop: int) -> list[Example]:
    out, i = [], start
    while i < stop:
        if not lines[i].startswith("$ "):
            if lines[i].strip():
                raise ValueError(f"{doc.name}:{i + 1}: console block text before any '$' line")
            i += 1
            continue
        first, command = i, lines[i][2:]
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        words = shlex.split(command)
        if not words or words[0] != "qmodel":
            raise ValueError(f"{doc.name}:{first + 1}: console blocks run only 'qmodel' "
                             f"commands; show {words[:1]} in an 'sh' block instead")
        i += 1
        begin = i
        while i < stop and not lines[i].startswith("$ "):
            i += 1
        out.append(Example(doc, first + 1, "console", shlex.join(words[1:]),
                           lines[begin:i], (begin, i)))
    return out


def examples_in(doc: Path) -> list[Example]:
    """Every example of ``doc``, in document order."""
    lines = doc.read_text().splitlines()
    fences = {opening: (lang, closing) for lang, opening, closing in _fences(lines)}
    out = []
    for opening, (lang, closing) in sorted(fences.items()):
        if lang == "python":
            shown = _output_after(lines, closing, fences)
            span = expected = None
            if shown:
                span = shown
                expected = lines[shown[0]:shown[1]]
            out.append(Example(doc, opening + 2, "python",
                               "\n".join(lines[opening + 1:closing]), expected, span))
        elif lang == "console":
            out.extend(_console(doc, lines, opening + 1, closing))
    return out


def _normal(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` fits ``expected``, whose ``...`` lines match any run of lines.

    Examples
    --------
    >>> matches(["a", "...", "d"], ["a", "b", "c", "d"]), matches(["a", "..."], ["b"])
    (True, False)
    """
    expected, actual = _normal(expected), _normal(actual)
    if ELLIPSIS not in expected:
        return expected == actual
    head = expected[:expected.index(ELLIPSIS)]
    rest = expected[len(head) + 1:]
    if actual[:len(head)] != head:
        return False
    tail = actual[len(head):]
    return any(matches(rest, tail[k:]) for k in range(len(tail) + 1))


def _run_python(code: str, namespace: dict, where: str) -> list[str]:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(code, where, "exec"), namespace)
    return buffer.getvalue().splitlines()


def _run_console(arguments: str) -> list[str]:
    from qmodel.cli import main as qmodel_main

    buffer = io.StringIO()

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    # stdout and stderr in one stream, in the order written, as a terminal shows them;
    # warnings printed the way the command line prints them, also under pytest; the parser's
    # errors end in SystemExit, as on the command line
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), \
            warnings.catch_warnings(), contextlib.suppress(SystemExit):
        warnings.simplefilter("always")
        warnings.showwarning = show
        qmodel_main(shlex.split(arguments))
    return buffer.getvalue().splitlines()


def run_document(doc: Path) -> list[tuple[Example, list[str]]]:
    """Run every example of ``doc``; return (example, actual output) where they differ."""
    namespace = {"__name__": "__doc_example__"}
    differ = []
    for ex in examples_in(doc):
        where = f"{doc.relative_to(ROOT)}:{ex.line}"
        if ex.kind == "python":
            actual = _run_python(ex.source, namespace, where)
        else:
            actual = _run_console(ex.source)
        if ex.expected is not None and not matches(ex.expected, actual):
            differ.append((ex, actual))
    return differ


def _replacement(expected: list[str], actual: list[str]) -> list[str]:
    """The new output block: the fresh output, shortened around ``...`` as before."""
    actual = _normal(actual)
    expected = _normal(expected)
    if ELLIPSIS not in expected:
        return actual
    head = expected.index(ELLIPSIS)
    tail = len(expected) - head - 1
    if head + tail >= len(actual):
        return actual
    return actual[:head] + [ELLIPSIS] + actual[len(actual) - tail:]


def update(doc: Path) -> int:
    """Rewrite the outputs of ``doc`` that differ from a fresh run; return how many."""
    differ = run_document(doc)
    if not differ:
        return 0
    lines = doc.read_text().splitlines()
    for ex, actual in sorted(differ, key=lambda d: d[0].span[0], reverse=True):
        start, stop = ex.span
        new = _replacement(ex.expected, actual)
        if ex.kind == "console" and stop < len(lines) and lines[stop].startswith("$ "):
            new = new + [""]          # keep a blank line before the next command
        lines[start:stop] = new
    doc.write_text("\n".join(lines) + "\n")
    return len(differ)


def _diff(ex: Example, actual: list[str]) -> str:
    what = "python block" if ex.kind == "python" else f"qmodel {ex.source}"
    # the fresh output shortened around "..." as the doc shortens it, so the diff shows only
    # the lines that matter
    body = "\n".join(difflib.unified_diff(_normal(ex.expected), _replacement(ex.expected, actual),
                                          "doc", "actual", lineterm=""))
    return f"{ex.doc.relative_to(ROOT)}:{ex.line} ({what}) prints otherwise:\n{body}"


# --- tests ---------------------------------------------------------------------------------


@pytest.fixture
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_print_what_the_doc_shows(doc, in_root):
    differ = run_document(doc)
    assert not differ, ("\n\n".join(_diff(ex, actual) for ex, actual in differ)
                        + "\n\nregenerate with: python tests/test_docs.py --update")


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_generated_markers_pair_up(doc):
    # blocks_in raises on a BEGIN inside a block, an END that closes another, a block that
    # never ends or appears twice
    doc_tables.blocks_in(doc.read_text())


@pytest.mark.parametrize("text, message", [
    ("<!-- BEGIN GENERATED: a -->\n<!-- BEGIN GENERATED: b -->", "BEGIN b inside a"),
    ("<!-- BEGIN GENERATED: a -->\n<!-- END GENERATED: b -->", "END b closes a"),
    ("<!-- BEGIN GENERATED: a -->\nx", "a never ends"),
])
def test_unpaired_markers_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        doc_tables.blocks_in(text)


def test_generated_tables_match_the_stored_results():
    # a rerun campaign, a regenerated measured_errors.json or a hand edit between the markers
    # shows here as the diff between the documents and a fresh generation
    stale = doc_tables.stale(ROOT)
    assert not stale, ("\n\n".join(stale) + "\n\nthe generated tables are stale; regenerate "
                       f"with: {doc_tables.COMMAND}")


def test_a_hand_edited_table_is_stale_and_rewritten(tmp_path):
    for doc in doc_tables.DOCUMENTS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / doc).write_text((ROOT / doc).read_text())
    readme = tmp_path / "README.md"
    text = readme.read_text()
    first, _ = doc_tables.blocks_in(text)["accuracy-summary"]
    lines = text.splitlines()
    lines[first + 2] = lines[first + 2].replace("%", "1%", 1)      # a retyped figure
    readme.write_text("\n".join(lines) + "\n")
    (diff,) = doc_tables.stale(tmp_path)
    assert diff.startswith("--- README.md") and "1%" in diff
    assert doc_tables.write(tmp_path) == ["README.md"]
    assert readme.read_text() == text and doc_tables.stale(tmp_path) == []


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    missing = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#")[0]
        if not (doc.parent / path).exists():
            missing.append(target)
    assert not missing, f"links to missing files: {missing}"


def test_examples_are_found():
    # the parser finds the README's examples with their output, and console examples with
    # theirs (docs/cli.md's)
    kinds = {(ex.kind, ex.expected is not None) for ex in examples_in(ROOT / "README.md")}
    assert ("python", True) in kinds
    kinds = {(ex.kind, ex.expected is not None) for ex in examples_in(ROOT / "docs/cli.md")}
    assert ("console", True) in kinds


def main(argv=None) -> int:
    """``python tests/test_docs.py [--update] [DOC ...]``: check (or rewrite) the outputs."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true",
                        help="rewrite the output blocks that differ from a fresh run")
    parser.add_argument("docs", nargs="*", type=Path, help="documents (default: all)")
    args = parser.parse_args(argv)
    docs = [p.resolve() for p in args.docs] or doc_files()
    failed = 0
    for doc in docs:
        if args.update:
            n = update(doc)
            print(f"{doc.relative_to(ROOT)}: {n} output(s) rewritten")
        else:
            differ = run_document(doc)
            failed += len(differ)
            for ex, actual in differ:
                print(_diff(ex, actual), end="\n\n")
            print(f"{doc.relative_to(ROOT)}: {len(differ)} output(s) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    import os

    os.chdir(ROOT)
    sys.exit(main())
