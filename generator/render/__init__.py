"""Renderers: one per target, from a schedule to the text of files."""
