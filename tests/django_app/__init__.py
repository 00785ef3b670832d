"""A Django project for the tests: views that enqueue, tasks a worker runs."""
