// Keyboard and screen readers, page-wide: what Gradio 6.31's own controls leave out (attention/ui/common/a11y.py
// says why). Runs as the `js_on_load` of a hidden component; `props.value`: a tab's names, JSON
// {CSS selector: name, or [names of the matches in document order]}, given to every focusable match without one.
// window.attentionA11y.commits counts the keyboard changes committed (tests wait on it: the page's own signal).
const A = (window.attentionA11y = window.attentionA11y || { names: {}, commits: 0 });
Object.assign(A.names, JSON.parse(props.value || "{}"));

const MOVES = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown"]);
const BACK = new Set(["ArrowLeft", "ArrowUp", "PageUp"]);
const SETTLE = 300;  // ms without a key on a slider: its keyboard change is committed

function name() {
  // Gradio's empty-value placeholder names itself with aria-label but has no role (axe: aria-prohibited-attr)
  for (const e of document.querySelectorAll(".empty[aria-label]:not([role])")) e.setAttribute("role", "img");
  for (const [sel, n] of Object.entries(A.names))
    document.querySelectorAll(sel).forEach((e, i) => {
      const v = Array.isArray(n) ? n[i] : n;
      if (v && e.getAttribute("aria-label") !== v) e.setAttribute("aria-label", v);
    });
}

// a radio group's next choice for `key` (Gradio gives each choice's input its own name, so the browser's own
// arrow keys see groups of one): the choices of the radio's fieldset, in order, wrapping round
function nextRadio(radio, key) {
  const group = radio.closest("fieldset");
  const all = group ? [...group.querySelectorAll('input[type="radio"]:not(:disabled)')] : [];
  const i = all.indexOf(radio);
  if (i < 0 || all.length < 2) return null;
  if (key === "Home") return all[0];
  if (key === "End") return all[all.length - 1];
  return all[(i + (BACK.has(key) ? -1 : 1) + all.length) % all.length];
}

if (!A.listening) {  // once per page, on the document: Gradio re-renders the elements themselves
  A.listening = true;
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    // a slider moved by keys: remember where it was; committed when the key is let go
    if (t.type === "range" && MOVES.has(e.key) && t.dataset.keyFrom === undefined) t.dataset.keyFrom = t.value;
    if (t.type === "radio" && MOVES.has(e.key)) {
      const to = nextRadio(t, e.key);
      if (!to) return;
      e.preventDefault();
      to.focus();
      to.click();  // Gradio's own input and select events, as a click on it
    }
    // Enter in a slider's number box commits it, as leaving the box does (Gradio's `release` fires on blur)
    if (e.key === "Enter" && t.type === "number" && t.closest(".tab-like-container")) t.blur();
  }, true);
  // Gradio fires a slider's `release` on pointerup (and on leaving its number box) only: a keyboard change is
  // committed the same way once the keys rest for SETTLE ms (a held key, or several presses: once, at the end),
  // if the value moved. The value the keys reached is kept (an answer to an earlier change arriving meanwhile may
  // have put the range back), synced into Gradio's own value (the range's `input` event), then released.
  document.addEventListener("keyup", (e) => {
    const t = e.target;
    if (t.type !== "range" || t.dataset.keyFrom === undefined) return;
    const to = t.value;
    clearTimeout(t.keySettle);  // (per slider: a key on another slider does not cancel this one's commit)
    t.keySettle = setTimeout(() => {
      const from = t.dataset.keyFrom;
      delete t.dataset.keyFrom;
      if (to === from) return;
      A.commits += 1;
      t.value = to;
      t.dispatchEvent(new Event("input", { bubbles: true }));
      t.dispatchEvent(new PointerEvent("pointerup", { bubbles: true }));
    }, SETTLE);
  }, true);
  let queued = false;  // names again after Gradio re-renders (at most once a frame)
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      name();
    });
  }).observe(document.body, { childList: true, subtree: true });
}
name();
