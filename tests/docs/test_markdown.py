"""Every shell command and Python snippet of README.md and docs/*.md runs, so a page that drifts from the code fails.

A page's blocks run in order, in one scratch folder laid out as a fresh clone (the project's top-level entries
linked in, `../shared` beside it when this checkout has one), as a reader copying them would: ```bash / ```sh
blocks through `bash -euo pipefail`, the `$ ` lines of ```console blocks likewise (the other lines are their
output), and ```python blocks in one namespace per page, so a snippet may use what an earlier one made. Output
(```text or untagged) is not run. A block that cannot run as such says so in an HTML comment on the line before
it, which this test reads:

    <!-- test: skip <where it is checked instead> -->   not run (the reason is required)
    <!-- test: file <name> -->                          the block is a file the page asks the reader to write
    <!-- test: excerpt <path> -->                       the block quotes that project file: each of its lines
                                                        (less a trailing `...`) must occur there
    <!-- test: timeout <seconds> -->                    a longer bound than the default for this block

Any other fenced block (```java, ```ini, ...) without one of these fails the test, as does a failing block (the
page, its line and the error). `<!-- test-page: slow -->` anywhere in a page puts its test behind the slow marker.
The pages' relative links and the project paths they name in backticks must exist, and the README stays a front
page (at most 300 lines).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL, PYTHON, OUTPUT = ("bash", "sh", "console"), ("python",), ("text", "")
README_LINES = 300
TIMEOUT = 300.0
FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
ANNOTATION = re.compile(r"^\s*<!--\s*test:\s*(skip|file|excerpt|timeout)\b\s*(.*?)\s*-->\s*$")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PROJECT_PATH = re.compile(r"`((?:bench|converter|docs|examples|jni|lite|models|schema|tests)/[\w./-]*)`")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its first code line's number (1-based), its text and its annotation."""
    lang: str
    line: int
    text: str
    action: str = ""
    argument: str = ""

    def where(self, page: Path) -> str:
        return f"{label(page)}:{self.line}"


