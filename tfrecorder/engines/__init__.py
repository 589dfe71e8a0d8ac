"""Engines execute a plan: they move rows to workers and bytes to files, nothing more."""
