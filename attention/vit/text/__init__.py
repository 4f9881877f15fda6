"""Where is "a cat"? Text-prompted relevance for CLIP and SigLIP (open_clip models whose image tower the
engine reads), at O(N) memory, and the small digit CLIP trained here.

tower     the one adapter from an open_clip model's image side to the engine's timm ViT (`vision_tower`)
prompts   prompts checked once (how many, how long) and tokenized by the model's own tokenizer
rows      rows of A and of P prompts' dA a chunk at a time: Chefer et al.'s update, LeGrad's layer map
price     the price of a job (GFLOP) for the compute budget, fitted to measured times
compute   the gradient rules (Chefer et al., LeGrad): one forward, one batched backward
openvocab the open-vocabulary rules (MaskCLIP, SCLIP, ClearCLIP, NACLIP, proxy): the last block's new attention
dense     their pass: one forward without gradients; proxy: the proxy rule's features from another model
result    TextRelevance: maps per rule, honest scores, the segmentation with "none"
find      `text_relevance(model, image, prompts, rules=...)`: the entry point
native    open_clip's own CLIP tower rebuilt as the timm ViT it is (timm's converter)
load      `open_clip:hf-hub:org/repo` and the shipped digit_clip for `load_vit` (the image tower, the model attached)
digit_clip  the small CLIP trained here on MNIST digits and captions (weights/train_digit_clip.py)
views, service, cli   pictures and answer files; a server's shared store and budget; `python -m attention text`
"""

from attention.errors import NoTextTowerError
from attention.vit.text.compute import LEGRAD_LAYERS
from attention.vit.text.find import DEFAULT_RULES, check_rule, check_rules, text_relevance
from attention.vit.text.openvocab import OPEN_RULES, RuleOptions, check_options
from attention.vit.text.prompts import MAX_PROMPT_CHARS, MAX_PROMPTS, check_prompts
from attention.vit.text.result import NONE, RULES, TextRelevance
from attention.vit.text.tower import has_text_tower, vision_tower

__all__ = [
    "DEFAULT_RULES",
    "LEGRAD_LAYERS",
    "MAX_PROMPTS",
    "MAX_PROMPT_CHARS",
    "NONE",
    "NoTextTowerError",
    "OPEN_RULES",
    "RULES",
    "RuleOptions",
    "TextRelevance",
    "check_options",
    "check_prompts",
    "check_rule",
    "check_rules",
    "has_text_tower",
    "text_relevance",
    "vision_tower",
]
