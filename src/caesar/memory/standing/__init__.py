"""Standing statements: what the person says about themselves that holds (issue #46)."""
