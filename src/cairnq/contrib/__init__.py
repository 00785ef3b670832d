"""Integrations with web frameworks: ``cairnq.contrib.django``, ``cairnq.contrib.starlette``."""
