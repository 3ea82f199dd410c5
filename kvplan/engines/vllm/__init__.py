"""vLLM's start-up, offline: `build` (the worker start-up up to the planner) → `planner` (pool
stride → demand → check → blocks → capacity), releases 0.31–0.34 as data in `profiles`."""
