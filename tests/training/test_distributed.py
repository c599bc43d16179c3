"""Training past one process: `torchrun --nproc_per_node 2 -m unirag train` on the CPU (gloo)
writes the adapter one process writes for the same global batch. The same command with a GPU
launcher config is the multi-GPU run (train/launch_multi_gpu.sh)."""

import shutil

import numpy as np
from safetensors.torch import load_file

from unirag.training.config import load_config
from unirag.training.trainer import train

from net import torchrun
from test_trainer import CORPUS_LINES


def test_two_cpu_processes_train_the_adapter_one_process_trains(tiny_model_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 4) + "\n")
    # test-tiny: a global batch of 4 in micro-batches of 2, so one process accumulates two
    # micro-batches per step and two processes take one each; LoRA dropout stays on (0.05).
    one = train(load_config("test-tiny"), str(tiny_model_dir), str(corpus), str(tmp_path / "one"))
    two = tmp_path / "two"
    result = torchrun(["train", "--recipe", "test-tiny", "--model", str(tiny_model_dir), "--data", str(corpus),
                       "--output", str(two)], before_retry=lambda: shutil.rmtree(two, ignore_errors=True))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("adapter written") == 1  # the first process writes and says so
    a, b = load_file(one / "adapter_model.safetensors"), load_file(two / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for key in a:  # the same examples, masks and dropout per micro-batch: only summation order differs
        np.testing.assert_allclose(b[key].numpy(), a[key].numpy(), atol=1e-6, err_msg=key)
