"""`explore(res)`: the Space's view of a pass as a notebook widget (anywidget: JupyterLab, Notebook 7, VS Code,
Colab). A patch clicked becomes the query and the large map and tiles are redrawn in the browser by the Space's
own script (`attention/vit/serve/live.js`, shared, one copy): it asks the kernel (the widget's messages, no
server, no network) for the clicked row of every head, computed from the pass's kept q and k with no forward
(`live.view_maps`), exactly as the Space's page asks its server. Once it has drawn, the page sets the widget's
query (and layer, head, view, threshold, opacity: its controls) and the kernel draws the same view
(`frames.pictures`), which a saved notebook keeps as a static picture (`_repr_mimebundle_`'s image/png).
Relevance and text maps are shown beneath when given.

What the page holds is bounded and said: per view, the large map, the tiles and the layer's maps
(`page_bytes`); a pass whose view would send more than MAX_PAGE_BYTES is refused, naming the size and the fix.
The q and k stay in the kernel.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import anywidget
import numpy as np
import traitlets

from attention.errors import AttentionError, InputError
from attention.notebook.display import maps_picture, source
from attention.render import png_bytes
from attention.validate import layer_index
from attention.vit.draw import drawing
from attention.vit.draw.frames import ViewSpec, pictures
from attention.vit.draw.stepwise_html import data_uri, export_view
from attention.vit.draw.views import VIEWS, check_view
from attention.vit.engine.extract import AttentionMaps
from attention.vit.engine.query import label as query_label
from attention.vit.engine.query import parse as parse_query
from attention.vit.engine.request import CMAP, OPACITY, THRESHOLD
from attention.vit.engine.video_frames import check_head
from attention.vit.serve import live

MAX_PAGE_BYTES = 24 << 20  # what one view may send the notebook page, uncompressed: large map, tiles, maps


def esm() -> str:
    """The widget's module: its page (`widget.js`) with the Space's live script inlined where it says /*LIVE_JS*/."""
    shell = (resources.files("attention.notebook") / "widget.js").read_text()
    return shell.replace("/*LIVE_JS*/", (resources.files("attention.vit.serve") / "live.js").read_text())


def page_bytes(res: AttentionMaps) -> int:
    """Upper bound of the bytes one view of `res` sends the page: the large map and every tile as raw RGB (before
    PNG), the base picture, the layer's colour indices (heads + mean)."""
    lay = live.layout(res)
    h, w = lay.image_size
    heads = res.maps.shape[0]
    tile = (h * lay.tile_scale // lay.tile_reduce) * (w * lay.tile_scale // lay.tile_reduce) * 3
    return h * w * 3 * (lay.scale**2 + 1) + (heads + 1) * (tile + h * w // lay.patch**2)


def _png(img: np.ndarray) -> str:
    return data_uri(png_bytes(img))


class Explorer(anywidget.AnyWidget):
    """The explorer of one pass (see the module). Traits a notebook may set: layer, head, view, threshold, alpha,
    query ([row, col] or None: the model's own token)."""

    _esm = esm()
    layer = traitlets.Int().tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    view = traitlets.Unicode("heads").tag(sync=True)
    threshold = traitlets.Float(THRESHOLD.default).tag(sync=True)
    alpha = traitlets.Float(OPACITY.default).tag(sync=True)
    query = traitlets.Any(None).tag(sync=True)
    payload = traitlets.Unicode("").tag(sync=True)  # `live.payload` as JSON: what the live script draws from
    large = traitlets.Unicode("").tag(sync=True)  # the large map, a PNG data URL
    tiles = traitlets.List().tag(sync=True)  # [[PNG data URL, caption], ...]
    state = traitlets.Dict().tag(sync=True)  # texts and sizes of the page
    note = traitlets.Unicode("").tag(sync=True)
    extra = traitlets.Unicode("").tag(sync=True)  # relevance and text pictures (HTML: escaped captions)

    def __init__(self, res: AttentionMaps, *, model: str = "", cmap: str = CMAP.default, extra: str = "") -> None:
        if res.qk is None:
            raise InputError("explore needs the pass's q and k: call attention_maps(..., keep_qk=True).")
        size = page_bytes(res)
        if size > MAX_PAGE_BYTES:
            raise InputError(
                f"This pass would send the page up to {size / 2**20:.0f} MB a view (the large map "
                f"{res.image.width}x{res.image.height} px enlarged, {res.maps.shape[0] + 1} tiles); the widget's bound "
                f"is {MAX_PAGE_BYTES >> 20} MB: use a lower resolution (attention_maps(..., resolution=...))."
            )
        self._pass = source(res, model)
        self._cmap = cmap
        self._quiet = True
        views = [[v, name] for v, name in VIEWS.items()]
        L, H = res.depth, res.maps.shape[0]
        super().__init__(layer=res.layer, query=None if isinstance(res.query, str) else list(res.query), extra=extra)
        self.state = {"views": views, "layers": L, "heads": H, "bold": "", "what": ""}
        self.note = (
            f"The page holds at most {size / 2**10:.0f} kB a view (bound {MAX_PAGE_BYTES >> 20} MB); "
            f"q and k stay in the kernel. Click a patch to make it the query."
        )
        self._quiet = False
        self._draw()
        self.on_msg(self._answer)

    @property
    def res(self) -> AttentionMaps:
        """The pass at the widget's query and layer."""
        return self._pass.at(None if self.query is None else parse_query(self.query), self.layer)

    def spec(self) -> ViewSpec:
        """The view on screen, checked (`ViewSpec`)."""
        q = None if self.query is None else parse_query(self.query)
        return ViewSpec(query=q, layer=self.layer, view=self.view, threshold=self.threshold, alpha=self.alpha)

    @traitlets.validate("layer", "head", "view", "threshold", "alpha", "query")
    def _valid(self, proposal):
        """Every control checked where it is set (InputError names what is accepted); a refused value is not kept."""
        name, value = proposal["trait"].name, proposal["value"]
        if name == "query":  # a patch [row, col] on the grid, a token the model has, or None (its own)
            q = None if value is None else parse_query(value)
            self._pass.base.index_of(q if q is not None else self._pass.default_query)
            return list(q) if isinstance(q, tuple) else q
        checks = {
            "layer": lambda v: layer_index(v, self._pass.num_layers),
            "head": lambda v: check_head(v, self._pass.num_heads),
            "view": check_view,
            "threshold": THRESHOLD.check,
            "alpha": OPACITY.check,
        }
        return checks[name](value)

    @traitlets.observe("layer", "head", "view", "threshold", "alpha", "query")
    def _changed(self, _change) -> None:
        if not self._quiet:
            self._draw()

    def _draw(self) -> None:
        """The view on screen drawn by the kernel: large map, tiles, texts and the live script's payload."""
        v, head = self.spec(), self.head
        res, tiles, large = pictures(self._pass, v, head=head)
        live_view = v.view if v.view in ("heads", "mean") else "heads"
        data = live.payload(self._pass, res, view=live_view, head=head, alpha=v.alpha, cmap=self._cmap)
        what = f"head {head}" if v.view in ("heads", "masks") else VIEWS[v.view].lower()
        with self.hold_sync():
            self.large = _png(large)
            self.tiles = [[_png(drawing.reduced(t.image, drawing.THUMB_SIDE)), t.caption] for t in tiles]
            bold = f"the mean of the {self.state['heads']} heads" if v.view == "mean" else what
            self.state = self.state | {"bold": bold, "what": f"· layer {res.layer} · {query_label(res.query)}"}
            self.payload = json.dumps(data)

    def _answer(self, _widget, msg: dict, _buffers) -> None:
        """The page's questions: the live script's two server functions (answered as the Space's server answers
        them, nothing kept: the page then sets `query` and `layer`), the model's own token, the export."""
        fn, args = msg.get("fn"), msg.get("args")
        try:
            if fn == "live_maps":
                _, query, layer = args
                result = live.view_maps(self._pass, None if query is None else parse_query(query), int(layer))
            elif fn == "live_base":
                result = live.base_image(self._pass)
            elif fn == "default_query":
                self.query, result = None, None
            elif fn == "export":
                result = f"Written: {self.export()}"
            else:
                return
        except (AttentionError, TypeError, ValueError) as e:  # a row off the grid, a malformed question
            result = None if fn != "export" else f"Not written: {e}"
        self.send({"answer": msg.get("ask"), "result": result})

    def export(self, path: str | Path | None = None) -> Path:
        """The view on screen as the Space's one self-contained HTML file (`export_view`: the large map, every
        tile, head `head`'s step by step), at `path` (default: the Space's output folder). Returns its path."""
        out = export_view(self._pass, self.spec(), self.head)
        return out if path is None else Path(shutil.move(out, path))

    def _repr_mimebundle_(self, **kwargs):
        """The widget, and the view on screen as a static picture (what a saved notebook shows without a kernel)."""
        data, meta = super()._repr_mimebundle_(**kwargs)
        p = maps_picture(self.res, view=self.view, head=self.head, threshold=self.threshold, alpha=self.alpha)
        return data | {"image/png": p.png}, meta


def explore(res: AttentionMaps, *, model: str = "", relevance=None, text=None, cmap: str = CMAP.default) -> Explorer:
    """The explorer widget of `res` (`attention_maps(..., keep_qk=True)`): the Space's large map and head tiles;
    click a patch to make it the query. `relevance`, `text`: a Relevance / TextRelevance of the same image, shown
    beneath. `model`: the model's name, for the captions and the export. InputError without q and k, or for a pass
    too large for the page (`MAX_PAGE_BYTES`)."""
    extra = "".join(r.show().html for r in (relevance, text) if r is not None)
    return Explorer(res, model=model, cmap=cmap, extra=extra)
