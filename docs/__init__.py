"""docs/rules.md, shipped as the package `ptoc.docs` for `ptoc explain`."""
