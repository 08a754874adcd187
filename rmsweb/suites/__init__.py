"""Suites: tasks with setup, evaluation and (offline suites) scripted experts."""
