"""The README's Python example runs as written (from the repository root, in a scratch copy of its data)."""

from __future__ import annotations

import os
import re
import shutil

from conftest import ROOT


def test_readme_example_runs(tmp_path, capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    marker = readme.index("<!-- python-example:")
    code = re.search(r"```python\n(.*?)```", readme[marker:], re.S).group(1)
    (tmp_path / "data").mkdir()
    shutil.copy(ROOT / "data" / "spamassassin.jsonl.gz", tmp_path / "data")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope: dict = {}
        exec(compile(code, "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    assert len(scope["sigs"]) == scope["table"].num_rows == 6046
    assert scope["res"].pairs.num_rows > 0
    survivors = scope["survivors"]
    assert survivors.kept.num_rows + survivors.removed.num_rows == 6046 and survivors.removed.num_rows > 0
    assert capsys.readouterr().out.strip(), "the example prints the largest groups"
