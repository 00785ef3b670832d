"""The task policies' surfaces: their part of ``cairnq get``."""
