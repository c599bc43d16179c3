"""The package's layers point only down: `lint-imports` keeps pyproject.toml's contracts.

From the top: interfaces (cli, app, rag_commands, llama_index, evaluation) > training > answer
(rag.ask, rag.evidence, rag.sentences) > retrieval (the rest of rag) > model (unimodel and what it
is made of). Running the check here puts it in CI, which runs pytest.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # installed by the `test` extra


def test_layers_point_down():
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the test extra (pip install -e '.[test]')")
    result = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    kept = re.search(r"Contracts: (\d+) kept, 0 broken", report)
    assert kept and int(kept.group(1)) >= 2, report  # both layer contracts ran
