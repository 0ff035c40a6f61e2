"""Helpers the tests share, one concern per module; conftest files hold fixtures only, and no test module imports
another."""
