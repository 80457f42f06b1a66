#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    # What the portal writes (database, uploads, outputs, logs) is its service user's alone.
    os.umask(0o077)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
