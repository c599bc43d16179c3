"""A plain wheel works outside the checkout: recipes, demo documents and the app are package data.

Builds the wheel from a copy of the package's sources, installs it with --no-deps into a fresh
virtual environment that sees this environment's site-packages through a .pth file (so nothing
is downloaded), then runs the commands from a folder outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[1]


def run(*args, cwd: Path, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{args}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(bin folder of a fresh venv with the built wheel installed, env, a folder outside the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.setdefault("HF_HUB_OFFLINE", "1")

    # the build's inputs only (never the checkout's build/ or egg-info, and no other engineer's files)
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "unirag", src / "unirag", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
        "--wheel-dir", dist, src, cwd=tmp, env=env, timeout=180)
    wheel = next(dist.glob("unirag-*.whl"))

    venv = tmp / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp, env=env)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                    cwd=tmp, env=env).stdout.strip())
    # this environment's packages, appended after the venv's own: its editable unirag is not
    # loaded (.pth files in a folder named by a .pth line are not processed)
    (site / "outer-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel,
        cwd=tmp, env=env)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return venv / "bin", env, elsewhere, wheel


def test_wheel_holds_package_data_and_no_apps(installed):
    import zipfile

    *_, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert "unirag/training/recipes/cpu-quick.yaml" in names and "unirag/app.py" in names
    assert "unirag/__main__.py" in names and any(n.startswith("unirag/sample_docs/") for n in names)
    assert "unirag/model/fast_decode/native_step.cpp" in names  # built on the user's machine
    assert any(n.startswith("unirag/weights/smollm2-135m-unimae/") for n in names)
    assert not any(n.startswith(("apps/", "tests/", "train/", "docs/")) for n in names)


def test_commands_run_outside_the_checkout(installed, tiny_model_dir):
    bin_, env, elsewhere, _ = installed
    python, unirag = bin_ / "python", bin_ / "unirag"

    out = run(python, "-c", "import importlib.util as u, unirag, unirag.cli.commands as c; "
              "from unirag.training.config import load_config; "
              "print(unirag.__file__); print(u.find_spec('apps')); print(load_config('cpu-quick').recipe); "
              "print(sorted(p.name for p in c.SAMPLE_DOCS.glob('*.md')))", cwd=elsewhere, env=env).stdout.splitlines()
    assert out[0].startswith(str(bin_.parent)) and out[1] == "None" and out[2] == "cpu-quick", out
    assert out[3].startswith("[") and ".md" in out[3], out

    assert "--recipe" in run(unirag, "train", "--recipe", "cpu-quick", "--help", cwd=elsewhere, env=env).stdout
    assert "unirag/sample_docs" in run(unirag, "demo", "--help", cwd=elsewhere, env=env).stdout
    assert "Usage: unirag" in run(python, "-m", "unirag", "--help", cwd=elsewhere, env=env).stdout

    docs = elsewhere / "notes"
    docs.mkdir()
    (docs / "cats.md").write_text("# Cats\n\nThe cat sat on the mat.\n\n## Dogs\n\nA dog ran in the park.\n")
    tiny = ["--model", tiny_model_dir, "--precision", "fp32", "--db", elsewhere / "db"]
    result = run(unirag, "ingest", docs, *tiny, "--chunk-size", "64", "--chunk-overlap", "8", "--no-progress",
                 cwd=elsewhere, env=env, timeout=180)
    assert "1 added" in result.stdout, result.stdout
    result = run(unirag, "retrieve", "Where did the cat sit?", "--top-k", "1", *tiny, cwd=elsewhere, env=env,
                 timeout=180)  # hybrid: builds the BM25 index, whose library logs must not show
    assert result.stdout.startswith("[1] ") and result.stderr == "", result.stderr
