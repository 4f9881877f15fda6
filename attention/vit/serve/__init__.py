"""One server's visitors: the pass store, the live route, the GPU wrapper, inputs, permalinks, the video job."""
