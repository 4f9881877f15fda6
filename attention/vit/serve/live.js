// The large map and the head tiles redrawn in this browser the moment a patch, a layer, a head or an
// opacity is picked (attention/vit/serve/live.py says why and what the server sends). Runs as the
// `js_on_load` of the hidden #vit-live component: `props.value` is the JSON of `live.payload` after
// every answer; `server.live_maps` / `server.live_base` ask for a view's maps and for the base
// picture. The drawings are the server's (render.overlays, views.query_image, views.tiles) and lie
// over the <img>s until the server's own pictures are in. Where things go comes from the server
// (attention/vit/draw/drawing.py, `Layout.to_json` in the payload): the enlargements, the query's marks as
// rectangles, the tiles' maps and the gallery's reduction; this script holds only the rules it must run
// (PIL's blend, Pillow's box average, the click -> patch rule), each the server's.
// window.attentionLive.drawn counts the large maps drawn here, .answers the server's answers received (tests
// wait on them: the page's own signals that a drawing was made, an event finished).
const L = (window.attentionLive = window.attentionLive || { drawn: 0, asked: 0, drawings: 0, answers: 0 });
L.server = server;

function bytes(b64) {
  const s = atob(b64), out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

async function inflate(b64) {
  const stream = new Blob([bytes(b64)]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function decodeImage(url) {
  const img = new Image();
  img.src = url;
  await img.decode();
  const c = document.createElement("canvas");
  [c.width, c.height] = [img.naturalWidth, img.naturalHeight];
  const g = c.getContext("2d", { willReadFrequently: true });
  g.drawImage(img, 0, 0);
  return g.getImageData(0, 0, c.width, c.height);
}

// A new answer: the view it shows becomes ours; the base picture is fetched once per pass.
L.receive = async function (json) {
  if (!json) return;
  L.answers += 1;
  const p = JSON.parse(json);
  p.lutBytes = bytes(p.lut);
  // a refused change (attention/ui/vit/refusals.py): the last good view again, this browser's own drawing of
  // the refused one (a crosshair, a layer) taken off at once, not left until the server's picture changes
  if (p.rollback) for (const cv of document.querySelectorAll("canvas.vit-live")) cv.style.display = "none";
  reveal();
  L.p = p;
  L.cur = { layer: p.layer, head: p.head, view: p.view, query: p.query, marks: p.marks, maps: null };
  const maps = await inflate(p.maps);
  if (L.p !== p) return;
  L.cur.maps = maps;
  if (L.baseToken !== p.token) {
    L.base = null;
    L.baseToken = p.token;
    const url = await L.server.live_base(p.token);
    if (url && L.baseToken === p.token) L.base = await decodeImage(url);
  }
};

// A patch or a layer: that view's maps from the server (no queue), drawn if still the latest asked.
function ask(query, layer) {
  L.pending = fetchMaps(query, layer).finally(() => (L.pending = null));
}

// What the tab's events wait for before they go to the server (their `js`): the drawing here first,
// so the two do not compete for these 2 cores; at most WAIT ms.
const WAIT = 250;
L.settled = (args) =>
  Promise.race([L.pending || Promise.resolve(), new Promise((ok) => setTimeout(ok, WAIT))]).then(() => args);

async function fetchMaps(query, layer) {
  const p = L.p, n = ++L.asked;
  Object.assign(L.cur, { query, layer, maps: null });
  const got = await L.server.live_maps([p.token, query, layer]);
  if (!got || n !== L.asked || L.p !== p) return;
  const maps = await inflate(got.maps);
  if (n !== L.asked || L.p !== p) return;
  Object.assign(L.cur, { query: got.query, layer: got.layer, marks: got.marks, maps });
  show();
}

function blendTable(alpha) {  // PIL's Image.blend of one channel, in float32 and truncated: [base * 256 + colour]
  if (L.blend && L.blend.alpha === alpha) return L.blend.table;
  const a = Math.fround(alpha), t = new Uint8Array(65536);
  for (let v = 0; v < 256; v++) for (let l = 0; l < 256; l++) t[v * 256 + l] = Math.trunc(Math.fround(v + Math.fround(a * (l - v))));
  L.blend = { alpha, table: t };
  return t;
}

// Map `which` (a row of `maps`: a head, or the mean last) over the base, enlarged `s` times, `marks`
// painted (the server's rectangles: drawing.Layout.marks_json), then reduced `k` times (boxReduce): ImageData.
function picture(p, maps, which, s, marks, k = 1) {
  const base = L.base, [gh, gw] = p.grid, G = gh * gw, step = p.patch * s, bw = base.width;
  const w = bw * s, h = base.height * s, out = new ImageData(w, h);
  const o = new Uint32Array(out.data.buffer), b = base.data, lut = p.lutBytes, T = blendTable(p.alpha);
  const cell = new Int32Array(w), bx = new Int32Array(w);
  for (let x = 0; x < w; x++) [cell[x], bx[x]] = [Math.min(gw - 1, Math.floor(x / step)), Math.floor(x / s)];
  for (let y = 0; y < h; y++) {
    const row = which * G + Math.min(gh - 1, Math.floor(y / step)) * gw, by = Math.floor(y / s) * bw;
    for (let x = 0; x < w; x++) {
      const c = maps[row + cell[x]] * 3, i = (by + bx[x]) * 4;
      o[y * w + x] = 0xff000000 | (T[(b[i + 2] << 8) | lut[c + 2]] << 16) | (T[(b[i + 1] << 8) | lut[c + 1]] << 8) | T[(b[i] << 8) | lut[c]];
    }
  }
  for (const [y0, y1, x0, x1, r, g, bl] of marks || []) {  // drawing.paint: in order, inside the picture
    const v = 0xff000000 | (bl << 16) | (g << 8) | r;
    for (let y = y0; y < y1; y++) o.fill(v, y * w + x0, y * w + x1);
  }
  return k > 1 ? boxReduce(out, k) : out;
}

// drawing.box_reduce, summed and rounded as Pillow's Image.reduce: each k x k box (an edge box over the
// n pixels it has) -> (sum + n // 2) * m >> 24, m = 2^32 / (256 n) in float32, truncated.
function boxReduce(img, k) {
  const W = img.width, H = img.height, w = Math.ceil(W / k), h = Math.ceil(H / k), out = new ImageData(w, h);
  const a = img.data, o = out.data, recip = new Map();
  for (let y = 0; y < h; y++) {
    const y0 = y * k, y1 = Math.min(H, y0 + k);
    for (let x = 0; x < w; x++) {
      const x0 = x * k, x1 = Math.min(W, x0 + k), n = (y1 - y0) * (x1 - x0);
      if (!recip.has(n)) recip.set(n, Math.floor(Math.fround(4294967296 / Math.fround(256 * n))));
      const m = recip.get(n), half = n >> 1, sum = [0, 0, 0];
      for (let yy = y0; yy < y1; yy++)
        for (let i = (yy * W + x0) * 4, end = (yy * W + x1) * 4; i < end; i += 4) {
          sum[0] += a[i];
          sum[1] += a[i + 1];
          sum[2] += a[i + 2];
        }
      const j = (y * w + x) * 4;
      for (let c = 0; c < 3; c++) o[j + c] = Math.floor(((sum[c] + half) * m) / 16777216) & 255;
      o[j + 3] = 255;
    }
  }
  return out;
}

// Where a canvas must lie to cover `img` exactly: its box inside the parent's border, and its object-fit.
function place(img) {
  const n = img.getBoundingClientRect(), parent = img.parentElement, box = parent.getBoundingClientRect();
  return {
    left: `${n.left - box.left - parent.clientLeft}px`, top: `${n.top - box.top - parent.clientTop}px`,
    width: `${n.width}px`, height: `${n.height}px`, objectFit: getComputedStyle(img).objectFit, display: "block",
  };
}

// Lay `out` over `img` in a canvas placed by `place` (measured before any canvas is touched: one layout),
// until the img's own picture changes (the server's is in) or 10 s pass (an answer that never came):
// no encoding, and clicks go through to the img.
function cover(img, out, where = place(img)) {
  let cv = img.parentElement.querySelector(":scope > canvas.vit-live");
  if (!cv) {
    cv = document.createElement("canvas");
    cv.className = "vit-live";
    cv.style.cssText = "position:absolute;pointer-events:none;z-index:1";
    if (getComputedStyle(img.parentElement).position === "static") img.parentElement.style.position = "relative";
    img.parentElement.appendChild(cv);
  }
  Object.assign(cv.style, where);
  [cv.width, cv.height] = [out.width, out.height];
  cv.getContext("2d").putImageData(out, 0, 0);
  const shown = img.src, since = performance.now(), mark = (cv.dataset.drawing = String(++L.drawings));
  const poll = setInterval(() => {
    const gone = !img.isConnected || (img.src !== shown && img.complete), late = performance.now() - since > 10000;
    if (cv.dataset.drawing !== mark) clearInterval(poll);  // drawn again: the newer drawing watches
    else if (gone || late) [cv.style.display] = ["none", clearInterval(poll)];
  }, 30);
  return cv;
}

// The large map now, then (after that frame is painted) the head tiles, in one task, unless only the
// head changed (`tiles_too` false: they stay as they are).
function show(tiles_too = true) {
  const p = L.p, cur = L.cur, img = document.querySelector("#vit-query-image img");
  if (!img || !L.base || !cur.maps || !img.naturalWidth) return false;
  const out = picture(p, cur.maps, cur.view === "mean" ? p.heads : cur.head, p.scale, cur.marks.big);
  cover(img, out);
  L.last = out;  // (tests compare it with the server's picture)
  L.drawn += 1;
  const n = L.drawn;
  requestAnimationFrame(() => {
    L.paintedAt = performance.now();
    if (tiles_too) setTimeout(() => tiles(n), 0);
  });
  return true;
}

// The gallery's tiles, the maps drawing.tile_rows names for the view. While the gallery holds another number
// of images (Gradio is replacing it: an answer mid-update, or a view that changes the tiles), they are drawn
// once it settles (looked at every SETTLE ms, for at most 2 s), unless a newer drawing came meanwhile.
const SETTLE = 25;
function tiles(n, tries = 0) {
  const p = L.p, cur = L.cur, imgs = [...document.querySelectorAll("#vit-gallery .thumbnail-item img")];
  const which = p.tile_rows[cur.view] || [];
  L.lastTiles = [];
  if (n !== L.drawn) return;  // a newer drawing: it draws its own tiles
  if (imgs.length !== which.length || !imgs.every((img) => img.naturalWidth)) {
    if (tries < 2000 / SETTLE) setTimeout(() => tiles(n, tries + 1), SETTLE);
    return;
  }
  const where = imgs.map(place);
  imgs.forEach((img, i) => {  // at the size the server sends them: reduced `tile_reduce` times
    const out = picture(p, cur.maps, which[i], p.tile_scale, cur.marks.tile, p.tile_reduce);
    cover(img, out, where[i]);
    L.lastTiles.push(out);
  });
  L.tilesAt = performance.now();
}

const ready = () => L.p && L.base && L.cur && ["heads", "mean"].includes(L.cur.view);

function onPatch(e) {  // Gradio's own click -> pixel rule (Image's select), then drawing.patch_at
  const img = e.target, p = L.p;
  const n = img.getBoundingClientRect(), r = Math.min(n.width / img.naturalWidth, n.height / img.naturalHeight, 1);
  const x = Math.round((e.clientX - n.left - (n.width - img.naturalWidth * r) / 2) / r);
  const y = Math.round((e.clientY - n.top - (n.height - img.naturalHeight * r) / 2) / r);
  if (x < 0 || x >= img.naturalWidth || y < 0 || y >= img.naturalHeight) return;
  L.clicked = [x, y];  // the latest click: the tab's click job reads it (Gradio's rerun replays the first's)
  if (!ready()) return;
  const step = p.patch * p.scale, [gh, gw] = p.grid;
  ask([Math.min(gh - 1, Math.floor(y / step)), Math.min(gw - 1, Math.floor(x / step))], L.cur.layer);
}

// The caption's bold words for a head drawn here (the server's answer then brings its whole caption, and
// the highlighted tile): the wording of attention.ui.vit.layout.map_caption for the two views drawn here.
function caption() {
  const b = document.querySelector("#vit-caption strong");
  if (b) b.textContent = L.cur.view === "mean" ? `the mean of the ${L.p.heads} heads` : `head ${L.cur.head}`;
}

function onHead(e) {
  const tile = e.target.closest(".thumbnail-item");
  if (!tile || !ready() || !L.cur.maps) return;
  const i = [...document.querySelectorAll("#vit-gallery .thumbnail-item")].indexOf(tile);
  if (i < 0 || i > L.p.heads) return;
  const mean = i === L.p.heads;
  if (mean) L.cur.view = "mean";
  else L.cur.head = i;
  show(mean);  // the tiles stay, but the mean view shows one (the server's answer brings it)
  caption();
}

function onHeadSlider(e) {
  const head = Number(e.target.value);
  if (!ready() || !L.cur.maps || !Number.isInteger(head) || head < 0 || head >= L.p.heads) return;
  L.cur.head = head;
  show(false);
  caption();
}

function onOpacity(e) {
  const alpha = Number(e.target.value);
  if (!ready() || !L.cur.maps || !(alpha >= 0 && alpha <= 1)) return;
  L.p.alpha = alpha;
  show();
}

function onLayer(e) {
  const layer = Number(e.target.value);
  if (!ready() || !Number.isInteger(layer) || layer < 0 || layer >= L.p.layers) return;
  ask(L.cur.query, layer);
}

// Phones: the view, the upload and the examples lie far under the map (the map comes first); after an
// action there, the map is brought back into view when its answer comes (attention/ui, issue 37).
const FAR = "#vit-controls, #vit-examples";
function reveal() {
  const far = L.farAt && performance.now() - L.farAt < 60000;
  L.farAt = 0;
  const top = document.querySelector("#vit-caption");
  if (!far || !top || window.innerWidth > 768) return;
  const r = top.getBoundingClientRect();
  if (r.top < 0 || r.top > window.innerHeight / 2) top.scrollIntoView({ block: "start", behavior: "instant" });
}

Object.assign(L, { picture, boxReduce, show });  // (for tests and benches)

if (!L.listening) {  // once per page, on the document: Gradio re-renders the elements themselves
  L.listening = true;
  document.addEventListener("click", (e) => e.target.matches?.("#vit-query-image img") && onPatch(e), true);
  for (const kind of ["pointerdown", "change"])  // (a file chosen fires change, not pointerdown)
    document.addEventListener(kind, (e) => { if (e.target.closest?.(FAR)) L.farAt = performance.now(); }, true);
  document.addEventListener("click", (e) => e.target.closest?.("#vit-gallery") && onHead(e), true);
  // Enter in a slider's number box commits it as leaving the box does (Gradio's `release` fires on blur only)
  document.addEventListener("keydown", (e) => {
    const slider = e.target.closest?.("#vit-layer, #vit-head, #vit-threshold, #vit-alpha");
    if (e.key === "Enter" && e.target.type === "number" && slider) e.target.blur();
  }, true);
  // the sliders' ranges only: a typed number is drawn by the server alone (committed on blur, above)
  const on = { "#vit-layer": onLayer, "#vit-head": onHeadSlider, "#vit-alpha": onOpacity };
  document.addEventListener("change", (e) => {
    if (e.target.type !== "range") return;
    for (const [where, fn] of Object.entries(on)) if (e.target.closest?.(where)) fn(e);
  }, true);
}
watch("value", () => L.receive(props.value));
L.receive(props.value);
