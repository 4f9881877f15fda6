"""Attention maps of vision transformers (DINO, DINOv2, timm ViTs, the shipped mnist_vit).

models    the registry, `load_vit` (timm + huggingface-hub) and its cache, the model allow-list
weights   where weights come from (the hub, the shipped files), the start-up model
checkpoint  your own checkpoint (DINO's conventions, weights_only), the app's --model PATH --arch NAME
hub_errors  what failed loading from the Hub, why, and the fix
capture   the one hook mechanism: what each block hands the attention kernel, and its output tokens
rows      the engine: a batch's query rows in every layer from one fused pass (`query_rows`)
preprocess  the one preprocessing: an image as a model sees it (one image, batches, relevance)
extract   one image -> every layer's query row (`attention_maps`); threshold masks
query     the query type: tokens a model has (`tokens_of`), parsing and writing queries
compat    which timm ViT families are exact, against timm's own unfused attention (the README table)
batch     many images of one grid through one forward (datasets, videos): per-sample rows, CLS embedding
flow      attention rollout from the kept q and k (per-row or vit-explain's global discard)
posembed  position embeddings resampled to any grid as each family's own code does (DINO, DINOv2)
cost      a pass's compute, estimated before it runs, and the budget check
passes    a forward pass (q/k kept) and what it answers; the server's store of passes, shared by all
inputs    what a visitor sends, read: query fields, layer/head indices, an image's digest, the examples
gpu       ZeroGPU glue: `gpu` lends the functions that run a model a GPU on a ZeroGPU Space
views     a pass drawn as a view (heads, mean, rollout, masks) and the large clickable map
texts     the words beside a view: details, the query's label, scores vs weights, the legend
drawing   where the tab's pictures put things (sizes, reduction, query marks): server and browser alike
frames    one view composed for the tab, its download, and the API's sheet
live      what a browser needs to draw the large map itself (patch, layer, head at once)
outputs   the files of a render: the gallery, the download (tiles, .npz), the API's contact sheet
relevance "Why this class?": class relevance of classifiers (Chefer et al., grad-rollout), its evaluation
video     attention videos: a video's frames in batches (`batch`), priced up front, drawn to H.264 MP4
stepwise  one head's row step by step from a kept pass (q, k, v, products, scale, bias, temperature)
mnist_vit training the shipped mnist_vit (`python -m weights.train_mnist_vit --help`)
backbone  one description of a backbone (`describe`): timm, transformers, Meta's DINO classes, open_clip, torchvision
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
from attention.vit.models.loader import (
    FAMILIES,
    OFFLINE_MODEL,
    REGISTRY,
    ModelSpec,
    available,
    default_device,
    default_model,
    load_vit,
)
from attention.vit.models.own_checkpoint import register_checkpoint
from attention.vit.models.registry import default_model_attribute

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
