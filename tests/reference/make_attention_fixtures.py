#!/usr/bin/python3
"""Writes attention_fixtures.json: PyTorch's nn.MultiheadAttention, the transformer
layers and stacks (nn.TransformerEncoderLayer / DecoderLayer, pre- and post-LN,
TransformerEncoder / Decoder, Transformer) in float64, for tests/test_mha_parity.cpp. Run by
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

from fixture_json import pack, randomized

torch.manual_seed(4321)
torch.set_default_dtype(torch.float64)


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
    return randomized(nn.MultiheadAttention(8, 2, batch_first=options.pop("batch_first", True), **options), 0.5)


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

# The transformer layers and stacks. Masks per attention block, under xgrad's names:
# "src" (encoder self-attention), "tgt" (decoder self-attention), "memory" (cross).
def causal_mask(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)  # True = hidden


def masks_of(**blocks):
    out = {}
    for block, masks in blocks.items():
        out[block] = {}
        for name, mask in masks.items():
            if name == "is_causal":
                out[block]["is_causal"] = True
            else:
                out[block][name] = pack_mask(mask)
    return out


def layer_case(module, inputs, call, masks, options):
    inputs = {name: t.detach().clone().requires_grad_(True) for name, t in inputs.items()}
    out = call(module, **inputs)
    grad_output = torch.randn_like(out)
    out.backward(grad_output)
    return {
        "options": options,
        "inputs": {name: pack(t) for name, t in inputs.items()},
        "masks": masks,
        "params": {name: pack(p) for name, p in module.named_parameters()},
        "grad_output": pack(grad_output),
        "output": pack(out),
        "grads": {name: pack(p.grad) for name, p in module.named_parameters()},
        "input_grads": {name: pack(t.grad) for name, t in inputs.items()},
    }


def layer_options(**o):
    defaults = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=False,
                    activation="relu")
    return {**defaults, **o}


def encoder_layer_case(**o):
    o = layer_options(**o)
    layer = randomized(nn.TransformerEncoderLayer(**o), 0.5)
    src = torch.randn(2, 5, 8) if o["batch_first"] else torch.randn(5, 2, 8)
    return layer_case(layer, {"src": src}, lambda m, src: m(src, src_key_padding_mask=padding),
                      masks_of(src={"key_padding_mask": padding}), o)


def decoder_layer_case(**o):
    o = layer_options(**o)
    layer = randomized(nn.TransformerDecoderLayer(**o), 0.5)
    tgt = torch.randn(2, 4, 8) if o["batch_first"] else torch.randn(4, 2, 8)
    memory = torch.randn(2, 5, 8) if o["batch_first"] else torch.randn(5, 2, 8)
    return layer_case(layer, {"tgt": tgt, "memory": memory},
                      lambda m, tgt, memory: m(tgt, memory, tgt_mask=causal_mask(4), memory_key_padding_mask=padding),
                      masks_of(tgt={"is_causal": True}, memory={"key_padding_mask": padding}), o)


cases["encoder_layer_pre_ln"] = encoder_layer_case(norm_first=True)
cases["encoder_layer_post_ln"] = encoder_layer_case()
cases["encoder_layer_post_ln_gelu_seq_first"] = encoder_layer_case(activation="gelu", batch_first=False)
cases["decoder_layer_post_ln"] = decoder_layer_case()
cases["decoder_layer_pre_ln_gelu"] = decoder_layer_case(norm_first=True, activation="gelu")
cases["decoder_layer_seq_first"] = decoder_layer_case(batch_first=False)

for norm_first in (False, True):
    o = layer_options(norm_first=norm_first)
    stack = randomized(nn.TransformerEncoder(nn.TransformerEncoderLayer(**o), 2, norm=nn.LayerNorm(8)), 0.5)
    cases[f"encoder_stack_{'pre' if norm_first else 'post'}_ln"] = layer_case(
        stack, {"src": torch.randn(2, 5, 8)}, lambda m, src: m(src, src_key_padding_mask=padding),
        masks_of(src={"key_padding_mask": padding}), dict(o, num_layers=2, norm=True))
    stack = randomized(nn.TransformerDecoder(nn.TransformerDecoderLayer(**o), 2), 0.5)
    cases[f"decoder_stack_{'pre' if norm_first else 'post'}_ln"] = layer_case(
        stack, {"tgt": torch.randn(2, 4, 8), "memory": torch.randn(2, 5, 8)},
        lambda m, tgt, memory: m(tgt, memory, tgt_mask=causal_mask(4), memory_key_padding_mask=padding),
        masks_of(tgt={"is_causal": True}, memory={"key_padding_mask": padding}), dict(o, num_layers=2, norm=False))

# The whole encoder-decoder (the Annotated Transformer's, without embeddings): PyTorch's
# masks as a user passes them: src padding, a causal float tgt_mask, memory padding.
for norm_first in (False, True):
    model = randomized(nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                                     dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=norm_first),
                       0.5)
    float_causal = nn.Transformer.generate_square_subsequent_mask(4)
    cases[f"transformer_{'pre' if norm_first else 'post'}_ln"] = layer_case(
        model, {"src": torch.randn(2, 5, 8), "tgt": torch.randn(2, 4, 8)},
        lambda m, src, tgt: m(src, tgt, tgt_mask=float_causal, src_key_padding_mask=padding,
                              memory_key_padding_mask=padding),
        masks_of(src={"key_padding_mask": padding}, tgt={"attn_bias": float_causal},
                 memory={"key_padding_mask": padding}),
        dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
             batch_first=True, norm_first=norm_first, activation="relu"))

with open("attention_fixtures.json", "w") as f:
    json.dump({"torch_version": torch.__version__, "cases": cases}, f, indent=1)
print("wrote attention_fixtures.json with", len(cases), "cases, torch", torch.__version__)
