"""Shared by the make_*_fixtures.py scripts: tensors as the JSON the C++ tests read
(tests/fixtures.hpp), random parameters, and one layer's forward and backward."""
import math

import torch


def pack(t):
    """A float tensor as {"shape", "values"}, row-major float64. JSON has no infinities:
    they travel as the strings "inf" / "-inf"."""
    t = t.detach().to(torch.float64)
    values = [v if math.isfinite(v) else str(v) for v in t.reshape(-1).tolist()]
    return {"shape": list(t.shape), "values": values}


def pack_ids(ids):
    """An integer tensor (ids, targets, indices) as {"shape", "values"}."""
    return {"shape": list(ids.shape), "values": ids.reshape(-1).tolist()}


def randomized(module, scale=1.0):
    """Every parameter redrawn N(0, scale^2): non-default affine parameters and biases
    (PyTorch zeroes some at init), so that the tests see them used."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * scale)
    return module


def case_for(module, x, options=None, grad_output=None):
    """Forward and backward of a module on x (a float tensor or integer ids): the input,
    the parameters as before the forward (an in-place renorm may change them), the
    upstream gradient, the output and every gradient; the layer's options when given."""
    params = {name: pack(p) for name, p in module.named_parameters()}
    floating = x.is_floating_point()
    if floating:
        x.requires_grad_(True)
    y = module(x)
    if grad_output is None:
        grad_output = torch.randn_like(y)
    y.backward(grad_output)
    case = {} if options is None else {"options": options}
    case.update({
        "input": pack(x) if floating else pack_ids(x),
        "params": params,
        "grad_output": pack(grad_output),
        "output": pack(y),
        "grads": {name: pack(p.grad) for name, p in module.named_parameters()},
    })
    if floating:
        case["grad_input"] = pack(x.grad)
    return case
