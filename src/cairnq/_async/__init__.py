"""The async source of the code whose blocking twin is generated into ``cairnq._sync``.

Edit these modules, then run ``python scripts/generate_sync.py``.
"""
