"""What every tab shares: the server's launch arguments, admission, Gradio's fair queue, callers, components."""
