#!/usr/bin/env bash
# Bring the Simplified Chinese catalogue up to date with the code (portal, templates, and the plain
# words of cluster/states.py; the worker speaks English in its logs), then compile it:
#   1. makemessages: new strings in (untranslated), strings no longer in the code out;
#   2. translations waiting in locale/zh_Hans/fragments/*.po (written while several changes were made
#      at once) fill the untranslated entries; the fragments are then emptied (git keeps their history);
#   3. msgfmt --check compiles django.mo; the untranslated and fuzzy counts are printed
#      (tests/jobs/test_translations.py fails on any).
set -euo pipefail
cd "$(dirname "$0")/.."
PO=locale/zh_Hans/LC_MESSAGES/django.po
.venv/bin/python manage.py makemessages -l zh_Hans --ignore=.venv --ignore=bench --ignore=tests --ignore=artifacts \
  --ignore=worker --no-location >/dev/null  # cluster/states.py marks its plain words for the catalogue
# makemessages guesses a new string's translation from a similar old one and marks it fuzzy: a guess
# is not a translation (a fuzzy entry is never shown), so it is emptied for the fragments or a person.
msgattrib --clear-fuzzy --empty --no-obsolete -o "$PO" "$PO"
shopt -s nullglob
fragments=(locale/zh_Hans/fragments/*.po)
if ((${#fragments[@]})); then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  msgcat --use-first -o "$tmp/fragments.po" "${fragments[@]}"
  msgmerge --quiet --no-fuzzy-matching --no-location -C "$tmp/fragments.po" -o "$tmp/django.po" "$PO" "$PO"
  cp "$tmp/django.po" "$PO"
  rm -f "${fragments[@]}"
fi
msgfmt --check -o locale/zh_Hans/LC_MESSAGES/django.mo "$PO"
# the admin scripts' strings Django's own catalogue lacks (written by hand: see its header)
msgfmt --check -o locale/zh_Hans/LC_MESSAGES/djangojs.mo locale/zh_Hans/LC_MESSAGES/djangojs.po
chmod 644 "$PO" locale/zh_Hans/LC_MESSAGES/django.mo locale/zh_Hans/LC_MESSAGES/djangojs.mo
left=$(($(msgattrib --untranslated --no-obsolete "$PO" | grep -c '^msgid' || true) - 1))  # less the header
echo "untranslated: $((left < 0 ? 0 : left)), fuzzy: $(msgattrib --only-fuzzy --no-obsolete "$PO" | grep -c '^msgid' || true)"
