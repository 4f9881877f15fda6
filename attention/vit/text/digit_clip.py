"""`digit_clip`: a small CLIP trained here on the shipped MNIST digits against captions naming them
("a handwritten seven"), so text relevance works offline and its maps mean something in tests.

Image tower: mnist_vit's timm ViT (28 x 28 digits, patch 4, width 64, 4 blocks; the engine reads it),
pooled by its class token in the shipped weights (`weights/digit_clip.json`; CONFIG, what the training script
builds now, pools by the mean of the patch tokens), a linear projection to 32; text tower: open_clip's
TextTransformer (width 32, 2 blocks) over a word vocabulary of the captions (`DigitTokenizer`); CLIP's scaled
cosine as the score.

    clip = load_digit_clip()                  # from weights/digit_clip.{json,safetensors}
    python -m weights.train_digit_clip                   # retrains it (seeded; weights/train_digit_clip.py)
"""

from __future__ import annotations

import json
import re

import torch

from attention.config import WEIGHTS_DIR
from attention.errors import ModelLoadError

ALIAS = "digit_clip"
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
VOCAB = ("<pad>", "<start>", "<unk>", "a", "an", "the", "handwritten", "digit", "number", "of", "photo", "written")
VOCAB = VOCAB + WORDS + tuple(str(d) for d in range(10)) + ("<end>",)
TEMPLATES = ("a handwritten {w}", "the digit {w}", "a {w}", "the number {w}", "{d}", "a handwritten {d}", "{w}")
TEMPLATES = TEMPLATES + ("a {d}",)  # the app's own example ("a 4, a 9")
CONFIG = {
    "embed_dim": 32,
    "vision": {
        "architecture": "vit_tiny_patch16_224",
        "model_args": {
            "img_size": 28,
            "patch_size": 4,
            "in_chans": 1,
            "num_classes": 0,
            "embed_dim": 64,
            "depth": 4,
            "num_heads": 4,
            "mlp_ratio": 2.0,
            "global_pool": "avg",
        },
        "pretrained_cfg": {"mean": [0.1307], "std": [0.3081], "input_size": [1, 56, 56], "crop_pct": 1.0},
    },
    "text_cfg": {"context_length": 8, "vocab_size": len(VOCAB), "width": 32, "heads": 2, "layers": 2},
    "vocab": list(VOCAB),
}


def caption(digit: int, template: int = 0) -> str:
    """The caption of `digit` by TEMPLATES[template] ("a handwritten seven")."""
    return TEMPLATES[template].format(w=WORDS[digit], d=digit)


class DigitTokenizer:
    """Words to ids of a fixed vocabulary, as open_clip tokenizers do: <start> words <end>, zero padded to
    `context_length`; <end> is the largest id (open_clip's text tower pools at the argmax id). Unknown
    words become <unk>."""

    def __init__(self, vocab: list[str], context_length: int):
        self.ids = {w: i for i, w in enumerate(vocab)}
        self.context_length = context_length
        self.start, self.end, self.unk = self.ids["<start>"], self.ids["<end>"], self.ids["<unk>"]

    def encode(self, text: str) -> list[int]:
        """The word ids of `text` (lower-cased, split at anything but letters and digits)."""
        return [self.ids.get(w, self.unk) for w in re.findall(r"[a-z]+|\d", text.lower())]

    def __call__(self, texts: str | list[str]) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else texts
        out = torch.zeros(len(texts), self.context_length, dtype=torch.long)
        for i, t in enumerate(texts):
            ids = [self.start, *self.encode(t)][: self.context_length - 1] + [self.end]
            out[i, : len(ids)] = torch.tensor(ids)
        return out


def build(cfg: dict = CONFIG) -> torch.nn.Module:
    """A randomly initialised digit CLIP (open_clip CLIP with the timm ViT of `cfg["vision"]`), its tokenizer
    attached as `tokenizer`."""
    import open_clip

    from attention.vit.models.weights import build_local

    pool = cfg["vision"]["model_args"].get("global_pool", "token")  # the first digit_clip pooled by its class token
    vision = {"timm_model_name": "test_vit", "timm_pool": pool, "timm_proj": "linear", "image_size": 28}
    clip = open_clip.CLIP(embed_dim=cfg["embed_dim"], vision_cfg=vision, text_cfg=cfg["text_cfg"])
    trunk = build_local(cfg["vision"])
    clip.visual.trunk = trunk
    clip.visual.image_size = tuple(cfg["vision"]["pretrained_cfg"]["input_size"][1:])
    clip.visual.preprocess_cfg = {
        "mean": cfg["vision"]["pretrained_cfg"]["mean"],
        "std": cfg["vision"]["pretrained_cfg"]["std"],
    }
    clip.__dict__["tokenizer"] = DigitTokenizer(cfg["vocab"], cfg["text_cfg"]["context_length"])
    return clip


def load_digit_clip() -> torch.nn.Module:
    """The shipped digit CLIP (weights/digit_clip.json and .safetensors), on the CPU in fp32, eval mode."""
    from safetensors.torch import load_file

    cfg_path, path = WEIGHTS_DIR / f"{ALIAS}.json", WEIGHTS_DIR / f"{ALIAS}.safetensors"
    try:
        cfg = json.loads(cfg_path.read_text())
        clip = build(cfg)
        clip.load_state_dict(load_file(path))
    except (OSError, RuntimeError, KeyError, ValueError) as e:
        raise ModelLoadError(f"Shipped weights {path} cannot be loaded: {e}") from e
    return clip.eval()
