// The explorer widget's page (anywidget): the Space's view of a pass, drawn by the Space's own script
// (attention/vit/serve/live.js, run below as LIVE with this widget's element as its document), whose two
// server functions are answered by the kernel through the widget's messages (no server, no network).
// The kernel's pictures (large map, tiles) follow each change as on the Space: the script's drawing first,
// then the same picture from Python. el.attentionLive is the script's state (tests read it).

const LIVE = (server, props, watch, document, window) => {
  /*LIVE_JS*/
};

const TEMPLATE = `
<style>
.ae-root{font-family:system-ui,sans-serif;font-size:13px;color:#222;max-width:100%}
.ae-main{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
.ae-big{position:relative;flex:0 1 420px;min-width:200px;max-width:420px}
.ae-big img{width:100%;height:auto;display:block;cursor:crosshair;image-rendering:pixelated}
.ae-side{flex:1 1 260px;min-width:220px;max-width:560px}
.ae-gallery{display:flex;flex-wrap:wrap;gap:6px;margin-top:6px}
.ae-gallery .thumbnail-item{position:relative;width:92px;margin:0;cursor:pointer}
.ae-gallery img{width:92px;height:auto;display:block;image-rendering:pixelated}
.ae-gallery figcaption{font-size:11px;overflow:hidden;white-space:nowrap;text-overflow:ellipsis}
.ae-controls label{display:flex;align-items:center;gap:6px;margin:3px 0}
.ae-controls label span{width:70px;flex:none}
.ae-controls input[type=range]{flex:1;min-width:80px}
.ae-note{color:#555;font-size:12px;margin:4px 0}
.ae-extra img{max-width:100%}
</style>
<div class="ae-root">
  <div id="vit-caption" class="ae-caption"><strong></strong> <span class="ae-what"></span></div>
  <div class="ae-main">
    <div id="vit-query-image" class="ae-big"><img alt="the large map: click a patch to make it the query"></div>
    <div class="ae-side">
      <div id="vit-controls" class="ae-controls">
        <label><span>View</span><select class="ae-view"></select></label>
        <label id="vit-layer"><span>Layer</span><input type="range" min="0" step="1"><output></output></label>
        <label id="vit-head"><span>Head</span><input type="range" min="0" step="1"><output></output></label>
        <label id="vit-threshold"><span>Threshold</span><input type="range" min="0.05" max="1" step="0.05"><output></output></label>
        <label id="vit-alpha"><span>Opacity</span><input type="range" min="0" max="1" step="0.05"><output></output></label>
        <button class="ae-cls" type="button">Query: the model's token</button>
        <button class="ae-export" type="button">Export one HTML file</button>
      </div>
      <div id="vit-gallery" class="ae-gallery"></div>
      <p class="ae-note"></p>
      <p class="ae-exported ae-note"></p>
    </div>
  </div>
  <div class="ae-extra"></div>
</div>`;

