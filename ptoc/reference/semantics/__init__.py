"""Reference semantics of the IR ops, one module per op family (`common` holds what they share)."""
