"""The torchrun helper the multi-process tests use: a launch that hangs is killed with every
worker (torchrun starts each in a session of its own) and shows where the workers were."""

import uuid
from pathlib import Path

import pytest

import net


def running(marker: str) -> list[int]:
    """Processes whose command line names `marker`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.slow  # a torchrun launch that is left to hang for its timeout
def test_a_hung_launch_is_killed_with_its_workers_and_shows_their_stacks(tmp_path, monkeypatch):
    module = f"sleeper_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("import time\nprint('worker up', flush=True)\ntime.sleep(600)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    result, printed = net._launch([], timeout=8, module=module)
    assert result is None
    assert printed.count("worker up") == 2
    assert f"{module}.py" in printed and "Fatal Python error" in printed  # the workers' stacks
    assert running(module) == []
