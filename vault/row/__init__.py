"""The row's plaintext side: records, chunking, slices and summaries (sealing is in ``keys/recipe.py``)."""
