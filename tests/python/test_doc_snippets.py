"""Every Python snippet of the README and docs/ runs as written: each
```python block, alone, in a fresh process and an empty working directory
(a snippet that opens "app.db" gets a new one)."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def snippets():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for i, m in enumerate(BLOCK.finditer(text), 1):
            line = text.count("\n", 0, m.start()) + 1
            yield pytest.param(m.group(1), id=f"{doc.relative_to(ROOT)}:{line}#{i}")


SNIPPETS = list(snippets())


def test_there_are_snippets_to_check():
    assert len(SNIPPETS) >= 3  # README and docs/python.md have them


@pytest.mark.parametrize("code", SNIPPETS)
def test_snippet_runs_as_written(code, tmp_path):
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
