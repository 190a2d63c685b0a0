#!/usr/bin/python3
"""Writes the fuzzer's seed corpus (valid and nearly valid checkpoints). Run by hand."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
import safetensors_numpy  # noqa: E402

out = os.path.join(os.path.dirname(__file__), "corpus")
safetensors_numpy.write(os.path.join(out, "two_dtypes.safetensors"),
                        {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1.0, 2.0])},
                        {"step": "3"})
safetensors_numpy.write(os.path.join(out, "scalar_and_empty.safetensors"),
                        {"s": np.array(1.5, dtype=np.float32), "e": np.zeros((0, 4), dtype=np.float64)})
safetensors_numpy.write(os.path.join(out, "nested_names.safetensors"),
                        {"blocks.0.attn.in_proj_weight": np.ones((3, 2), dtype=np.float32),
                         "optimizer.state.w.exp_avg": np.zeros(2, dtype=np.float32)},
                        {"config.task": "sort", "written_by": "xgrad-train"})
# Shaped like the fuzz target's model (Linear(2, 3), LayerNorm(3)) and Adam: loads reach
# load_state_dict.
state = {"0.weight": np.ones((3, 2), np.float32), "0.bias": np.zeros(3, np.float32),
         "1.weight": np.ones(3, np.float32), "1.bias": np.zeros(3, np.float32),
         "optimizer.lr": np.array(1e-3), "optimizer.step": np.array(1.0)}
for name in ("0.weight", "0.bias", "1.weight", "1.bias"):
    shape = state[name].shape
    state["optimizer.state." + name + ".step"] = np.array(1.0)
    state["optimizer.state." + name + ".exp_avg"] = np.full(shape, 0.1, np.float32)
    state["optimizer.state." + name + ".exp_avg_sq"] = np.full(shape, 0.01, np.float32)
safetensors_numpy.write(os.path.join(out, "model_and_adam.safetensors"), state, {"step": "1"})
# The integer, bool and half dtypes PyTorch and numpy write, named like the target's
# model: loads reach the exactness checks (2^24 + 1 does not fit its float32).
safetensors_numpy.write(os.path.join(out, "other_dtypes.safetensors"),
                        {"0.weight": np.array([[1, 0], [0, 1], [1, 1]], dtype=np.bool_),
                         "0.bias": np.array([1, 2**24 + 1, -3], dtype=np.int32),
                         "1.weight": np.array([1.0, 0.5, -2.0], dtype=np.float16),
                         "1.bias": np.array([0x3F80, 0, 0xBF80], dtype=np.uint16),  # BF16 bits: 1, 0, -1
                         "ids": np.array([[3, -1], [2**53, 7]], dtype=np.int64), "mask": np.arange(4, dtype=np.uint8)},
                        {"step": "0"}, {"1.bias": "BF16"})
# A large header: 3000 entries.
safetensors_numpy.write(os.path.join(out, "many_tensors.safetensors"),
                        {"t%04d" % i: np.full(i % 3, i, np.float32) for i in range(3000)})
with open(os.path.join(out, "header_only.safetensors"), "wb") as f:
    f.write((8).to_bytes(8, "little") + b"{}      ")
print("wrote", len(os.listdir(out)), "seed files")
