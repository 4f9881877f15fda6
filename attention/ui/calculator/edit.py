"""The calculator's matrices as a visitor edits them: one click opens a cell (Gradio's Dataframe opens
one on a double-click), the results say they are stale from the first keystroke of an edit until its
calculation comes back, and the preset's description gives way to "your own matrices" once edited.

    edit.build(about, preset, presets, editors)   # inside the calculator tab
"""

from __future__ import annotations

import gradio as gr

from attention.errors import html_text

# runs once per page (the hidden component's js_on_load): listeners on the document, as Gradio re-renders
EDIT_JS = """
if (!window.qkvEdit) {
  window.qkvEdit = true;
  const inTables = (e) => e.target.closest?.("[id^='qkv-table-']");
  document.addEventListener("click", (e) => {
    const cell = inTables(e) && e.target.closest("[data-testid^='cell-']");
    if (cell && !cell.querySelector("input, textarea"))
      cell.dispatchEvent(new MouseEvent("dblclick", { bubbles: true, cancelable: true, view: window }));
  });
  let watched = null;
  const pending = (on) => {
    const r = document.querySelector("#qkv-report");
    if (!r) return;
    r.classList.toggle("qkv-pending", on);
    if (watched !== r) {  // the report's own content changing: the calculation came back
      watched = r;
      new MutationObserver(() => r.classList.remove("qkv-pending")).observe(r, { childList: true, subtree: true });
    }
  };
  document.addEventListener("input", (e) => {
    if (inTables(e) || e.target.closest?.("[id^='qkv-text-']")) pending(true);
  }, true);
}
"""

EDIT_CSS = """
#qkv-report.qkv-pending { opacity: 0.45; }
#qkv-report.qkv-pending::before {
  content: "Stale: these results are of the matrices before your edit; press Enter to recalculate.";
  display: block; opacity: 1; font-weight: 600; color: #5d4300; background: #fff8e1; border: 1px solid #e0b000;
  border-radius: 6px; padding: 4px 10px; margin-bottom: 6px;
}
"""


def edited_about(name: str | None, presets: dict) -> str:
    """The text above the matrices once the visitor has edited them."""
    was = f" (edited from the preset “{html_text(name)}”)" if name in presets else ""
    return f"**Your own matrices**{was}: the preset's description no longer applies."


def build(about: gr.Markdown, preset: gr.Dropdown, presets: dict, editors: list) -> None:
    """The hidden script and style, and `about` replaced when any of `editors` (the matrices' tables
    and text boxes) is edited by the visitor."""
    gr.HTML("", html_template="", js_on_load=EDIT_JS, visible="hidden", head=f"<style>{EDIT_CSS}</style>")
    for ed in editors:
        ed.input(lambda name: edited_about(name, presets), preset, about, queue=False, api_visibility="private")
