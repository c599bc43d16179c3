#!/usr/bin/env bash
# On one CUDA GPU, with no network: the CUDA tests, then a short ingest / ask / decode benchmark
# (scripts/gpu_bench.py), each figure printed with the card's name. Bounded to stay under 8
# minutes in all. Run from anywhere: bash scripts/gpu_check.sh
# Uses .venv/bin/python when the checkout carries one, else python3 (GPU_CHECK_PYTHON overrides both). GPU_CHECK_DEVICE=cpu runs the
# same steps on the CPU (to try the script on a machine without a GPU).
set -u
cd "$(dirname "$0")/.."
PY="${GPU_CHECK_PYTHON:-python3}"
if [ -z "${GPU_CHECK_PYTHON:-}" ] && [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
status=0

echo "== python: $PY"
"$PY" - <<'PY' || { echo "gpu_check: torch is not importable with $PY"; exit 2; }
import torch
print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}",
      f"({torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB)"
      if torch.cuda.is_available() else "")
PY
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

echo "== CUDA tests (tests/model/test_cuda.py, tests/model/test_device.py)"
timeout 240 "$PY" -m pytest -q -p no:cacheprovider -rs tests/model/test_cuda.py tests/model/test_device.py || status=1

echo "== benchmark on $DEVICE"
timeout 240 "$PY" scripts/gpu_bench.py --device "$DEVICE" "$@" || status=1

exit $status
