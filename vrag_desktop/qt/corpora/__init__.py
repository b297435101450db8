"""The Corpora dock: corpora and their files, drag-and-drop, background indexing."""
