"""The Q/K/V calculator tab and its endpoints."""
