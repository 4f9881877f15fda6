"""The Gradio UI: one module per tab, the only code that imports gradio. `app.py` composes them.

vit_tab         ViT attention maps (/attention_maps)
retrieval_tab   MNIST retrieval by attention (/retrieval_*)
calculator_tab  the Q/K/V calculator (/calculate, /calculate_from_x, /patch_attention)
components      shared pieces: typed errors as messages, inputs handed over as sent
"""
