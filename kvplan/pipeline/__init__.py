"""One deployment end to end (deploy), and the searches built on it: sweep, ci batch, fit."""
