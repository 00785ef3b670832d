"""The async source of the client, whose blocking twin is generated into ``cairnq._sync``.

Edit the modules here, then run ``python scripts/generate_sync.py``.
"""
