"""How results are shown: one table layer (Markdown/CSV/JSON), the sweep table, run reports
and comparisons, emitted YAML, plots. No terminal UI here: the rich views live in cli/."""
