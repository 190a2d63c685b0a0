#!/usr/bin/python3
"""Writes attention_fixtures.json: PyTorch's nn.MultiheadAttention and
nn.TransformerEncoderLayer (pre-LN) in float64, for tests/test_mha_parity.cpp. Run by
hand with Debian's python3-torch, from this folder:

    /usr/bin/python3 make_attention_fixtures.py

Each case: inputs, parameters under PyTorch's state-dict names, the upstream gradients
used for backward (of the output and, for MHA, of the attention weights), the output,
the weights, and the gradients of every input and parameter. Masks are stored under the
name xgrad gives their form (PyTorch's bool masks as 0/1 with its polarity, float masks
as *_bias).
"""
import json
import math

import torch
import torch.nn as nn

torch.manual_seed(4321)
torch.set_default_dtype(torch.float64)


def pack(t):
    t = t.detach().to(torch.float64)
    # JSON has no infinities: they travel as the strings "inf" / "-inf".
    values = [v if math.isfinite(v) else str(v) for v in t.reshape(-1).tolist()]
    return {"shape": list(t.shape), "values": values}


def randomize(module):
    # PyTorch zeroes the projection biases at init; random ones test that they are used.
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return module


def pack_mask(mask):
    """A PyTorch mask under the name xgrad gives its form: bool masks keep PyTorch's
    polarity (1 = hidden), float masks are biases."""
    if mask.dtype == torch.bool:
        return pack(mask.to(torch.float64))
    return pack(mask)


def mha_case(module, query, key, value, key_padding_mask=None, attn_mask=None, causal=False, average=True):
    """Forward with need_weights, and backward of a loss through both the output and the
    weights (attention supervision), so that the weights' gradient is compared too."""
    same = key is query and value is query
    # Fresh leaves, so that no gradient is shared between roles or carried over from
    # another case.
    query = query.detach().clone()
    key, value = (query, query) if same else (key.detach().clone(), value.detach().clone())
    inputs = {"query": query, "key": key, "value": value}
    for t in ({"query": query} if same else inputs).values():
        t.requires_grad_(True)
    if causal:
        L, S = query.shape[1 if module.batch_first else 0], key.shape[1 if module.batch_first else 0]
        attn_mask = torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1)  # True = hidden
    out, weights = module(query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                          need_weights=True, average_attn_weights=average)
    grad_output = torch.randn_like(out)
    grad_weights = torch.randn_like(weights)
    ((out * grad_output).sum() + (weights.nan_to_num() * grad_weights).sum()).backward()
    case = {
        "options": {"kdim": module.kdim, "vdim": module.vdim, "batch_first": module.batch_first,
                    "add_bias_kv": module.bias_k is not None, "add_zero_attn": module.add_zero_attn},
        "self_attention": same,
        "inputs": {name: pack(t) for name, t in inputs.items()},
        "params": {name: pack(p) for name, p in module.named_parameters()},
        "grad_output": pack(grad_output),
        "grad_weights": pack(grad_weights),
        "average_weights": average,
        "output": pack(out),
        "weights": pack(weights),
        "grads": {name: pack(p.grad) for name, p in module.named_parameters()},
        "input_grads": {name: pack(t.grad) for name, t in ({"query": query} if same else inputs).items()},
        "causal": causal,
        "masks": {},
    }
    if key_padding_mask is not None:
        name = "key_padding_mask" if key_padding_mask.dtype == torch.bool else "key_padding_bias"
        case["masks"][name] = pack_mask(key_padding_mask)
    if attn_mask is not None and not causal:
        name = "attn_mask" if attn_mask.dtype == torch.bool else "attn_bias"
        case["masks"][name] = pack_mask(attn_mask)
    return case


def mha(**options):
    return randomize(nn.MultiheadAttention(8, 2, batch_first=options.pop("batch_first", True), **options))


cases = {}
x = torch.randn(2, 5, 8)
cases["self"] = mha_case(mha(), x, x, x)
cases["cross"] = mha_case(mha(), torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8))
padding = torch.tensor([[False, False, False, True, True], [False, True, False, False, False]])
y = torch.randn(2, 5, 8)
cases["key_padding_mask"] = mha_case(mha(), y, y, y, key_padding_mask=padding)
z = torch.randn(2, 5, 8)
cases["causal"] = mha_case(mha(), z, z, z, causal=True)
cases["kdim_vdim"] = mha_case(mha(kdim=6, vdim=4), torch.randn(2, 3, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 4))
# PyTorch's mask forms: a bool [N * H, L, S] mask; float masks (added), with -inf and
# finite values; per-head weights; sequence-first.
per_head = torch.rand(4, 3, 5) < 0.3
per_head[:, :, 0] = False  # every query keeps a key
cases["attn_mask_3d"] = mha_case(mha(), torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8),
                                 attn_mask=per_head, average=False)
float_mask = torch.randn(3, 5)
float_mask[0, 2] = float_mask[2, 4] = float("-inf")
cases["float_attn_mask"] = mha_case(mha(), torch.randn(2, 3, 8), y, y, attn_mask=float_mask,
                                    key_padding_mask=padding)
# (torch 1.13 cannot combine a float key_padding_mask with a float attn_mask; alone it is added.)
cases["float_key_padding_mask"] = mha_case(mha(), torch.randn(2, 3, 8), y, y, key_padding_mask=torch.randn(2, 5) - 1)
cases["seq_first"] = mha_case(mha(batch_first=False), torch.randn(5, 2, 8), torch.randn(5, 2, 8),
                              torch.randn(5, 2, 8), key_padding_mask=padding)
# add_bias_kv and add_zero_attn, alone and together with masks of both kinds.
cases["bias_kv"] = mha_case(mha(add_bias_kv=True), x, x, x)
cases["zero_attn"] = mha_case(mha(add_zero_attn=True), x, x, x, causal=True)
cases["bias_kv_zero_attn_masks"] = mha_case(mha(add_bias_kv=True, add_zero_attn=True), torch.randn(2, 3, 8), y, y,
                                            key_padding_mask=padding, attn_mask=per_head, average=False)
cases["bias_kv_kdim_seq_first"] = mha_case(mha(add_bias_kv=True, kdim=6, vdim=4, batch_first=False),
                                           torch.randn(3, 2, 8), torch.randn(5, 2, 6), torch.randn(5, 2, 4),
                                           attn_mask=float_mask)

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
