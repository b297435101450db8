"""The Models view: the catalogue and the models folder, downloads, the hub settings (issue 28)."""
