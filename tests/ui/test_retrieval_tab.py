"""The retrieval tab's API: every mode is a named endpoint; bad input gives a message, not a dead server."""

from __future__ import annotations

import numpy as np
import pytest
from gradio_client import handle_file
from PIL import Image

from attention import retrieval


def _gray(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L"))


def _down(image: np.ndarray) -> np.ndarray:
    """Undo the app's nearest-neighbour upscaling back to 28 x 28."""
    k = image.shape[0] // 28
    return image[::k, ::k]


def test_database_endpoint_shows_a_padded_grid_of_n_digits(client):
    img, note = client.predict(25, 42, api_name="/retrieval_database")
    grid = _gray(img)
    k = grid.shape[1] // (10 * 30 + 2)  # 10 per row, 28 px + 2 px padding, as make_grid
    assert grid.shape == (k * (3 * 30 + 2), k * (10 * 30 + 2))  # 25 digits: 3 rows
    assert "25" in note and "subset" in note.lower()


@pytest.mark.parametrize("index", [0, 13, 99])
def test_hard_retrieval_returns_exactly_the_chosen_database_image(client, index):
    _keys, _plot, img, info = client.predict(100, 42, index, 5, api_name="/retrieval_hard")
    db = retrieval.draw_database(100, 42)
    np.testing.assert_array_equal(_down(_gray(img)), db.images[index])
    scores = np.array(info["scores"])
    assert scores.sum() == 1 and scores.max() == 1  # one-hot over the shuffled store
    assert info["order"][int(np.argmax(scores))] == index  # at the row holding item `index`
    assert info["retrieved_equals_database_image"] is True


def test_soft_weights_sum_to_one_and_sharpen_with_the_scale(client):
    *_, soft = client.predict(100, 42, 16, 3, 1.0, api_name="/retrieval_soft")
    *_, sharp = client.predict(100, 42, 16, 3, 20.0, api_name="/retrieval_soft")
    for info in (soft, sharp):
        assert len(info["weights"]) == 100
        assert sum(info["weights"]) == pytest.approx(1.0, abs=1e-9)
    assert sharp["max_weight"] > soft["max_weight"]
    assert sharp["effective_items"] < soft["effective_items"]


def test_many_queries_give_one_retrieval_each(client):
    img, info = client.predict(100, 42, 8, 0, 1.0, 12, api_name="/retrieval_many")
    assert info["num_q"] == 12 and np.allclose(info["sums"], 1.0)
    grid = _gray(img)
    k = grid.shape[1] // (8 * 30 + 2)
    assert grid.shape == (k * (2 * 30 + 2), k * (8 * 30 + 2))  # 12 retrievals, 8 per row


def test_trained_retrieval_returns_top10_labels_for_both_models(client):
    out = client.predict(100, 42, 3, api_name="/retrieval_trained")
    query, info = out[0], out[-1]
    q, label = retrieval.heldout_query(3)
    np.testing.assert_array_equal(_down(_gray(query)), q)
    assert info["query_label"] == label
    db = retrieval.draw_database(100, 42)
    for name, gallery in (("lab", out[3]), ("cnn", out[6])):
        top = info[name]["top10"]
        assert len(top) == 10 and len(gallery) == 10
        assert [m["label"] for m in top] == [int(db.labels[m["position"]]) for m in top]
        weights = [m["weight"] for m in top]
        assert weights == sorted(weights, reverse=True)
    assert info["cnn"]["top1_label"] == label  # the better model gets this easy digit right


def test_sketch_endpoint_normalises_the_drawing(client, tmp_path):
    q, label = retrieval.heldout_query(3)
    big = Image.fromarray(255 - q).resize((280, 280), Image.Resampling.BILINEAR)  # dark ink on white
    path = tmp_path / "sketch.png"
    big.save(path)
    sketch = {"background": None, "layers": [], "composite": handle_file(str(path))}
    out = client.predict(100, 42, sketch, api_name="/retrieval_sketch")
    shown = _down(_gray(out[0]))
    assert shown.shape == (28, 28) and shown[0].max() == 0 and shown.max() > 200  # white ink on black
    assert out[-1]["cnn"]["top1_label"] == label


@pytest.mark.parametrize(
    "api_name,args,words",
    [
        ("/retrieval_database", (0, 42), "database size N"),
        ("/retrieval_database", (10**6, 42), "database size N"),
        ("/retrieval_hard", (100, 42, 100, 0), "query index"),
        ("/retrieval_hard", (100, 42, -1, 0), "query index"),
        ("/retrieval_soft", (100, 42, 0, 0, 1.0), "key dimension d"),
        ("/retrieval_many", (100, 42, 16, 0, 1.0, 0), "num_q"),
        ("/retrieval_many", (100, 42, 16, 0, 1.0, 10**6), "num_q"),
        ("/retrieval_trained", (100, 42, 5000), "held-out query index"),
    ],
)
def test_bad_input_gets_a_clear_message_and_the_server_stays_up(client, api_name, args, words):
    with pytest.raises(Exception) as e:
        client.predict(*args, api_name=api_name)
    assert words in str(e.value) and "expected" in str(e.value)
    assert client.predict(10, 42, api_name="/retrieval_database")  # still serving


@pytest.mark.parametrize("fill", [0, 255])
def test_empty_sketch_gets_a_clear_message(client, tmp_path, fill):
    path = tmp_path / "blank.png"
    Image.new("RGB", (200, 200), (fill,) * 3).save(path)
    with pytest.raises(Exception, match="empty"):
        client.predict(
            100,
            42,
            {"background": None, "layers": [], "composite": handle_file(str(path))},
            api_name="/retrieval_sketch",
        )
    with pytest.raises(Exception, match="empty"):
        client.predict(100, 42, {"background": None, "layers": [], "composite": None}, api_name="/retrieval_sketch")


def test_retraining_streams_a_loss_curve_on_the_visitors_own_copy(app_url):
    from gradio_client import Client

    visitor, other = Client(app_url, verbose=False), Client(app_url, verbose=False)
    before = other.predict(100, 42, 3, api_name="/retrieval_trained")[-1]
    job = visitor.submit("lab", 1, 7, api_name="/retrieval_retrain")
    list(job)
    outputs = job.outputs()  # one update every 10 steps, then the final message
    assert len(outputs) >= 3 and "Done" in outputs[-1][0]
    mine = visitor.predict(100, 42, 3, api_name="/retrieval_trained")[-1]
    assert mine["lab"]["origin"] == "your retrained copy" and mine["cnn"]["origin"] == "shipped"
    assert mine["lab"]["top10"] != before["lab"]["top10"]
    after = other.predict(100, 42, 3, api_name="/retrieval_trained")[-1]
    assert after["lab"]["origin"] == "shipped" and after == before  # another visitor is untouched


@pytest.mark.parametrize("args,words", [(("lab", 0, 1), "epochs"), (("lab", 6, 1), "1 to 5"), (("vit", 1, 1), "lab")])
def test_retraining_refuses_bad_arguments(client, args, words):
    with pytest.raises(Exception, match=words):
        client.predict(*args, api_name="/retrieval_retrain")
