"""One fast adapter module per model family (config dict → `ModelDescription`).

Each module is imported by name only by the adapter registry (`kvplan.models`, `_Ref`), lazily, so a
check loads the one adapter its config needs. Families never import each other: what several share
lives in the helper modules `_plain.py` / `_shared.py`, which are not families.
"""
