"""The Gradio UI: one module per tab, the only code that imports gradio. `app.py` composes them.

vit_tab         ViT attention maps: the events; vit_handlers what they answer; vit_fields the
                visitor's pass and the fields fitted to it; vit_layout its components; vit_panels the second
                model and the feature views; vit_api its endpoints (/attention_maps, /feature_maps);
                vit_live the hidden component whose script draws the large map in the browser
video_tab       the ViT tab's Video sub-tab; video_api its endpoint (/attention_video)
retrieval_tab   MNIST retrieval by attention; retrieval_layout its pictures and trained section;
                retrieval_api its endpoints (/retrieval_*)
calculator_tab  the Q/K/V calculator (/calculate, /calculate_from_x); calculator_patches its image part
                and calculator_api its endpoints (/calculate, /calculate_from_x, /patch_attention)
components      shared pieces: typed errors as messages, inputs handed over as sent
app.css         page-wide CSS, given to launch() (APP_CSS)
server          launch()'s other arguments: the guard in front of Gradio's app (attention.serving.guard)
"""

from importlib import resources

APP_CSS = (resources.files(__name__) / "app.css").read_text()