def label(page: Path) -> str:
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else page.name


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with the annotation on the line before its fence."""
    lines = page.read_text().splitlines()
    found, k = [], 0
    while k < len(lines):
        fence = FENCE.match(lines[k])
        if not fence:
            k += 1
            continue
        indent, lang = fence.group(1), fence.group(2).lower()
        end = next((j for j in range(k + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise AssertionError(f"{label(page)}:{k + 1}: unclosed code block")
        note = ANNOTATION.match(lines[k - 1]) if k else None
        body = textwrap.dedent("\n".join(line[len(indent):] if line.startswith(indent) else line
                                         for line in lines[k + 1:end]))
        found.append(Block(lang, k + 2, body + "\n", *(note.groups() if note else ())))
        k = end + 1
    return found


def console_commands(text: str) -> str:
    """The `$ ` lines of a console block (with their backslash continuations), as one script."""
    commands, continuing = [], False
    for line in text.splitlines():
        if line.startswith("$ ") or continuing:
            commands.append(line[2:] if line.startswith("$ ") and not continuing else line)
            continuing = line.endswith("\\")
    return "\n".join(commands) + "\n"


def scratch_clone(tmp_path: Path) -> Path:
    """A folder that looks like a fresh clone to a command run in it, with `../shared` when this checkout has it."""
    clone = tmp_path / "mslite-py"
    clone.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and entry.name not in ("build", "dist") \
                and not entry.name.endswith(".egg-info"):
            (clone / entry.name).symlink_to(entry)
    if (REPO.parent / "shared").is_dir():
        (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    return clone


def run_shell(block: Block, script: str, page: Path, cwd: Path, env: dict[str, str]) -> None:
    timeout = float(block.argument) if block.action == "timeout" else TIMEOUT
    try:
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where(page)}: still running after {timeout:.0f} s:\n{script}", pytrace=False)
    if run.returncode:
        output = (run.stdout + run.stderr)[-4000:]
        pytest.fail(f"{block.where(page)}: exit status {run.returncode}:\n{script}\n{output}", pytrace=False)


def run_python(block: Block, page: Path, namespace: dict) -> None:
    # padded so that a traceback names the page's own line numbers
    code = compile("\n" * (block.line - 1) + block.text, label(page), "exec")
    try:
        exec(code, namespace)
    except Exception:
        pytest.fail(f"{block.where(page)}: the snippet failed:\n{traceback.format_exc(limit=-3)}", pytrace=False)


def check_excerpt(block: Block, page: Path) -> None:
    source = REPO / block.argument
    if not source.is_file():
        pytest.fail(f"{block.where(page)}: quotes {block.argument}, which does not exist", pytrace=False)
    text = source.read_text()
    missing = [line for line in (raw.strip().removesuffix("...").rstrip() for raw in block.text.splitlines())
               if line and line not in text]
    if missing:
        pytest.fail(f"{block.where(page)}: not in {block.argument} any more: {missing}", pytrace=False)


def check_annotations(page: Path, found: list[Block]) -> None:
    for block in found:
        if block.action in ("skip", "file", "excerpt") and not block.argument:
            pytest.fail(f"{block.where(page)}: `test: {block.action}` needs its argument (a reason, a name or a "
                        f"path)", pytrace=False)
        if block.lang not in SHELL + PYTHON + OUTPUT and block.action not in ("skip", "file", "excerpt"):
            pytest.fail(f"{block.where(page)}: a ```{block.lang} block is neither run nor annotated "
                        f"(<!-- test: skip <reason> --> or <!-- test: file <name> -->)", pytrace=False)


def page_params() -> list:
    return [pytest.param(page, id=label(page),
                         marks=[pytest.mark.slow] if "<!-- test-page: slow -->" in page.read_text() else [])
            for page in PAGES]


@pytest.mark.parametrize("page", page_params())
def test_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = blocks(page)
    check_annotations(page, found)
    clone = scratch_clone(tmp_path)
    monkeypatch.chdir(clone)
    # the interpreter running the tests and its scripts (converter_lite, benchmark_lite) come first on PATH
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    namespace: dict = {"__name__": "__main__"}
    for block in found:
        if block.action == "skip" or block.lang in OUTPUT and block.action != "file":
            continue
        if block.action == "excerpt":
            check_excerpt(block, page)
        elif block.action == "file":
            (clone / block.argument).write_text(block.text)
        elif block.lang in PYTHON:
            run_python(block, page, namespace)
        else:
            run_shell(block, console_commands(block.text) if block.lang == "console" else block.text, page, clone,
                      env)


@pytest.mark.parametrize("page", PAGES, ids=label)
def test_relative_links_resolve(page: Path) -> None:
    missing = [target for target in LINK.findall(page.read_text())
               if "://" not in target and not (page.parent / target).exists()]
    assert not missing, f"{label(page)} links to files that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=label)
def test_project_paths_named_exist(page: Path) -> None:
    """A file or folder a page names in backticks (`tests/jni/test_examples.py`) is there: moving one moves its mentions."""
    missing = [path for path in PROJECT_PATH.findall(page.read_text()) if not (REPO / path).exists()]
    assert not missing, f"{label(page)} names paths that do not exist: {missing}"


def test_readme_is_a_front_page() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= README_LINES


def test_an_unannotated_block_and_a_failing_snippet_fail(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```java\nint x = 1;\n```\n\n<!-- test: skip -->\n```bash\ntrue\n```\n")
    found = blocks(page)
    assert [(b.lang, b.line, b.action) for b in found] == [("java", 2, ""), ("bash", 7, "skip")]
    with pytest.raises(pytest.fail.Exception, match="neither run nor annotated"):
        check_annotations(page, found[:1])
    with pytest.raises(pytest.fail.Exception, match="needs its argument"):
        check_annotations(page, found[1:])
    with pytest.raises(pytest.fail.Exception, match=r"not in lite/kernel.py any more: \['def infer\(\):'\]"):
        quote = "class Kernel(ABC):\n    def infer():\n        ...\n"
        check_excerpt(Block("python", 1, quote, "excerpt", "lite/kernel.py"), page)
    with pytest.raises(pytest.fail.Exception, match=r"page.md:3: the snippet failed"):
        run_python(Block("python", 3, "x = 1\nraise ValueError('drifted')\n"), page, {})
    assert console_commands("$ echo a \\\n  b\na b\n$ true\n") == "echo a \\\n  b\ntrue\n"
