"""The Plan: verdict, margin, causes and what-ifs, from the engine's result."""
