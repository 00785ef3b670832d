"""Blocking modules generated from ``cairnq._async`` by ``scripts/generate_sync.py``.

Do not edit the modules here: edit their source in ``cairnq._async`` and regenerate.
"""
