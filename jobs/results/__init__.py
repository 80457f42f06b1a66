"""A job's results: the files the portal may serve and the zip (files), the worker's words about
one photo or video in the reader's language (target_words), and their deletion after the admin's
number of days (retention)."""
