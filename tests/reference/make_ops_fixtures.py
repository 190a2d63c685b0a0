#!/usr/bin/python3
"""Writes ops_fixtures.json: PyTorch's float64 results for the ops of issue 18 (silu,
softplus, clamp, minimum/maximum, sin, cos, erf, cumsum, var/std, argmax/argmin, gather,
index_select, pad, triu/tril) and cross_entropy's options, for tests/test_ops_parity.cpp. Run by hand with Debian's
python3-torch, from this folder:

    /usr/bin/python3 make_ops_fixtures.py

Each case: the op, its arguments, float inputs, integer `index` (gather, index_select),
the upstream gradient, the output, and each input's gradient. An argmax/argmin case holds
integer `ids` instead of an output and gradients. Tensors are {"shape", "values"}.
"""
import json

import torch
import torch.nn.functional as F

from fixture_json import pack

torch.manual_seed(18)
torch.set_default_dtype(torch.float64)


cases = {}


def case(name, op, fn, inputs, args=None, index=None):
    inputs = [x.clone().requires_grad_(True) for x in inputs]
    y = fn(*inputs)
    grad_output = torch.randn_like(y)
    y.backward(grad_output)
    cases[name] = {
        "op": op,
        "args": args or {},
        "inputs": [pack(x) for x in inputs],
        "grad_output": pack(grad_output),
        "output": pack(y),
        "grads": [pack(x.grad) for x in inputs],
    }
    if index is not None:
        cases[name]["index"] = {"shape": list(index.shape), "values": index.reshape(-1).tolist()}


def ids_case(name, op, x, args, ids):
    cases[name] = {"op": op, "args": args, "inputs": [pack(x)],
                   "ids": {"shape": list(ids.shape), "values": ids.reshape(-1).tolist()}}


x = torch.randn(3, 5) * 3
case("silu", "silu", F.silu, [x])
case("softplus", "softplus", F.softplus, [torch.randn(4, 5) * 10], {"beta": 1.0, "threshold": 20.0})
case("softplus_beta", "softplus", lambda t: F.softplus(t, beta=2.0, threshold=5.0), [torch.randn(4, 5) * 4],
     {"beta": 2.0, "threshold": 5.0})
with_bounds = torch.randn(4, 6)
with_bounds[0, 0], with_bounds[1, 1] = -0.5, 0.7  # exactly on the bounds: the gradient passes
case("clamp", "clamp", lambda t: torch.clamp(t, min=-0.5, max=0.7), [with_bounds], {"min": -0.5, "max": 0.7})
case("clamp_min", "clamp", lambda t: torch.clamp(t, min=0.1), [with_bounds], {"min": 0.1})
case("clamp_max", "clamp", lambda t: torch.clamp(t, max=-0.2), [with_bounds], {"max": -0.2})
case("clamp_crossed", "clamp", lambda t: torch.clamp(t, min=0.5, max=-0.5), [with_bounds], {"min": 0.5, "max": -0.5})
a, b = torch.randn(3, 4), torch.randn(4)
a[1] = b  # a whole row of ties: each side gets half the gradient
case("minimum", "minimum", torch.minimum, [a, b])
case("maximum", "maximum", torch.maximum, [a, b])
case("sin", "sin", torch.sin, [x])
case("cos", "cos", torch.cos, [x])
case("erf", "erf", torch.erf, [x / 2])
y = torch.randn(3, 4, 2)
case("cumsum_0", "cumsum", lambda t: torch.cumsum(t, 0), [y], {"axis": 0})
case("cumsum_last", "cumsum", lambda t: torch.cumsum(t, -1), [y], {"axis": -1})
case("cumsum_middle", "cumsum", lambda t: torch.cumsum(t, 1), [y], {"axis": 1})
z = torch.randn(3, 4, 5) * 2 + 1
case("var_axis", "var", lambda t: torch.var(t, dim=1, unbiased=True, keepdim=True), [z],
     {"axes": [1], "correction": 1, "keepdim": True})
case("var_population", "var", lambda t: torch.var(t, dim=(0, 2), unbiased=False), [z],
     {"axes": [0, 2], "correction": 0, "keepdim": False})
