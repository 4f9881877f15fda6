"""Spec of the command line `python -m attention maps`: per image, head maps, mean, masks as
PNG and the raw arrays as .npz; a bad file gets one clear line and the rest are still written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from attention import mnist
from attention.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


def digit_png(path: Path, i: int) -> Path:
    Image.fromarray(mnist.load_subset().images[i]).save(path)
    return path


def test_maps_writes_pngs_and_npz_per_image_and_reports_bad_files(tmp_path, capsys):
    a, b = digit_png(tmp_path / "a.png", 0), digit_png(tmp_path / "b.png", 1)
    bad = tmp_path / "notes.png"
    bad.write_text("not an image")
    out = tmp_path / "out"
    code = main(["maps", str(a), str(bad), str(b), "--model", "mnist_vit", "--out", str(out), "--query", "3,3"])
    err = capsys.readouterr().err
    assert code == 1 and "notes.png: skipped" in err and "not an image" in err
    for stem in ("a", "b"):
        names = {p.name for p in (out / stem).iterdir()}
        assert {"img.png", "mean.png", "attention.npz"} <= names
        assert {f"head_{h:02d}.png" for h in range(4)} | {f"mask_{h:02d}.png" for h in range(4)} <= names
        with np.load(out / stem / "attention.npz") as z:
            assert z["maps"].shape == (4, 7, 7) and z["maps"].dtype == np.float32
            assert z["layers"].shape[0] == 4 and z["masks"].dtype == bool and z["query"].tolist() == [3, 3]
        assert Image.open(out / stem / "img.png").size == (28, 28)
        assert Image.open(out / stem / "head_00.png").size == (224, 224)  # digits shown enlarged, as in the app
    assert not (out / "notes").exists()


def test_maps_reads_its_style_once_before_any_image(tmp_path, capsys, monkeypatch):
    from attention.vit.draw import views

    a, b, out = digit_png(tmp_path / "a.png", 0), digit_png(tmp_path / "b.png", 1), tmp_path / "out"
    code = main(["maps", str(a), str(b), "--model", "mnist_vit", "--out", str(out), "--cmap", "nope"])
    assert code == 2 and capsys.readouterr().err.startswith("error: ") and not out.exists()
    with pytest.raises(SystemExit):  # --threshold: the parser's
        main(["maps", str(a), "--model", "mnist_vit", "--out", str(out), "--threshold", "7"])
    assert "Threshold 7 is out of range" in capsys.readouterr().err
    calls = []
    for name in ("check_view", "check_style"):
        f = getattr(views, name)
        monkeypatch.setattr(views, name, lambda *a, f=f, **k: calls.append(a) or f(*a, **k))
    assert main(["maps", str(a), str(b), "--model", "mnist_vit", "--out", str(out)]) == 0
    assert calls == []  # read once for the command: not again per image or per picture


@pytest.mark.slow
@pytest.mark.subprocess
def test_unknown_model_is_one_clear_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "attention", "maps", str(digit_png(tmp_path / "a.png", 0)), "--model", "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stderr.startswith("error: Unknown model 'nope'") and "Traceback" not in r.stderr


def test_features_writes_the_three_views_the_model_view_and_the_arrays(tmp_path, capsys):
    from attention.vit.serve.passes import get_pass

    a = digit_png(tmp_path / "a.png", 0)
    out = tmp_path / "out"
    code = main(["features", str(a), str(tmp_path / "missing.png"), "--model", "mnist_vit", "--out", str(out)])
    assert code == 1 and "missing.png: skipped" in capsys.readouterr().err
    names = {p.name for p in (out / "a").iterdir()}
    assert names == {"pca.png", "similarity.png", "norms.png", "model_view.png", "features.npz"}
    with np.load(out / "a" / "features.npz") as z:
        assert sorted(z.files) == ["grid", "image", "meta", "norms", "pca", "similarity"]
        want = get_pass(str(a), "mnist_vit", "auto").feature_maps("cls", -1)
        for k in ("pca", "similarity", "norms"):
            np.testing.assert_array_equal(z[k], want[k])
    assert Image.open(out / "a" / "pca.png").size == (224, 224)


def test_relevance_writes_the_picture_the_arrays_and_the_top_classes(tmp_path, capsys):
    import json

    d = digit_png(tmp_path / "d.png", 0)
    assert main(["relevance", str(d), "--model", "mnist_vit", "--target", "8", "--out", str(tmp_path / "out")]) == 0
    out = tmp_path / "out" / "d"
    assert (out / "relevance.png").exists()
    info = json.loads((out / "relevance.json").read_text())
    assert info["target"]["index"] == 8 and len(info["top"]) == 5
    assert np.load(out / "relevance.npz")["chefer"].shape == (7, 7)
    assert "why '8'?" in capsys.readouterr().out
    assert main(["relevance", str(d), "--target", "zebra", "--out", str(tmp_path / "out")]) == 1
    assert "not one of this model's 10 classes" in capsys.readouterr().err


def test_features_draws_dinov3_s_pca_when_asked_and_refuses_unknown_styles(tmp_path, capsys):
    from attention.vit.serve.passes import get_pass

    a = digit_png(tmp_path / "a.png", 0)
    out = tmp_path / "out"
    assert main(["features", str(a), "--model", "mnist_vit", "--pca", "dinov3", "--out", str(out)]) == 0
    with np.load(out / "a" / "features.npz") as z:
        want = get_pass(str(a), "mnist_vit", "auto").feature_maps("cls", -1, pca_style="dinov3")
        np.testing.assert_array_equal(z["pca"], want["pca"])
        np.testing.assert_array_equal(z["foreground"], want["foreground"])
    assert main(["features", str(a), "--model", "mnist_vit", "--pca", "fancy", "--out", str(out)]) == 2
    assert "PCA style 'fancy' is not known; accepted: minmax, dinov3" in capsys.readouterr().err
