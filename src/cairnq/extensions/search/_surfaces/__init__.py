"""The search extension's surfaces: its parts of the command line and the dashboard."""