function render({ model, el }) {
  el.innerHTML = TEMPLATE;
  const $ = (s) => el.querySelector(s);
  const waiting = new Map(), me = Math.random().toString(36).slice(2);  // this view's questions (a widget shown twice has two)
  let asked = 0;
  const ask = (fn, args) =>
    new Promise((ok) => {
      const id = `${me}:${++asked}`;
      waiting.set(id, ok);
      model.send({ ask: id, fn, args });
    });
  const onMessage = (msg) => {
    if (msg && msg.answer !== undefined && waiting.has(msg.answer)) {
      waiting.get(msg.answer)(msg.result);
      waiting.delete(msg.answer);
    }
  };
  model.on("msg:custom", onMessage);

  // the script's world: its document is this widget's element, its window holds its own state
  const scoped = {
    querySelector: (s) => el.querySelector(s),
    querySelectorAll: (s) => el.querySelectorAll(s),
    addEventListener: (...a) => el.addEventListener(...a),
    createElement: (t) => document.createElement(t),
  };
  const win = {
    get innerWidth() { return window.innerWidth; },
    get innerHeight() { return window.innerHeight; },
  };
  const watchers = [];
  const props = { value: model.get("payload") };
  LIVE({ live_maps: (a) => ask("live_maps", a), live_base: (t) => ask("live_base", t) }, props,
    (name, cb) => watchers.push(cb), scoped, win);
  const L = (el.attentionLive = win.attentionLive);

  // a drawing of the script becomes the picture itself (it lies over the img until the img changes)
  const keep = new MutationObserver((changes) => {
    for (const c of changes) {
      const cv = c.target;
      if (cv.tagName !== "CANVAS" || !cv.classList.contains("vit-live") || cv.style.display === "none") continue;
      const img = cv.parentElement && cv.parentElement.querySelector(":scope > img");
      if (img) img.src = cv.toDataURL();
    }
  });
  keep.observe(el, { subtree: true, attributes: true, attributeFilter: ["data-drawing"] });

  // The kernel hears of a change once the script has drawn it (at most 250 ms: L.settled, as the Space's events
  // wait), so its picture of the view follows the script's drawing and never cuts it short.
  async function tell(changes) {
    await L.settled([]);
    for (const [k, v] of Object.entries(typeof changes === "function" ? changes() : changes)) model.set(k, v);
    model.save_changes();
  }
  $("#vit-query-image").addEventListener("click", () => {
    if (["heads", "mean"].includes(model.get("view")) && L.pending)  // a patch asked by the script
      tell(() => ({ query: L.cur.query, layer: L.cur.layer }));
  });

  function slider(id, trait, max) {
    const box = $(`#${id}`), input = box.querySelector("input"), out = box.querySelector("output");
    if (max !== undefined) input.max = String(max);
    input.value = String(model.get(trait));
    out.textContent = input.value;
    input.addEventListener("input", () => (out.textContent = input.value));
    input.addEventListener("change", () => tell({ [trait]: Number(input.value) }));
  }

  function draw() {
    const s = model.get("state");
    $("#vit-caption strong").textContent = s.bold;
    $(".ae-what").textContent = s.what;
    $(".ae-note").textContent = model.get("note");
    $("#vit-query-image img").src = model.get("large");
    const tiles = model.get("tiles"), gallery = $("#vit-gallery");
    if (gallery.children.length !== tiles.length) {
      gallery.innerHTML = "";
      for (const _ of tiles) {
        const f = document.createElement("figure");
        f.className = "thumbnail-item";
        f.append(document.createElement("img"), document.createElement("figcaption"));
        gallery.append(f);
      }
    }
    const chosen = model.get("view") === "mean" ? s.heads : ["heads", "masks"].includes(model.get("view")) ? model.get("head") : -1;
    tiles.forEach(([src, caption], i) => {
      const f = gallery.children[i];
      f.style.outline = i === chosen ? "2px solid #0aa" : "";
      f.querySelector("img").src = src;
      f.querySelector("img").alt = caption;
      f.querySelector("figcaption").textContent = f.title = caption;
    });
    const view = $(".ae-view");
    if (!view.options.length)
      for (const [v, name] of s.views) view.append(new Option(name, v));
    view.value = model.get("view");
    $("#vit-threshold").style.display = ["masks", "fig3"].includes(model.get("view")) ? "" : "none";
    for (const [id, trait] of [["vit-layer", "layer"], ["vit-head", "head"], ["vit-threshold", "threshold"], ["vit-alpha", "alpha"]]) {
      const box = $(`#${id}`);
      box.querySelector("input").value = String(model.get(trait));
      box.querySelector("output").textContent = String(model.get(trait));
    }
    $(".ae-extra").innerHTML = model.get("extra");
  }

  const s = model.get("state");
  slider("vit-layer", "layer", s.layers - 1);
  slider("vit-head", "head", s.heads - 1);
  slider("vit-threshold", "threshold");
  slider("vit-alpha", "alpha");
  $(".ae-view").addEventListener("change", (e) => tell({ view: e.target.value }));
  $(".ae-cls").addEventListener("click", () => model.send({ ask: 0, fn: "default_query", args: null }));
  $(".ae-export").addEventListener("click", async () => {
    $(".ae-exported").textContent = "Writing…";
    $(".ae-exported").textContent = await ask("export", null);
  });
  // a head tile clicked: the script draws it at once; the kernel then draws the same view
  $("#vit-gallery").addEventListener("click", (e) => {
    const tile = e.target.closest(".thumbnail-item");
    const i = [...$("#vit-gallery").children].indexOf(tile);
    if (i < 0 || !["heads", "mean"].includes(model.get("view"))) return;
    tell(i === s.heads ? { view: "mean" } : { head: i });
  });
  const redraw = () => {
    draw();
    props.value = model.get("payload");
    for (const cb of watchers) cb();
  };
  model.on("change:payload", redraw);
  draw();
  return () => {
    keep.disconnect();
    model.off("msg:custom", onMessage);
    model.off("change:payload", redraw);
  };
}

export default { render };
