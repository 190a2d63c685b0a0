#!/usr/bin/python3
"""Writes nn_options_fixtures.json: PyTorch's outputs and gradients for the options of
Embedding (padding_idx, max_norm, norm_type, scale_grad_by_freq), LayerNorm over several
trailing axes and RMSNorm, which tests/test_nn_parity.cpp compares against. Run by hand
with Debian's python3-torch, from this folder:

    /usr/bin/python3 make_nn_options_fixtures.py

Each case is laid out as in make_nn_fixtures.py (input, params as before the forward,
grad_output, output, grads, grad_input) plus the layer's "options"; a max_norm case also
holds "weight_after", the table as the forward's in-place renorm left it. Float64 unless
a case has "dtype": "float32".

torch 1.13 has no nn.RMSNorm (PyTorch 2.4 added it): RMSNormReference below computes
y = x / sqrt(mean(x^2 over the normalized axes) + eps) * weight by hand, with eps=None
meaning torch.finfo(x.dtype).eps, as torch.nn.RMSNorm does.
"""
import json
import math

import torch
import torch.nn as nn

from fixture_json import case_for, pack, pack_ids, randomized

torch.manual_seed(4321)
torch.set_default_dtype(torch.float64)


class RMSNormReference(nn.Module):
    """torch.nn.RMSNorm of PyTorch 2.4, written out."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, dtype=None):
        super().__init__()
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape, dtype=dtype)) if elementwise_affine else None

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        axes = tuple(range(-len(self.normalized_shape), 0))
        y = x * torch.rsqrt(x.pow(2).mean(dim=axes, keepdim=True) + eps)
        return y * self.weight if self.weight is not None else y


def embedding_case(num, dim, ids, **options):
    table = nn.Embedding(num, dim, **options)
    with torch.no_grad():  # rows of norm 1 to 4: max_norm has some to shrink, some to keep
        table.weight.mul_(1.5)
        if table.padding_idx is not None:
            table.weight[table.padding_idx].fill_(0)  # as torch initialises it
    case = case_for(table, ids, {k: ("inf" if v == math.inf else v) for k, v in options.items()})
    if options.get("max_norm") is not None:
        case["weight_after"] = pack(table.weight)
    return case


cases = {}
ids = torch.tensor([[1, 6, 1, 2], [0, 3, 5, 1]])
cases["embedding_padding_idx"] = embedding_case(7, 4, ids, padding_idx=1)
cases["embedding_padding_idx_negative"] = embedding_case(7, 4, ids, padding_idx=-2)  # row 5
cases["embedding_max_norm"] = embedding_case(7, 4, ids, max_norm=1.0)
cases["embedding_max_norm_l1"] = embedding_case(7, 4, ids, max_norm=2.0, norm_type=1.0)
cases["embedding_max_norm_l3"] = embedding_case(7, 4, ids, max_norm=1.5, norm_type=3.0)
cases["embedding_max_norm_inf"] = embedding_case(7, 4, ids, max_norm=1.0, norm_type=math.inf)
cases["embedding_scale_grad_by_freq"] = embedding_case(7, 4, ids, scale_grad_by_freq=True)
cases["embedding_all_options"] = embedding_case(6, 3, torch.tensor([[0, 2, 2, 5], [2, 0, 4, 0], [1, 5, 5, 5]]),
                                                padding_idx=0, max_norm=1.2, norm_type=2.0, scale_grad_by_freq=True)

cases["layer_norm_2d"] = case_for(randomized(nn.LayerNorm([4, 5])), torch.randn(3, 4, 5) * 2 + 0.5,
                                  {"normalized_shape": [4, 5], "eps": 1e-5, "elementwise_affine": True})
cases["layer_norm_3d_no_affine"] = case_for(nn.LayerNorm([2, 3, 4], elementwise_affine=False),
                                            torch.randn(2, 2, 3, 4) * 3 - 1,
                                            {"normalized_shape": [2, 3, 4], "eps": 1e-5, "elementwise_affine": False})
cases["layer_norm_2d_eps"] = case_for(randomized(nn.LayerNorm((3, 4), eps=1e-2)), torch.randn(5, 3, 4) * 0.1,
                                      {"normalized_shape": [3, 4], "eps": 1e-2, "elementwise_affine": True})

cases["rms_norm"] = case_for(randomized(RMSNormReference([6])), torch.randn(3, 2, 6) * 3 + 1,
                             {"normalized_shape": [6], "eps": None, "elementwise_affine": True})
cases["rms_norm_2d"] = case_for(randomized(RMSNormReference([4, 5], eps=1e-6)), torch.randn(2, 3, 4, 5),
                                {"normalized_shape": [4, 5], "eps": 1e-6, "elementwise_affine": True})
cases["rms_norm_no_affine_eps"] = case_for(RMSNormReference([5], eps=0.5, elementwise_affine=False),
                                           torch.randn(4, 5) * 0.5,
                                           {"normalized_shape": [5], "eps": 0.5, "elementwise_affine": False})
# float32 with the default eps, finfo(float32).eps ~ 1.19e-7: values ~1e-4 make it count.
small = (torch.randn(3, 8) * 1e-4).to(torch.float32)
rms32 = randomized(RMSNormReference([8], dtype=torch.float32))
cases["rms_norm_float32_default_eps"] = case_for(rms32, small,
                                                 {"normalized_shape": [8], "eps": None, "elementwise_affine": True},
                                                 torch.randn(3, 8).to(torch.float32))
cases["rms_norm_float32_default_eps"]["dtype"] = "float32"

with open("nn_options_fixtures.json", "w") as f:
    json.dump({"torch_version": torch.__version__, "cases": cases}, f, indent=1)
print("wrote nn_options_fixtures.json with", len(cases), "cases, torch", torch.__version__)
