"""Attention maps of vision transformers (DINO, DINOv2, timm ViTs, the shipped mnist_vit).

Its subpackages by role, lowest first (arrows only downward; docs/layout.md has one line per module):

backbone  one description of a backbone (`describe`): timm, transformers, Meta's DINO classes, open_clip, torchvision
models    what a model is and where it comes from: the registry (data), `load_vit` and its cache, the allow-list,
          weights and the start-up model, your own checkpoint, Hub errors, position embeddings
engine    one pass of pixels through a model, numbers only: the kernel hook, rows, queries, preprocessing, cost,
          `attention_maps`, batches, rollout, features, the step-by-step row, attention videos
draw      pictures and files of an engine result: views, texts, frames, the model view, feature views, outputs
serve     one server's visitors: the pass store, the live route, ZeroGPU, inputs, permalinks, the video job
relevance "Why this class?": class relevance of classifiers (Chefer et al., grad-rollout)
text      "Where is a cat?": text-prompted relevance for CLIP and SigLIP
score     which map to trust: perturbation, deletion/insertion, pointing and mIoU scores (`attention.vit.score`)

Development tools live outside the package: `python -m bench.compat` (the families' exactness table),
`python -m bench.evaluate_relevance` (the perturbation test), `python -m weights.train_mnist_vit --help`.
"""

from attention.vit.backbone import Backbone, describe
from attention.vit.engine.batch import BatchMaps, batch_maps, group_by_grid
from attention.vit.engine.capture import Recorder, check_supported, recording
from attention.vit.engine.extract import AttentionMaps, attention_maps, threshold_masks
from attention.vit.engine.flow import rollout, rollout_map
from attention.vit.engine.preprocess import Preprocess
from attention.vit.engine.query import Query, tokens_of
from attention.vit.engine.rows import query_rows
from attention.vit.engine.stepwise import RowSteps, explain_row
from attention.vit.engine.video import VideoFrameMaps, VideoRun, attention_video, write_video
from attention.vit.models.loader import default_device, load_vit
from attention.vit.models.own_checkpoint import register_checkpoint
from attention.vit.models.registry import (
    FAMILIES,
    OFFLINE_MODEL,
    REGISTRY,
    ModelSpec,
    default_model,
    default_model_attribute,
)
from attention.vit.models.sources import available

__all__ = [
    "Backbone",
    "describe",
    "Query",
    "Recorder",
    "check_supported",
    "query_rows",
    "recording",
    "tokens_of",
    "VideoFrameMaps",
    "VideoRun",
    "attention_video",
    "write_video",
    "AttentionMaps",
    "attention_maps",
    "BatchMaps",
    "Preprocess",
    "batch_maps",
    "group_by_grid",
    "rollout",
    "rollout_map",
    "threshold_masks",
    "DEFAULT_MODEL",
    "OFFLINE_MODEL",
    "FAMILIES",
    "REGISTRY",
    "ModelSpec",
    "available",
    "default_device",
    "load_vit",
    "default_model",
    "register_checkpoint",
    "RowSteps",
    "explain_row",
]


__getattr__ = default_model_attribute(__name__)  # `DEFAULT_MODEL`: the default model now, at each read
