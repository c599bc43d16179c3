#!/usr/bin/env bash
# Data-parallel UniMAE training on all GPUs of one machine (HF Trainer + accelerate).
# The global batch is the recipe's batch_size: accumulation = batch_size / (micro_batch_size x GPUs).
# For models that do not fit one GPU, pass an FSDP config: accelerate launch --config_file fsdp.yaml ...
set -euo pipefail
MODEL=${MODEL:-smollm2-135m}        # or a local folder, e.g. /models/Llama-3.2-1B
DATA=${DATA:-../shared/data/corpus/wiki_vital_extracts.txt}
OUT=${OUT:-runs/paper-$(date +%Y%m%d)}
GPUS=${GPUS:-$(python -c "import torch; print(torch.cuda.device_count())")}
accelerate launch --num_processes "$GPUS" -m unirag.cli.commands train \
  --recipe paper --model "$MODEL" --data "$DATA" --output "$OUT" \
  --micro-batch-size 8 "$@"   # global batch stays the recipe's 32 (needs 32 % (8 x GPUS) == 0)
