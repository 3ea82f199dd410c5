"""Rendering: rich tables, markdown, charts (JSON comes from the models themselves)."""
