"""What the durable steps show above the worker and the client: the Steps card of
the dashboard's task page (``pages``).

This module builds on the dashboard, so nothing below it imports it: the dashboard
imports it by the name the extension declares (``Steps.pages``).
"""
