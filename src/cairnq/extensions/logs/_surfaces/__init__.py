"""Attempt logs on the command line (``cairnq get``) and the dashboard's task page."""
