"""The Q/K/V calculator: softmax(QK^T/sqrt(d))V step by step, with masks and heads.

settings   heads, scale, mask, dropout and seed: one frozen `Settings`, checked where it is built
arithmetic attention's arithmetic in a float type; extended precision where float64 overflows
steps      the computation itself (`attend`, `attend_from_x`), every intermediate kept
reference  the same through torch (scaled_dot_product_attention, nn.MultiheadAttention)
matrices   reading and writing matrices as text or table rows
form       the calculator form's labels, presets and defaults
presets    worked examples
report     one calculation as checks, notes, HTML cards and JSON
plots      heatmaps of matrices
patches    an image cut into patches, attended with random Q/K/V
"""

from attention.calculator.arithmetic import softmax
from attention.calculator.settings import Settings, causal_mask
from attention.calculator.steps import ProjectedSteps, Steps, attend, attend_from_x, merge_heads, split_heads

__all__ = [
    "ProjectedSteps",
    "Settings",
    "Steps",
    "attend",
    "attend_from_x",
    "causal_mask",
    "merge_heads",
    "softmax",
    "split_heads",
]
