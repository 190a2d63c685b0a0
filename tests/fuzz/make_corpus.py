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
with open(os.path.join(out, "header_only.safetensors"), "wb") as f:
    f.write((8).to_bytes(8, "little") + b"{}      ")
print("wrote", len(os.listdir(out)), "seed files")
