#!/usr/bin/python3
"""Writes attention_fixtures.json: PyTorch's nn.MultiheadAttention and
nn.TransformerEncoderLayer (pre-LN) in float64, for tests/test_mha_parity.cpp. Run by
hand with Debian's python3-torch, from this folder:

    /usr/bin/python3 make_attention_fixtures.py

Each case: inputs, parameters under PyTorch's state-dict names, the upstream gradient
used for backward, the output, the head-averaged attention weights (MHA cases), and the
gradients of every input and parameter. Masks are given in xgrad's polarity (1 = may
attend): PyTorch's key_padding_mask and boolean attn_mask are their negation.
"""
import json

import torch
import torch.nn as nn

torch.manual_seed(4321)
torch.set_default_dtype(torch.float64)


def pack(t):
    t = t.detach().to(torch.float64)
    return {"shape": list(t.shape), "values": t.reshape(-1).tolist()}


def randomize(module):
    # PyTorch zeroes the projection biases at init; random ones test that they are used.
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return module


def mha_case(module, query, key, value, key_padding_mask=None, attn_mask=None, causal=False):
    inputs = {"query": query, "key": key, "value": value}
    same = key is query and value is query
    for t in ({"query": query} if same else inputs).values():
        t.requires_grad_(True)
    if causal:
        L, S = query.shape[1], key.shape[1]
        attn_mask = torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1)  # True = hidden
    out, weights = module(query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                          need_weights=True, average_attn_weights=True)
    grad_output = torch.randn_like(out)
    out.backward(grad_output)
    case = {
        "self_attention": same,
        "inputs": {name: pack(t) for name, t in inputs.items()},
        "params": {name: pack(p) for name, p in module.named_parameters()},
        "grad_output": pack(grad_output),
        "output": pack(out),
        "weights": pack(weights),
        "grads": {name: pack(p.grad) for name, p in module.named_parameters()},
        "input_grads": {name: pack(t.grad) for name, t in ({"query": query} if same else inputs).items()},
        "causal": causal,
    }
    if key_padding_mask is not None:
        case["key_mask"] = pack((~key_padding_mask).to(torch.float64))
    return case


cases = {}
x = torch.randn(2, 5, 8)
cases["self"] = mha_case(randomize(nn.MultiheadAttention(8, 2, batch_first=True)), x, x, x)
cases["cross"] = mha_case(randomize(nn.MultiheadAttention(8, 2, batch_first=True)),
                          torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8))
padding = torch.tensor([[False, False, False, True, True], [False, True, False, False, False]])
y = torch.randn(2, 5, 8)
cases["key_mask"] = mha_case(randomize(nn.MultiheadAttention(8, 2, batch_first=True)), y, y, y,
                             key_padding_mask=padding)
z = torch.randn(2, 5, 8)
cases["causal"] = mha_case(randomize(nn.MultiheadAttention(8, 2, batch_first=True)), z, z, z, causal=True)
cases["kdim_vdim"] = mha_case(randomize(nn.MultiheadAttention(8, 2, kdim=6, vdim=4, batch_first=True)),
                              torch.randn(2, 3, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 4))

layer = randomize(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, norm_first=True,
                                             batch_first=True))
src = torch.randn(2, 5, 8, requires_grad=True)
out = layer(src)
grad_output = torch.randn_like(out)
out.backward(grad_output)
cases["encoder_layer"] = {
    "inputs": {"src": pack(src)},
    "params": {name: pack(p) for name, p in layer.named_parameters()},
    "grad_output": pack(grad_output),
    "output": pack(out),
    "grads": {name: pack(p.grad) for name, p in layer.named_parameters()},
    "input_grads": {"src": pack(src.grad)},
}

with open("attention_fixtures.json", "w") as f:
    json.dump({"torch_version": torch.__version__, "cases": cases}, f, indent=1)
print("wrote attention_fixtures.json with", len(cases), "cases, torch", torch.__version__)
