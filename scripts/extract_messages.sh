#!/bin/sh
# Re-extract the worker pages' messages (babel.cfg) and merge them into every catalog.
# Then translate the new entries in webapp/locales/<locale>/LC_MESSAGES/messages.po
# (tests/webapp/test_translations.py fails until every one has a translation).
set -eu
cd "$(dirname "$0")/.."
PYBABEL="${PYBABEL:-.venv/bin/pybabel}"
"$PYBABEL" extract -F babel.cfg -k N_ -k PageError:2 -k SubmissionError:2 -k VoteError:2 \
    --no-location --sort-output --omit-header -o webapp/locales/messages.pot .
"$PYBABEL" update -i webapp/locales/messages.pot -d webapp/locales --no-fuzzy-matching \
    --ignore-obsolete --width 100