case("var_all", "var", lambda t: torch.var(t), [z], {"correction": 1})
case("std_axis", "std", lambda t: torch.std(t, dim=-1), [z], {"axes": [-1], "correction": 1, "keepdim": False})
case("std_all", "std", lambda t: torch.std(t, unbiased=False), [z], {"correction": 0})
ties = torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, -1.0, -1.0], [2.0, -4.0, 7.0, -4.0]])
ids_case("argmax_axis1", "argmax", ties, {"axis": 1}, torch.argmax(ties, 1))
ids_case("argmin_axis1", "argmin", ties, {"axis": 1}, torch.argmin(ties, 1))
ids_case("argmax_axis0_keepdim", "argmax", ties, {"axis": 0, "keepdim": True}, torch.argmax(ties, 0, keepdim=True))
ids_case("argmin_axis0", "argmin", ties, {"axis": 0}, torch.argmin(ties, 0))
ids_case("argmax_all", "argmax", ties, {}, torch.argmax(ties))
ids_case("argmin_all", "argmin", ties, {}, torch.argmin(ties))
g = torch.randn(3, 4, 5)
index = torch.randint(0, 4, (3, 2, 5))
case("gather_axis1", "gather", lambda t: torch.gather(t, 1, index), [g], {"axis": 1}, index)
index_last = torch.randint(0, 5, (2, 3, 7))  # smaller than x on the other axes, longer on this one
case("gather_last", "gather", lambda t: torch.gather(t, -1, index_last), [g], {"axis": -1}, index_last)
rows = torch.tensor([2, 0, 2, 1])  # repeats: their gradients add up
case("index_select_0", "index_select", lambda t: torch.index_select(t, 0, rows), [g], {"axis": 0}, rows)
cols = torch.tensor([4, 1])
case("index_select_last", "index_select", lambda t: torch.index_select(t, -1, cols), [g], {"axis": -1}, cols)
p = torch.randn(2, 3, 4)
case("pad_last", "pad", lambda t: F.pad(t, (1, 2), value=0.5), [p], {"pads": [1, 2], "value": 0.5})
case("pad_two_axes_crop", "pad", lambda t: F.pad(t, (1, -1, 2, 0)), [p], {"pads": [1, -1, 2, 0], "value": 0.0})
case("pad_all_axes", "pad", lambda t: F.pad(t, (0, 1, 1, 0, 2, 1), value=-3.0), [p],
     {"pads": [0, 1, 1, 0, 2, 1], "value": -3.0})
m = torch.randn(2, 4, 5)
for diagonal in (0, 1, -2):
    case(f"triu_{diagonal}", "triu", lambda t: torch.triu(t, diagonal), [m], {"diagonal": diagonal})
    case(f"tril_{diagonal}", "tril", lambda t: torch.tril(t, diagonal), [m], {"diagonal": diagonal})

# cross_entropy with PyTorch's options. Class targets travel as `index`; a class weight
# in args; soft targets are a second input (they get a gradient too).
def ce_case(name, logits, target, **options):
    args = {k: v for k, v in options.items() if k != "weight"}
    args["class_axis"] = 1 if logits.dim() > 2 else -1
    if "weight" in options:
        args["weight"] = pack(options["weight"])
    fn_options = dict(options)
    if target.is_floating_point():
        case(name, "cross_entropy", lambda x, q: F.cross_entropy(x, q, **fn_options), [logits, target], args)
    else:
        case(name, "cross_entropy", lambda x: F.cross_entropy(x, target, **fn_options), [logits], args, target)


weight = torch.rand(5) + 0.2
hard = torch.tensor([4, 0, -100, 2, 2, 1])
ce_case("ce_axis1_mean", torch.randn(2, 5, 3), torch.tensor([[4, 0, -100], [2, 2, 1]]))
ce_case("ce_none_weight", torch.randn(6, 5), hard, weight=weight, reduction="none")
ce_case("ce_sum_weight_smoothing", torch.randn(6, 5), hard, weight=weight, label_smoothing=0.2, reduction="sum")
ce_case("ce_mean_weight_smoothing", torch.randn(6, 5), hard, weight=weight, label_smoothing=0.2)
ce_case("ce_mean_smoothing", torch.randn(6, 5), hard, label_smoothing=0.1)
ce_case("ce_axis1_none_smoothing", torch.randn(2, 5, 3), torch.tensor([[4, 0, 1], [2, -1, 1]]), ignore_index=-1,
        label_smoothing=0.3, reduction="none")
ce_case("ce_soft_mean", torch.randn(3, 5), torch.softmax(torch.randn(3, 5), -1))
ce_case("ce_soft_sum_weight", torch.randn(3, 5), torch.softmax(torch.randn(3, 5), -1), weight=weight,
        reduction="sum")
ce_case("ce_soft_axis1_none", torch.randn(2, 5, 3), torch.softmax(torch.randn(2, 5, 3), 1), weight=weight,
        label_smoothing=0.15, reduction="none")
ce_case("ce_soft_mean_smoothing", torch.randn(4, 5), torch.softmax(torch.randn(4, 5), -1), label_smoothing=0.25)

with open("ops_fixtures.json", "w") as f:
    json.dump({"torch_version": torch.__version__, "cases": cases}, f, indent=1)
print("wrote ops_fixtures.json with", len(cases), "cases, torch", torch.__version__)
