#!/usr/bin/python3
"""Writes numpy_written.safetensors, the file tests/test_checkpoint.cpp reads to show that
xgrad opens what numpy and PyTorch users write. Run by hand from this folder."""
import numpy as np

import safetensors_numpy

safetensors_numpy.write("numpy_written.safetensors", {
    "linear.weight": np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1.0,
    "linear.bias": np.array([1.5, -2.0, 0.25], dtype=np.float64),
    "scale": np.array(3.0, dtype=np.float32),
}, {"step": "7", "written_by": "numpy"})
print("wrote numpy_written.safetensors")
