"""docs/models.md's compatibility table, generated from a run of the tests: each row names the tests that check
one way a model reaches the engine (a library's class, a folder, a class of one's own, a holder, a dtype), the
oracle they compare with, and, from this run, whether they all passed and the worst deviation they saw (the
comparisons record it: tests/vit/worst.py).

    python -m bench.models_compat       # runs those tests (a few minutes on 2 cores), prints the table
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    holder: str  # what the user holds
    oracle: str  # what it is compared with
    tests: str  # "file::function": every parametrisation of it


B, R, M = "tests/vit/backbone/", "tests/vit/relevance/", "tests/vit/models/"
ROWS = [
    Row(
        "timm ViTs, fused or unfused",
        "timm's unfused softmax",
        B + "test_timm.py::test_unfused_timm_attention_is_read_exactly_and_left_unfused",
    ),
    Row(
        "transformers encoders (Dinov2, Dinov2WithRegisters, DINOv3ViT, ViT, DeiT, CLIPVision, SiglipVision), "
        "sdpa and eager",
        "`output_attentions=True` under eager",
        B + "test_hf.py::test_every_layer_head_and_query_is_transformers_own_attention",
    ),
    Row(
        "transformers ViT/DeiT/Dinov2 ForImageClassification: relevance with no target, an index, a label name",
        "Chefer's rule and grad-rollout with full matrices (eager attentions, autograd); target, `top()` and names "
        "from its logits and `config.id2label`",
        R + "test_transformers.py::test_relevance_is_chefers_rule_on_transformers_own_attention",
    ),
    Row(
        "Meta's DINOv2 (`dinov2` package, block chunks)",
        "its own qkv's softmax",
        B + "test_meta.py::test_every_layer_head_and_query_is_dinov2s_own_softmax",
    ),
    Row(
        "open_clip and torchvision towers (`nn.MultiheadAttention`)",
        "`need_weights=True, average_attn_weights=False`",
        B + "test_mha.py::test_every_layer_head_and_query_is_multihead_attentions_own_weights",
    ),
    Row(
        "a transformers `save_pretrained` folder by its path (`load_vit`, `--weights`, `--model`)",
        "the saved object: every tensor and every row equal",
        M + "test_folder.py::test_a_save_pretrained_folder_by_its_path_is_the_saved_model",
    ),
    Row(
        "an open_clip folder by its path (`open_clip_config.json` + weights)",
        "the saved object's visual tower: every tensor and every row equal",
        M + "test_folder.py::test_an_open_clip_folder_is_its_visual_tower",
    ),
    Row(
        'an open_clip training checkpoint (`epoch_N.pt`) with `arch="open_clip:NAME"` (`--weights`, `--arch`)',
        "the saved object's visual tower: every tensor and every row equal",
        M + "test_folder.py::test_an_open_clip_training_checkpoint_on_its_open_clip_architecture",
    ),
    Row(
        "your own ViT class, `register_backbone(MyViT, Layout(...))`, fused or explicit",
        "the full softmax(q k^T / sqrt(d)) of its own projections, float64",
        B + "test_register.py::test_a_registered_vit_is_read_exactly",
    ),
    Row(
        "your own ViT classifier: relevance",
        "Chefer's rule with full matrices (its explicit path, autograd)",
        B + "test_register.py::test_relevance_on_a_registered_classifier_is_chefers_rule",
    ),
    Row(
        "`nn.DataParallel`",
        "timm's unfused softmax",
        B + "test_wrappers.py::test_data_parallel_is_read_as_the_model_it_holds",
    ),
    Row(
        "`DistributedDataParallel`",
        "timm's unfused softmax",
        B + "test_wrappers.py::test_distributed_data_parallel_is_read_as_the_model_it_holds",
    ),
    Row("`torch.compile`", "timm's unfused softmax", B + "test_wrappers.py::test_a_compiled_model_is_read_uncompiled"),
    Row(
        "timm `features_only=True` (FeatureGetterNet)",
        "timm's unfused softmax of its pruned ViT",
        B + "test_wrappers.py::test_timms_features_only_vit_is_its_pruned_vit",
    ),
    Row(
        '`torch.hub.load(clone, ..., source="local")` (a DINOv2 hubconf)',
        "the dinov2 package's own qkv's softmax",
        B + "test_wrappers.py::test_a_torch_hub_model_from_a_local_clone",
    ),
    Row(
        'a transformers `pipeline("image-classification")`: refused by name; `attention.unwrap(pipe)`',
        "`output_attentions=True` under eager (its model, the pipeline's normalisation)",
        B + "test_wrappers.py::test_a_pipeline_is_refused_by_name_and_unwrap_gives_its_model",
    ),
    Row(
        "a user's fp16 / bf16 model (scores in fp32)",
        "the float64 softmax of its own half-precision q and k",
        B + "test_wrappers.py::test_a_users_half_precision_model_is_scored_in_fp32",
    ),
]


def files() -> list[str]:
    """The test files the rows name, in order, once each."""
    return list(dict.fromkeys(r.tests.split("::")[0] for r in ROWS))


class _Outcomes:
    """A pytest plugin keeping each test's outcome by node id."""

    def __init__(self):
        self.outcome: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.outcome[report.nodeid] = report.outcome


def table(outcome: dict[str, str], worst: dict[str, float]) -> str:
    """The Markdown table: per row, its tests' verdict (exact: all passed) and the worst deviation they recorded."""
    lines = [
        "| what you hold | compared with | verdict | worst deviation / row peak | tests |",
        "|---|---|---|---:|---|",
    ]
    for r in ROWS:
        ids = [n for n in outcome if n == r.tests or n.startswith(r.tests + "[")]
        failed = [n for n in ids if outcome[n] != "passed"]
        verdict = "no test ran" if not ids else (f"{len(failed)} of {len(ids)} not passed" if failed else "exact")
        seen = [worst[n] for n in ids if n in worst]
        figure = f"{max(seen):.1e}" if seen else "-"
        path, func = r.tests.split("::")
        lines.append(
            f"| {r.holder} | {r.oracle} | {verdict} ({len(ids)}) | {figure} | `{path.split('/')[-1]}::{func}` |"
        )
    return "\n".join(lines)


def main() -> int:
    import pytest

    from tests.vit.worst import WORST

    got = _Outcomes()
    pytest.main(["-q", "-p", "no:cacheprovider", "--durations=0", "-o", "addopts=", *files()], plugins=[got])
    print(table(got.outcome, WORST))
    return 0


if __name__ == "__main__":
    sys.exit(main())
