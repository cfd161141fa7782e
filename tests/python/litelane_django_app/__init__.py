"""A Django app for tests/python/test_django.py."""
