"""`cachescope simulate`: replay a CSV trace through shadow caches (written next)."""
