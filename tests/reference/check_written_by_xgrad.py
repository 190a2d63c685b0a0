#!/usr/bin/python3
"""Run by ctest after test_checkpoint: numpy reads the file xgrad wrote and finds the
values that test wrote (see tests/test_checkpoint.cpp, written_for_numpy)."""
import sys

import numpy as np

import safetensors_numpy

arrays, metadata = safetensors_numpy.read(sys.argv[1])
expected = {
    "ramp": np.arange(6, dtype=np.float32).reshape(2, 3) * 0.25,
    "column": np.array([[1.0], [-2.5], [1e-300]], dtype=np.float64),
}
assert sorted(arrays) == sorted(expected), sorted(arrays)
for name, want in expected.items():
    got = arrays[name]
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
    assert np.array_equal(got, want), (name, got)
assert metadata == {"step": "42", "task": "sort"}, metadata
print("1 passed, 0 failed")
