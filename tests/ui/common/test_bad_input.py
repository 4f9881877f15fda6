"""Every bad input a crowd sends gets a message saying what is wrong and what is accepted (a
gradio_client AppError, never Gradio's generic "has not enabled verbose error reporting"), and
the server answers the next request. Numbers are never silently rounded. One matrix for every
endpoint (uploads, models, settings, numbers), each case named by what it sends."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError
from PIL import Image

ROOT = Path(__file__).resolve().parents[3]
DIGIT = str(ROOT / "examples" / "digits" / "digit_3.png")
PHOTO = str(ROOT / "examples" / "photos" / "chelsea.jpg")
NAN = "nan"  # what float() reads as NaN (gradio_client's JSON cannot carry a real NaN)

BAD = "bad-upload:"  # an image argument naming one of `bad_files`


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """Every bad upload the issue lists, written as files."""
    d = tmp_path_factory.mktemp("bad")
    (d / "notes.txt").write_text("this is not an image")
    buf = io.BytesIO()
    Image.open(PHOTO).save(buf, "JPEG")
    (d / "truncated.jpg").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 3])
    Image.new("RGB", (1, 1), (200, 10, 10)).save(d / "one_pixel.png")
    # a 20000x20000 PNG header with a tiny body: must be refused from the header, never decoded
    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 0, 0, 0, 0)
    (d / "bomb.png").write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(b"\x00" * 20001 * 4))
        + png_chunk(b"IEND", b"")
    )
    return d


def case(api_name: str, args: dict | tuple, words: list[str], name: str):
    """One bad call: the endpoint, its arguments (keywords or positional), words its message must hold."""
    return pytest.param(api_name, args, words, id=name)


MAPS = "/attention_maps"
CASES = [
    # uploads
    case(MAPS, dict(image=BAD + "notes.txt"), ["not an image PIL can read"], "maps-upload-not-an-image"),
    case(MAPS, dict(image=BAD + "truncated.jpg"), ["truncated or corrupt"], "maps-upload-truncated"),
    case(MAPS, dict(image=BAD + "one_pixel.png"), ["smaller than one 4x4 patch"], "maps-upload-one-pixel"),
    case(MAPS, dict(image=BAD + "bomb.png"), ["over the limit"], "maps-upload-pixel-bomb"),
    # models
    case(MAPS, dict(image=DIGIT, model="no_such_vit"), ["Unknown model 'no_such_vit'"], "maps-model-unknown"),
    case(MAPS, dict(image=DIGIT, model="dino_vits16"), ["HF_HUB_OFFLINE"], "maps-model-not-cached-offline"),
    case(
        MAPS, dict(image=DIGIT, model="hf-hub:../../etc"), ["not a Hugging Face repo id", "accepted"], "maps-hub-path"
    ),
    case(MAPS, dict(image=DIGIT, model="hf-hub:x/y@main"), ["not a Hugging Face repo id", "accepted"], "maps-hub-rev"),
    case(
        MAPS,
        dict(image=DIGIT, model="vit_tiny_patch16_224"),
        ["not offered by this server", "accepted"],
        "maps-model-not-offered",
    ),
    # layer, resolution, view, threshold, query
    case(
        MAPS, dict(image=DIGIT, layer=4), ["Layer 4 is out of range; this model has 4 layers"], "maps-layer-off-depth"
    ),
    case(MAPS, dict(image=DIGIT, model="mnist_vit", layer="top"), ["Layer", "accepted"], "maps-layer-text"),
    case(
        MAPS,
        dict(image=DIGIT, model="mnist_vit", layer=1.5),
        ["Layer", "whole number", "accepted"],
        "maps-layer-fraction",
    ),
    case(MAPS, dict(image=DIGIT, resolution="huge"), ["Resolution 'huge' is not accepted"], "maps-resolution-text"),
    case(MAPS, dict(image=DIGIT, resolution="100000"), ["out of range"], "maps-resolution-too-large"),
    case(MAPS, dict(image=DIGIT, view="cube"), ["Unknown view 'cube'"], "maps-view-unknown"),
    case(MAPS, dict(image=DIGIT, threshold=0), ["Threshold 0"], "maps-threshold-zero"),
    case(
        MAPS,
        dict(image=DIGIT, model="mnist_vit", threshold="most"),
        ["Threshold 'most' is out of range", "accepted: more than 0, at most 1"],
        "maps-threshold-text",
    ),
    case(MAPS, dict(image=DIGIT, query_row=2), ["Give both query_row and query_col"], "maps-query-row-only"),
    case(MAPS, dict(image=DIGIT, query_row=9, query_col=0), ["off the 7x7 grid"], "maps-query-off-grid"),
    case(
        MAPS, dict(image=DIGIT, model="mnist_vit", query_row=2.5, query_col=1), ["whole numbers"], "maps-query-fraction"
    ),
    # retrieval
    case("/retrieval_database", ("abc", 42), ["database size N", "whole number"], "database-n-text"),
    case("/retrieval_database", (NAN, 42), ["database size N", "whole number"], "database-n-nan"),
    case("/retrieval_database", (100, "seed"), ["database seed", "whole number"], "database-seed-text"),
    case("/retrieval_hard", (100, 42, 7.5, 0), ["query index", "whole number"], "hard-index-fraction"),
    case("/retrieval_hard", (100, 42, NAN, 0), ["query index", "whole number"], "hard-index-nan"),
    case("/retrieval_soft", (100, 42, "wide", 0, 1.0), ["key dimension d", "whole number"], "soft-d-text"),
    case("/retrieval_soft", (100, 42, 16, 0, "hot"), ["scale", "number"], "soft-scale-text"),
    case("/retrieval_many", (100, 42, 16, 0, 1.0, NAN), ["num_q", "whole number"], "many-num-q-nan"),
    case("/retrieval_many", (100, 42, 16, 0, 1.0, 2.5), ["num_q", "whole number"], "many-num-q-fraction"),
    case("/retrieval_trained", (100, 42, "first"), ["held-out query index", "whole number"], "trained-index-text"),
    case("/retrieval_retrain", ("lab", NAN, 1), ["epochs", "whole number"], "retrain-epochs-nan"),
    case("/retrieval_retrain", ("lab", 2, "x"), ["training seed", "whole number"], "retrain-seed-text"),
    # calculator
    case("/calculate", ("1 0; 0 1", "1 0; 0 1", "1; 2", "two"), ["heads", "whole number"], "calculate-heads-text"),
    case("/calculate", ("1 0; 0 1", "1 0; 0 1", "1; 2", NAN), ["heads", "whole number"], "calculate-heads-nan"),
    case(
        "/calculate",
        dict(Q="1 0; 0 1", K="1 0; 0 1", V="1; 2", scale_mode="custom", scale="big"),
        ["scale", "number"],
        "calculate-scale-text",
    ),
    case(
        "/calculate",
        dict(Q="1 0; 0 1", K="1 0; 0 1", V="1; 2", dropout="x"),
        ["dropout", "number"],
        "calculate-dropout-text",
    ),
    case(
        "/calculate",
        dict(Q="1 0; 0 1", K="1 0; 0 1", V="1; 2", dropout=0.5, seed=-1),
        ["seed", "out of range"],
        "calculate-seed-negative",
    ),
    case(
        "/patch_attention",
        dict(image=PHOTO, patch=16, heads=4, seed=0, index=10**6),
        ["patch index", "out of range"],
        "patches-index-too-large",
    ),
    case(
        "/patch_attention",
        dict(image=PHOTO, patch=16, heads=4, seed=-1, index=3),
        ["seed", "out of range"],
        "patches-seed-negative",
    ),
    case(
        "/patch_attention",
        dict(image=PHOTO, patch=16, heads=4, seed=0, index=3.5),
        ["index", "whole number"],
        "patches-index-fraction",
    ),
    case(
        "/patch_attention",
        dict(image=PHOTO, patch=16, heads=NAN, seed=0, index=3),
        ["heads", "whole number"],
        "patches-heads-nan",
    ),
]


@pytest.mark.parametrize("api_name,args,words", CASES)
def test_bad_input_gets_a_clear_message_and_the_server_serves_the_next_request(
    client, bad_files, api_name, args, words
):
    def arg(v):
        if isinstance(v, str) and v.startswith(BAD):
            return handle_file(str(bad_files / v.removeprefix(BAD)))
        return handle_file(v) if isinstance(v, str) and v.endswith((".png", ".jpg", ".txt")) else v

    with pytest.raises(AppError) as e:
        if isinstance(args, dict):
            client.predict(**{k: arg(v) for k, v in args.items()}, api_name=api_name)
        else:
            client.predict(*[arg(v) for v in args], api_name=api_name)
    msg = str(e.value)
    assert "verbose error reporting" not in msg and "Traceback" not in msg, msg
    for w in words:
        assert w.lower() in msg.lower(), msg
    # still serving: the ViT tab's default call and a retrieval call
    _, _, info = client.predict(handle_file(DIGIT), api_name=MAPS)
    assert len(info["tiles"]) == 5
    assert client.predict(10, 42, api_name="/retrieval_database")


def test_a_non_image_file_sent_as_a_sketch_is_named(client, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not an image")
    with pytest.raises(AppError) as e:
        client.predict(
            100,
            42,
            {"background": None, "layers": [], "composite": handle_file(str(bad))},
            api_name="/retrieval_sketch",
        )
    assert "verbose error reporting" not in str(e.value) and "image" in str(e.value).lower()
    assert "accepted" in str(e.value).lower()


def test_the_patch_index_is_checked_against_this_image_not_the_last_answer(client):
    """A call with big patches (few of them) must not cap the next call's index; empty = the centre."""
    *_, idx = client.predict(handle_file(PHOTO), 56, 2, 0, 0, api_name="/patch_attention")
    assert idx["value"] == 0 and idx["maximum"] < 100
    *_, info, idx = client.predict(handle_file(PHOTO), 14, 2, 0, 100, api_name="/patch_attention")
    assert idx["value"] == 100 and "#100" in info
    *_, info, idx = client.predict(handle_file(PHOTO), 14, 2, 0, None, api_name="/patch_attention")
    assert idx["value"] != 100 and f"#{idx['value']}" in info


def test_an_oversized_matrix_text_is_refused_before_parsing(client):
    import time

    import httpx

    long = "1 " * 150_000  # 300,000 characters: over ATTENTION_MAX_TEXT, under the body limit
    t0 = time.perf_counter()
    with pytest.raises(AppError, match="characters"):
        client.predict(long, "1", "1", api_name="/calculate")
    huge = "1 " * 4_000_000  # 8 MB of text: over the body limit, refused before Gradio reads it
    with pytest.raises(httpx.HTTPStatusError, match="413"):
        client.predict(huge, "1", "1", api_name="/calculate")
    assert time.perf_counter() - t0 < 10  # refused from its length (it used to parse for 22 s)
