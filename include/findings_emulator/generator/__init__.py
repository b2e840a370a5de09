"""Deterministic generation of the emulated deployment: small entities (``world``) and findings (``findings``)."""
