"""The ViT tab: its events, layout, handlers, fields, panels and endpoints."""
