"""Pictures and files of an engine result (they take AttentionMaps and values, never a server's pass)."""
