"""The Gradio UI: one folder per tab, the only code that imports gradio. `app.py` composes them.

vit/            ViT attention maps: tab (the events), handlers (what they answer), fields (the visitor's pass
                and the fields fitted to it), layout (its components, tab.css), panels (the second model and
                the feature views), api (/attention_maps, /feature_maps), live (the hidden component whose script
                draws the large map in the browser), examples, tour, refusals; the panels under the map
                (relevance_panel, text_panel, faithfulness_panel, stepwise_panel) and stepwise_api
video/          the ViT tab's Video sub-tab (tab); api its endpoint (/attention_video)
retrieval/      MNIST retrieval by attention (tab); layout its pictures and trained section; api its endpoints
calculator/     the Q/K/V calculator (tab); edit, patches its image part, api its endpoints (/calculate,
                /calculate_from_x, /patch_attention)
common/         what every tab shares: server (launch()'s other arguments: the guard in front of Gradio's app,
                attention.crowd.guard), admit, fair_queue, callers, endpoint, components (typed errors as
                messages, inputs handed over as sent), api_docs, model_choices; app.css the page-wide CSS
                (APP_CSS, given to launch())
"""

from importlib import resources

APP_CSS = (resources.files("attention.ui.common") / "app.css").read_text()
