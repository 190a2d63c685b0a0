#!/usr/bin/python3
"""Writes nn_fixtures.json: PyTorch's float64 outputs and gradients for the layers that
tests/test_nn_parity.cpp compares against. Run by hand (not part of ./run test) with
Debian's python3-torch, from this folder:

    /usr/bin/python3 make_nn_fixtures.py

Every case holds its inputs, parameters (PyTorch state-dict names), the upstream
gradient `grad_output` used for backward, the output, and the gradients of the input
and of every parameter. Tensors are {"shape": [...], "values": [...]} in row-major order.
"""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

from fixture_json import case_for, pack, randomized

torch.manual_seed(1234)
torch.set_default_dtype(torch.float64)


cases = {}
cases["linear"] = case_for(nn.Linear(5, 3), torch.randn(2, 4, 5))
cases["linear_no_bias"] = case_for(nn.Linear(5, 3, bias=False), torch.randn(4, 5))
cases["layer_norm"] = case_for(randomized(nn.LayerNorm(6)), torch.randn(3, 2, 6) * 3 + 1)
cases["embedding"] = case_for(nn.Embedding(7, 4), torch.tensor([[1, 6, 1], [0, 3, 5]]))
cases["gelu"] = case_for(nn.GELU(), torch.randn(12))
cases["gelu_tanh"] = case_for(nn.GELU(approximate="tanh"), torch.randn(12))
cases["log_softmax"] = case_for(nn.LogSoftmax(dim=-1), torch.randn(3, 5) * 4)
cases["log_softmax_axis0"] = case_for(nn.LogSoftmax(dim=0), torch.randn(3, 5))

# Cross-entropy over [N, L, C] logits with class on the last axis (PyTorch wants it on
# axis 1, hence the transpose), one target ignored.
logits = torch.randn(2, 3, 5, requires_grad=True)
targets = torch.tensor([[4, 0, -100], [2, 2, 1]])
loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)
loss.backward()
cases["cross_entropy"] = {
    "input": pack(logits),
    "targets": {"shape": list(targets.shape), "values": targets.reshape(-1).tolist()},
    "ignore_index": -100,
    "output": pack(loss),
    "grad_input": pack(logits.grad),
}

with open("nn_fixtures.json", "w") as f:
    json.dump({"torch_version": torch.__version__, "cases": cases}, f, indent=1)
print("wrote nn_fixtures.json with", len(cases), "cases, torch", torch.__version__)
