#!/usr/bin/python3
"""Writes the safetensors files tests/test_checkpoint.cpp reads to show that xgrad opens
what numpy and PyTorch users write. Run by hand from this folder (Debian's python3-torch):

  numpy_written.safetensors   float32/float64 weights and metadata, as a model's
  dtypes_written.safetensors  one tensor per dtype PyTorch and numpy write for weights and
                              masks (BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16,
                              F32, F64), each tensor's bytes from torch's or numpy's own
                              conversion (torch 1.13 has no uint16/32/64: numpy writes them)
  dtypes_expected.json        each of those tensors as torch (numpy) converts it to float64:
                              {"dtype", "shape", "values"}, non-finite values as "inf",
                              "-inf", "nan"
"""
import json
import math

import numpy as np
import torch

import safetensors_numpy

safetensors_numpy.write("numpy_written.safetensors", {
    "linear.weight": np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1.0,
    "linear.bias": np.array([1.5, -2.0, 0.25], dtype=np.float64),
    "scale": np.array(3.0, dtype=np.float32),
}, {"step": "7", "written_by": "numpy"})
print("wrote numpy_written.safetensors")

inf, nan = float("inf"), float("nan")
from_torch = {
    # name: (safetensors dtype, torch tensor)
    "mask": ("BOOL", torch.tensor([[True, False, True], [False, False, True]])),
    "u8": ("U8", torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8)),
    "i8": ("I8", torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8)),
    "i16": ("I16", torch.tensor([[-32768, -300, 0], [300, 32767, 7]], dtype=torch.int16)),
    # Past 2^24: exact in float64, not in float32.
    "i32": ("I32", torch.tensor([-2**31, -16777217, -1, 0, 16777216, 16777217, 2**31 - 1], dtype=torch.int32)),
    # Up to 2^53, and larger values float64 holds exactly (2^62, -2^63).
    "i64": ("I64", torch.tensor([-2**63, -2**53, -1, 0, 1, 2**53, 2**62], dtype=torch.int64)),
    "ids": ("I64", torch.tensor([[3, 0, 2], [1, 1, 4]], dtype=torch.int64)),
    "step": ("I64", torch.tensor(1200, dtype=torch.int64)),
    # Zeros of both signs, the largest finite, the smallest normal and subnormal, infinities, NaN.
    "f16": ("F16", torch.tensor([[0.0, -0.0, 1.0, -2.5], [65504.0, 6.103515625e-05, 5.960464477539063e-08, 1e-4],
                                 [inf, -inf, nan, 0.1]], dtype=torch.float16)),
    "bf16": ("BF16", torch.tensor([0.0, -0.0, 1.0, -2.5, 3.3895313892515355e38, 9.183549615799121e-41, 1e-30, inf,
                                   -inf, nan, 0.1, -123.456], dtype=torch.bfloat16)),
    "f32": ("F32", torch.tensor([1.5, -0.1, 3.4028234663852886e38], dtype=torch.float32)),
    "f64": ("F64", torch.tensor([[1e-300], [-2.5]], dtype=torch.float64)),
    "empty_f16": ("F16", torch.zeros(0, 3, dtype=torch.float16)),
}
from_numpy = {
    "u16": ("U16", np.array([0, 1, 40000, 65535], dtype=np.uint16)),
    "u32": ("U32", np.array([0, 16777217, 4294967295], dtype=np.uint32)),
    # 2^64 - 2^11 is the largest float64 below 2^64.
    "u64": ("U64", np.array([0, 2**53, 2**64 - 2**11], dtype=np.uint64)),
}

arrays, dtypes, expected = {}, {}, {}


def number(v):
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


for name, (dtype, t) in from_torch.items():
    # The bytes as torch holds them; bfloat16 through its 16 bits (numpy has no bfloat16).
    raw = t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
    arrays[name], dtypes[name] = raw, dtype
    expected[name] = {"dtype": dtype, "shape": list(t.shape),
                      "values": [number(v) for v in t.to(torch.float64).reshape(-1).tolist()]}
for name, (dtype, a) in from_numpy.items():
    arrays[name], dtypes[name] = a, dtype
    expected[name] = {"dtype": dtype, "shape": list(a.shape),
                      "values": [number(float(v)) for v in a.astype(np.float64).reshape(-1)]}
safetensors_numpy.write("dtypes_written.safetensors", arrays, {"written_by": "torch " + torch.__version__}, dtypes)

# The file reads back as written, through the numpy reader.
back, _ = safetensors_numpy.read("dtypes_written.safetensors")
for name, want in expected.items():
    got = [number(float(v)) for v in back[name].astype(np.float64).reshape(-1)]
    assert json.dumps(got) == json.dumps(want["values"]), (name, got, want["values"])
with open("dtypes_expected.json", "w") as f:
    json.dump({"torch_version": torch.__version__, "tensors": expected}, f, indent=1)
print("wrote dtypes_written.safetensors and dtypes_expected.json with", len(expected), "tensors")
