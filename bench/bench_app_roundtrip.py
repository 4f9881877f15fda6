"""App round trip vs bare extraction: one `/attention_maps` request at 480 px on CPU.

    python bench/bench_app_roundtrip.py [--repeats 5] [--image examples/photos/chelsea.jpg]

Times (median of --repeats, after one warm-up each):
  bare  = attention_maps(load_vit("dino_vits16"), image, resolution=480)
  trip  = gradio_client `predict(image, model="dino_vits16", resolution="480", api_name="/attention_maps")`
          on the app launched in-process: upload, queue, forward pass, rendering of the per-head
          PNG overlays and the .npz, and the client's download of all of them.
and prints ratio = trip / bare (target <= 1.5: rendering must not dominate), once with the client
fetching every output file (gradio_client's default: one HTTP GET per file, in turn) and once with
`download_files=False` (the client gets the files' URLs), which isolates the app's own work.

When the real DINO ViT-S/16 weights are not in the HF cache, it builds a temporary HF cache
holding a *random-weight* `vit_small_patch16_224.dino` in the hub's layout (same architecture,
same token count, same cost) and runs offline; the output says which.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TIMM_NAME, REPO = "vit_small_patch16_224.dino", "timm/vit_small_patch16_224.dino"


def fake_hub_cache(home: Path) -> None:
    """Put random weights of TIMM_NAME into `home`/hub exactly as a hub download would."""
    import timm
    import torch
    from safetensors.torch import save

    from attention.models import add_to_hub_cache

    torch.manual_seed(0)
    model = timm.create_model(TIMM_NAME, pretrained=False, num_classes=0)
    data = save({k: v.contiguous() for k, v in model.state_dict().items()})
    add_to_hub_cache(REPO, {"model.safetensors": data}, cache_dir=home / "hub")


def median_times(fns, repeats: int) -> list[float]:
    """Median wall time of each fn, calls interleaved (a, b, a, b, ...) so load drift hits both alike."""
    for fn in fns:
        fn()  # warm-up (model load, first-call costs)
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--image", default=str(ROOT / "examples" / "photos" / "chelsea.jpg"))
    args = ap.parse_args()

    os.environ.setdefault("GRADIO_TEMP_DIR", tempfile.mkdtemp(prefix="bench-gradio-"))
    os.environ.setdefault("GRADIO_EXAMPLES_CACHE", tempfile.mkdtemp(prefix="bench-examples-"))
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(REPO, "model.safetensors"), str):
        weights = f"real {REPO} weights from the HF cache"
    else:
        home = Path(tempfile.mkdtemp(prefix="bench-hf-"))
        os.environ["HF_HOME"], os.environ["HF_HUB_OFFLINE"] = str(home), "1"
        import huggingface_hub.constants as c

        c.HF_HOME, c.HF_HUB_CACHE, c.HF_HUB_OFFLINE = str(home), str(home / "hub"), True
        fake_hub_cache(home)
        weights = f"RANDOM weights of {TIMM_NAME} in a temporary HF cache (real ones not cached)"

    import torch
    from gradio_client import Client, handle_file

    import app
    from attention import attention_maps, load_vit

    model = load_vit("dino_vits16", device="cpu")
    res = attention_maps(model, args.image, resolution=480)

    _, url, _ = app.demo.launch(prevent_thread_lock=True, quiet=True)
    try:
        fetching, linking = Client(url, verbose=False), Client(url, verbose=False, download_files=False)

        def call(client):
            return client.predict(handle_file(args.image), model="dino_vits16", resolution="480", api_name="/attention_maps")

        bare, trip, trip_urls = median_times(
            [lambda: attention_maps(model, args.image, resolution=480), lambda: call(fetching), lambda: call(linking)],
            args.repeats)
        gallery, npz = call(fetching)
    finally:
        app.demo.close()
    gh, gw = res.grid
    print(f"weights: {weights}")
    print(f"input: {Path(args.image).name} -> {res.image.size[0]}x{res.image.size[1]} px, grid {gh}x{gw} "
          f"= {gh * gw} patches, {res.maps.shape[0]} heads; torch threads {torch.get_num_threads()}; "
          f"{len(gallery)} PNGs + {os.path.getsize(npz) / 1e6:.1f} MB .npz per request")
    print(f"bare attention_maps: {bare * 1000:.0f} ms (median of {args.repeats}, interleaved)")
    print(f"app round trip, client fetching every output file (gradio_client default): {trip * 1000:.0f} ms")
    print(f"app round trip, client given the files' URLs (Client(download_files=False)): {trip_urls * 1000:.0f} ms")
    print(f"ratio (default client) = {trip / bare:.2f} (target <= 1.5)")
    print(f"ratio (URLs, no download) = {trip_urls / bare:.2f}")


if __name__ == "__main__":
    main()
