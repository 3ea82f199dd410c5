"""The KV budget: GPU catalogue, weight bytes, available KV memory with its breakdown."""
