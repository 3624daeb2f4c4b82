"""Preference-pair construction from LaMP-QA-style data: generate, verify, write a release source."""
