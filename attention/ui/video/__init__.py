"""The ViT tab's Video sub-tab and its endpoint."""
