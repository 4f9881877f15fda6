"""Every bad input a crowd sends gets a message saying what is wrong and what is accepted (a
gradio_client AppError, never Gradio's generic "has not enabled verbose error reporting"), and
the server answers the next request. Numbers are never silently rounded."""

from __future__ import annotations

from pathlib import Path

import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

ROOT = Path(__file__).resolve().parents[2]
DIGIT = str(ROOT / "examples" / "digits" / "digit_3.png")
PHOTO = str(ROOT / "examples" / "photos" / "chelsea.jpg")
NAN = "nan"  # what float() reads as NaN (gradio_client's JSON cannot carry a real NaN)

CASES = [
    # (endpoint, args (files as paths are wrapped), words the message must hold)
    ("/attention_maps", dict(image=DIGIT, model="hf-hub:../../etc"), ["not a Hugging Face repo id", "accepted"]),
    ("/attention_maps", dict(image=DIGIT, model="hf-hub:x/y@main"), ["not a Hugging Face repo id", "accepted"]),
    ("/attention_maps", dict(image=DIGIT, model="vit_tiny_patch16_224"), ["not offered by this server", "accepted"]),
    ("/attention_maps", dict(image=DIGIT, model="mnist_vit", layer="top"), ["Layer", "accepted"]),
    ("/attention_maps", dict(image=DIGIT, model="mnist_vit", layer=1.5), ["Layer", "accepted"]),
    ("/attention_maps", dict(image=DIGIT, model="mnist_vit", query_row=2.5, query_col=1), ["whole numbers"]),
    (
        "/attention_maps",
        dict(image=DIGIT, model="mnist_vit", threshold="most"),
        ["Threshold", "must be numbers", "(0, 1]"],
    ),
    ("/retrieval_database", ("abc", 42), ["database size N", "whole number"]),
    ("/retrieval_database", (NAN, 42), ["database size N", "whole number"]),
    ("/retrieval_database", (100, "seed"), ["database seed", "whole number"]),
    ("/retrieval_hard", (100, 42, 7.5, 0), ["query index", "whole number"]),
    ("/retrieval_hard", (100, 42, NAN, 0), ["query index", "whole number"]),
    ("/retrieval_soft", (100, 42, "wide", 0, 1.0), ["key dimension d", "whole number"]),
    ("/retrieval_soft", (100, 42, 16, 0, "hot"), ["scale", "number"]),
    ("/retrieval_many", (100, 42, 16, 0, 1.0, NAN), ["num_q", "whole number"]),
    ("/retrieval_many", (100, 42, 16, 0, 1.0, 2.5), ["num_q", "whole number"]),
    ("/retrieval_trained", (100, 42, "first"), ["held-out query index", "whole number"]),
    ("/retrieval_retrain", ("lab", NAN, 1), ["epochs", "whole number"]),
    ("/retrieval_retrain", ("lab", 2, "x"), ["training seed", "whole number"]),
    ("/calculate", ("1 0; 0 1", "1 0; 0 1", "1; 2", "two"), ["heads", "whole number"]),
    ("/calculate", ("1 0; 0 1", "1 0; 0 1", "1; 2", NAN), ["heads", "whole number"]),
    ("/calculate", dict(Q="1 0; 0 1", K="1 0; 0 1", V="1; 2", scale_mode="custom", scale="big"), ["scale", "number"]),
    ("/calculate", dict(Q="1 0; 0 1", K="1 0; 0 1", V="1; 2", dropout="x"), ["dropout", "number"]),
    ("/calculate", dict(Q="1 0; 0 1", K="1 0; 0 1", V="1; 2", dropout=0.5, seed=-1), ["seed", "out of range"]),
    ("/patch_attention", dict(image=PHOTO, patch=16, heads=4, seed=0, index=10**6), ["patch index", "out of range"]),
    ("/patch_attention", dict(image=PHOTO, patch=16, heads=4, seed=-1, index=3), ["seed", "out of range"]),
    ("/patch_attention", dict(image=PHOTO, patch=16, heads=4, seed=0, index=3.5), ["index", "whole number"]),
    ("/patch_attention", dict(image=PHOTO, patch=16, heads=NAN, seed=0, index=3), ["heads", "whole number"]),
]


def _wrap(v):
    return handle_file(v) if isinstance(v, str) and v.endswith((".png", ".jpg", ".txt")) else v


@pytest.mark.parametrize("api_name,args,words", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_input_gets_a_clear_message_and_the_server_serves_the_next_request(client, api_name, args, words):
    with pytest.raises(AppError) as e:
        if isinstance(args, dict):
            client.predict(**{k: _wrap(v) for k, v in args.items()}, api_name=api_name)
        else:
            client.predict(*[_wrap(v) for v in args], api_name=api_name)
    msg = str(e.value)
    assert "verbose error reporting" not in msg
    for w in words:
        assert w.lower() in msg.lower(), msg
    assert client.predict(10, 42, api_name="/retrieval_database")  # still serving


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
