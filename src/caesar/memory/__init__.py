"""Memory: facts, episodes, the semantic index, and the pure formulas that rank them."""
