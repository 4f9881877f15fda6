"""The retrieval tab's API: every mode is a named endpoint answering with one picture and one JSON; bad
input gives a message, not a dead server. The tab itself costs the app's start-up nothing."""

from __future__ import annotations

import numpy as np
import pytest
from gradio_client import handle_file
from PIL import Image

from attention import retrieval
from attention.retrieval import answers


def _gray(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L"))


def _down(image: np.ndarray) -> np.ndarray:
    """Undo the app's nearest-neighbour upscaling back to 28 x 28."""
    k = image.shape[0] // 28
    return image[::k, ::k]


def test_every_retrieval_endpoint_answers_with_at_most_one_file_and_a_json(client):
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    names = [n for n in api if n.startswith("/retrieval_")]
    assert sorted(names) == sorted(
        f"/retrieval_{m}" for m in ("database", "hard", "soft", "many", "trained", "sketch", "retrain")
    )
    for name in names:
        kinds = [r["component"] for r in api[name]["returns"]]
        assert sum(k in ("Image", "File", "Gallery") for k in kinds) <= 1 and "Gallery" not in kinds, (name, kinds)
        assert kinds[-1] == "Json", (name, kinds)


def test_database_endpoint_shows_a_padded_grid_of_n_digits(client):
    img, info = client.predict(25, 42, api_name="/retrieval_database")
    grid = _gray(img)
    k = grid.shape[1] // (20 * 30 + 2)  # 20 per row, 28 px + 2 px padding, as make_grid
    assert info["columns"] == 20 and grid.shape == (k * (2 * 30 + 2), k * (20 * 30 + 2))  # 25 digits: 2 rows
    assert info["n"] == 25 and "subset" in info["source"].lower() and "25" in info["note"]
    assert info["labels"] == retrieval.draw_database(25, 42).labels.tolist()


@pytest.mark.parametrize("index", [0, 13, 99])
def test_hard_retrieval_returns_exactly_the_chosen_database_image(client, index):
    img, info = client.predict(100, 42, index, 5, api_name="/retrieval_hard")
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


def test_trained_retrieval_returns_one_sheet_and_top10_labels_for_both_models(client):
    sheet, info = client.predict(100, 42, 3, api_name="/retrieval_trained")
    q, label = retrieval.heldout_query(3)
    assert info["query_label"] == label and info["query"] == q.tolist()
    s = answers.PAD + answers.HEADING  # the sheet opens with the query, 8x
    np.testing.assert_array_equal(_down(_gray(sheet)[s : s + 224, answers.PAD : answers.PAD + 224]), q)
    db = retrieval.draw_database(100, 42)
    for name in ("lab", "cnn"):
        top, weights = info[name]["top10"], info[name]["weights"]
        assert len(top) == 10 and len(weights) == 100 and sum(weights) == pytest.approx(1.0)
        assert [m["label"] for m in top] == [int(db.labels[m["position"]]) for m in top]
        assert [m["weight"] for m in top] == sorted(weights, reverse=True)[:10]
    assert info["cnn"]["top1_label"] == label  # the better model gets this easy digit right


def test_sketch_endpoint_normalises_the_drawing(client, tmp_path):
    q, label = retrieval.heldout_query(3)
    big = Image.fromarray(255 - q).resize((280, 280), Image.Resampling.BILINEAR)  # dark ink on white
    path = tmp_path / "sketch.png"
    big.save(path)
    sketch = {"background": None, "layers": [], "composite": handle_file(str(path))}
    _sheet, info = client.predict(100, 42, sketch, api_name="/retrieval_sketch")
    shown = np.array(info["query"])
    assert shown.shape == (28, 28) and shown[0].max() == 0 and shown.max() > 200  # white ink on black
    assert info["query_label"] is None and info["cnn"]["top1_label"] == label


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
    progress = outputs[-1][1]  # the losses are numbers in the JSON, not a plot
    assert progress["model"] == "lab" and progress["step"] == progress["total"] == len(progress["losses"])
    mine = visitor.predict(100, 42, 3, api_name="/retrieval_trained")[-1]
    assert mine["lab"]["origin"] == "your retrained copy" and mine["cnn"]["origin"] == "shipped"
    assert mine["lab"]["top10"] != before["lab"]["top10"]
    after = other.predict(100, 42, 3, api_name="/retrieval_trained")[-1]
    assert after["lab"]["origin"] == "shipped" and after == before  # another visitor is untouched


@pytest.mark.parametrize("args,words", [(("lab", 0, 1), "epochs"), (("lab", 6, 1), "1 to 5"), (("vit", 1, 1), "lab")])
def test_retraining_refuses_bad_arguments(client, args, words):
    with pytest.raises(Exception, match=words):
        client.predict(*args, api_name="/retrieval_retrain")


def test_the_tab_is_filled_when_first_opened_not_at_start_up(monkeypatch):
    import gradio as gr

    from attention.retrieval import first_screen
    from attention.ui.retrieval import tab as retrieval_tab

    def refuse():
        raise AssertionError("the first screen was computed while building the app")

    monkeypatch.setattr(first_screen, "first_screen", refuse)
    with gr.Blocks() as demo:
        with gr.Tab("MNIST retrieval") as tab:
            retrieval_tab.build(tab)
    db = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "retrieval-db")
    assert db.value is None
    selects = [d for d in demo.fns.values() if any(t == (tab._id, "select") for t in d.targets)]
    assert len(selects) == 1 and db in selects[0].outputs  # filled when the tab is selected
