"""Attention in a notebook (Jupyter, Colab, VS Code), no Gradio: every result shows itself (`display`: the
large map with the heads beside it, the class or prompt named) and `explore(res)` is the Space's clickable
view as a widget (`widget`, on anywidget: a patch clicked becomes the query, redrawn by the Space's own script).

    import attention
    res = attention.attention_maps(model, "examples/digits/digit_3.png", keep_qk=True)
    res                                   # the picture (a cell's last line)
    res.show(view="masks", layer=2)       # another view
    attention.explore(res)                # click a patch: its row, drawn in the browser
"""

from attention.notebook.display import Picture

__all__ = ["Picture", "explore"]


def explore(res, **options):
    """The explorer widget for `res` (AttentionMaps with keep_qk=True): see `attention.notebook.widget.explore`."""
    from attention.notebook.widget import explore as _explore  # here: anywidget's import costs ~2 s, paid on use

    return _explore(res, **options)
